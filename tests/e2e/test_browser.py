"""A real server (`itsmreview serve`) driven by Debian's Chromium through Selenium."""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("ITSMREVIEW_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("ITSMREVIEW_CHROMEDRIVER", "/usr/bin/chromedriver"))
pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().decode().strip() == "ok":
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url}/_stcore/health did not answer ok within {timeout}s")


@pytest.fixture
def server(demo_database, tmp_path):
    source, data_dir = demo_database
    database = tmp_path / "demo.db"
    shutil.copyfile(source, database)
    port = _free_port()
    env = dict(
        os.environ,
        ITSMREVIEW_DATABASE_URL=f"sqlite:///{database}",
        ITSMREVIEW_DATA_DIR=str(data_dir),
    )
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "itsmreview.cli",
            "serve",
            "--port",
            str(port),
            "--address",
            "127.0.0.1",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture
def browser(requirement, tmp_path):
    requirement(
        CHROMIUM.exists() and CHROMEDRIVER.exists(),
        f"Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER})",
    )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _wait_for_heading(driver, text: str, timeout: float = 45) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(
        ec.text_to_be_present_in_element((By.TAG_NAME, "h1"), text)
    )


def _log_in(browser, server, username):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server)
    field = WebDriverWait(browser, 45).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "input[aria-label='Username']"))
    )
    field.send_keys(username)
    browser.find_element(By.CSS_SELECTOR, "input[aria-label='Password']").send_keys("itsm-demo")
    browser.find_element(By.XPATH, "//button[.//p[text()='Log in']]").click()


def _screenshot(browser, tmp_path, name):
    shots = Path(os.environ.get("ITSMREVIEW_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    time.sleep(2)  # let charts finish drawing
    assert browser.save_screenshot(str(shots / name))


def test_lead_logs_in_and_opens_coverage(server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    wait = WebDriverWait(browser, 45)
    link = wait.until(
        ec.element_to_be_clickable(
            (By.CSS_SELECTOR, "a[data-testid='stSidebarNavLink'][href$='/coverage']")
        )
    )
    link.click()
    _wait_for_heading(browser, "Coverage")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid='stMetric']")))
    _screenshot(browser, tmp_path, "coverage.png")


def test_a_closed_dashboard_expander_computes_its_figures_when_opened(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    wait = WebDriverWait(browser, 45)
    body = (By.TAG_NAME, "body")
    wait.until(ec.text_to_be_present_in_element(body, "Progress per expert"))
    assert "Mean human rating per dimension" not in browser.find_element(*body).text
    summary = wait.until(
        ec.element_to_be_clickable(
            (By.XPATH, "//summary[.//p[text()='Realism by provenance and coverage']]")
        )
    )
    summary.click()
    wait.until(ec.text_to_be_present_in_element(body, "Mean human rating per dimension"))
    panel = summary.find_element(By.XPATH, "./..")
    wait.until(lambda _: len(panel.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")) == 2)


def test_expert_logs_in_and_sees_task_transcript_and_variant(server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _log_in(browser, server, "expert1")
    _wait_for_heading(browser, "My queue")
    wait = WebDriverWait(browser, 45)
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Source log variant"))
    assert browser.find_elements(By.CSS_SELECTOR, "[data-testid='stChatMessage']")
    _screenshot(browser, tmp_path, "queue.png")


def _tab_until(browser, predicate, limit: int = 120) -> bool:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    for _ in range(limit):
        if predicate(browser.switch_to.active_element):
            return True
        ActionChains(browser).send_keys(Keys.TAB).perform()
    return predicate(browser.switch_to.active_element)


def _group_label(browser) -> str:
    return browser.execute_script(
        "const g = document.activeElement.closest('[role=radiogroup]');"
        "return g ? (g.getAttribute('aria-label') || '') : '';"
    )


def test_an_expert_rates_a_task_with_the_keyboard_alone(server, browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server)
    wait = WebDriverWait(browser, 45)
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "input[aria-label='Username']")))
    keys = ActionChains(browser)
    assert _tab_until(browser, lambda e: e.get_attribute("aria-label") == "Username")
    keys.send_keys("expert1", Keys.TAB, "itsm-demo", Keys.ENTER).perform()
    _wait_for_heading(browser, "My queue")
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Your rating"))
    progress = browser.find_element(By.CSS_SELECTOR, "[data-testid='stProgress']").text
    required = [
        "Scenario realism",
        "Fit to the job persona",
        "Instruction clarity",
        "Ground-truth correctness",
        "Verifier alignment",
        "Fidelity to the source log variant",
        "Overall verdict",
    ]
    for label in required:
        assert _tab_until(
            browser,
            lambda e, label=label: (
                e.get_attribute("type") == "radio" and _group_label(browser).startswith(label)
            ),
        ), label
        ActionChains(browser).send_keys(Keys.SPACE).perform()
        time.sleep(1.5)  # the draft is kept on every change
    assert _tab_until(browser, lambda e: e.tag_name == "button" and "Submit rating" in e.text)
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    wait.until(
        lambda b: b.find_element(By.CSS_SELECTOR, "[data-testid='stProgress']").text != progress
    )
    toast = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid='stToast']")))
    assert "Rating submitted." in toast.text  # the confirmation survives the page's rerun
    _screenshot(browser, tmp_path, "keyboard.png")
