"""A real server (`itsmreview serve`) driven by Debian's Chromium through Selenium."""

import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
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


@contextmanager
def _serving(database: Path, data_dir, tmp_path):
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
def server(demo_database, tmp_path):
    source, data_dir = demo_database
    database = tmp_path / "demo.db"
    shutil.copyfile(source, database)
    with _serving(database, data_dir, tmp_path) as url:
        yield url


HOSTILE = ":smile: $$x^2$$ :red[alert] **bold** http://evil.example <b>tag</b>"


@pytest.fixture
def hostile_server(demo_database, tmp_path):
    """The demo with text in every task that Markdown, emoji codes and maths would change."""
    source, data_dir = demo_database
    database = tmp_path / "demo.db"
    shutil.copyfile(source, database)
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE tasks SET title = title || ' ' || ?", (HOSTILE,))
        connection.execute(
            "UPDATE task_versions SET instruction = instruction || char(10) || ?", (HOSTILE,)
        )
    with _serving(database, data_dir, tmp_path) as url:
        yield url


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
    # only the open tab is drawn: the map appears once its tab is chosen
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid='stGraphVizChart']")
    tab = wait.until(
        ec.element_to_be_clickable(
            (By.XPATH, "//*[@data-testid='stTab'][.//p[text()='Directly-follows map']]")
        )
    )
    tab.click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid='stGraphVizChart']")))


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


COUNT_RUNS = """
window.itsmRuns = 0;
const app = document.querySelector('[data-testid=stApp]');
new MutationObserver(() => {
  if (app.getAttribute('data-test-script-state') === 'running') window.itsmRuns += 1;
}).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
"""


def _scrolled(browser) -> float:
    return browser.execute_script(
        "return Math.max(document.scrollingElement.scrollTop, ...[...document.querySelectorAll("
        "'[data-testid=stMain], [data-testid=stAppViewContainer]')].map(e => e.scrollTop))"
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
    assert "Keys: 1-9" in browser.find_element(By.TAG_NAME, "body").text  # listed on the page
    wait.until(lambda b: b.switch_to.active_element.get_attribute("type") == "radio")
    progress = browser.find_element(By.CSS_SELECTOR, "[data-testid='stProgress']").text
    browser.execute_script(COUNT_RUNS)
    groups = browser.find_elements(By.CSS_SELECTOR, ".st-key-rubric [role=radiogroup]")
    labels = [g.get_attribute("aria-label") for g in groups]
    assert labels[-2:] == ["Overall verdict", "How sure are you of this rating?"], labels
    answers = "4343452344" + "1" + "4"  # ten dimensions, the verdict (accept), the confidence
    for key in answers:
        ActionChains(browser).send_keys(key).perform()
    chosen = browser.execute_script(
        "return [...document.querySelectorAll('.st-key-rubric [role=radiogroup]')].map(g => "
        "[...g.querySelectorAll('input[type=radio]')].findIndex(r => r.checked) + 1)"
    )
    assert "".join(map(str, chosen)) == answers  # each key chose a point and moved on
    assert browser.switch_to.active_element.text == "Submit rating"
    assert browser.execute_script("return window.itsmRuns") == 0  # not one rerun between items
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    wait.until(
        lambda b: b.find_element(By.CSS_SELECTOR, "[data-testid='stProgress']").text != progress
    )
    toast = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid='stToast']")))
    assert "Rating submitted. Next: " in toast.text  # the confirmation survives the rerun
    opened = browser.find_element(By.TAG_NAME, "h3").text
    assert toast.text.split("Next: ", 1)[1].rstrip(".") in opened  # the task that opens
    wait.until(lambda b: b.switch_to.active_element.get_attribute("type") == "radio")
    assert _scrolled(browser) == 0  # the next task opens at its top
    _screenshot(browser, tmp_path, "keyboard.png")


FOCUSED_ITEM = (
    "return document.activeElement.closest('[role=radiogroup]')?.getAttribute('aria-label')"
)
CHOSEN = (
    "return [...document.querySelectorAll('.st-key-rubric [role=radiogroup]')].map(g => "
    "[...g.querySelectorAll('input[type=radio]')].findIndex(r => r.checked) + 1)"
)


def test_tab_skips_an_item_to_the_next_one_not_to_its_help(server, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _log_in(browser, server, "expert1")
    _wait_for_heading(browser, "My queue")
    wait = WebDriverWait(browser, 45)
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Your rating"))
    wait.until(lambda b: b.switch_to.active_element.get_attribute("type") == "radio")
    groups = browser.find_elements(By.CSS_SELECTOR, ".st-key-rubric [role=radiogroup]")
    labels = [g.get_attribute("aria-label") for g in groups]
    helps = browser.find_elements(By.CSS_SELECTOR, ".st-key-rubric [data-testid=stTooltipIcon]")
    assert len(helps) >= 8  # each scored item keeps its "?" for the mouse
    before = browser.execute_script(CHOSEN)
    assert browser.execute_script(FOCUSED_ITEM) == labels[0]
    ActionChains(browser).send_keys(Keys.TAB).perform()  # leave the first item as it is
    assert browser.execute_script(FOCUSED_ITEM) == labels[1], (
        browser.switch_to.active_element.get_attribute("aria-label")
    )
    ActionChains(browser).send_keys("4").perform()  # the digit rates the item Tab went to
    chosen = browser.execute_script(CHOSEN)
    assert chosen[:2] == [before[0], 4] and chosen[2:] == before[2:]
    assert browser.execute_script(FOCUSED_ITEM) == labels[2]
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    assert browser.execute_script(FOCUSED_ITEM) == labels[1]  # back, past no help either
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stTooltipContent]")


def test_a_draft_is_kept_a_moment_after_a_change(server, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _log_in(browser, server, "expert2")
    wait = WebDriverWait(browser, 45)
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Your rating"))
    wait.until(lambda b: b.switch_to.active_element.get_attribute("type") == "radio")
    ActionChains(browser).send_keys("2").perform()
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Draft kept"))
    browser.refresh()  # a reload keeps the login and shows the draft
    first_item = "return [...document.querySelectorAll('.st-key-rubric [role=radiogroup]')" + (
        "].map(g => [...g.querySelectorAll('input')].findIndex(r => r.checked))[0]"
    )
    wait.until(lambda b: b.execute_script(first_item) == 1)  # the second point: "2"


def test_a_reload_or_a_link_keeps_the_login_until_logout(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 45)
    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    wait.until(lambda b: any(c["name"] == "itsmreview_session" for c in b.get_cookies()))
    browser.refresh()
    _wait_for_heading(browser, "Dashboard")
    browser.get(f"{server}/tasks")  # a link to a page
    _wait_for_heading(browser, "Tasks")
    browser.find_element(By.XPATH, "//button[.//p[text()='Log out']]").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "input[aria-label='Username']")))
    wait.until(lambda b: not any(c["name"] == "itsmreview_session" for c in b.get_cookies()))
    browser.get(f"{server}/tasks")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "input[aria-label='Username']")))
    assert (
        not browser.find_elements(By.TAG_NAME, "h1")
        or "Tasks" not in browser.find_element(By.TAG_NAME, "h1").text
    )


def test_task_text_is_shown_exactly_as_written(hostile_server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _log_in(browser, hostile_server, "expert1")
    wait = WebDriverWait(browser, 45)
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Your rating"))
    heading = browser.find_element(By.TAG_NAME, "h3")
    assert HOSTILE in heading.text.replace("\u2060", "")  # the title as typed
    assert not heading.find_elements(
        By.CSS_SELECTOR, "strong, b, span[style*=color], a:not([href^='#'])"
    )
    # the instruction's Markdown is drawn, and nothing else of it: no maths, link, colour,
    # emoji or HTML tag; its <b> is shown as written
    shown = "The instruction, drawn"
    instruction = browser.find_element(
        By.XPATH, "//details[.//summary[contains(., 'Instruction (')]]"
    )
    assert [e.text for e in instruction.find_elements(By.TAG_NAME, "strong")] == ["bold"], shown
    assert ":smile: $$x^2$$ :red[alert] bold http://evil.example <b>tag</b>" in (
        instruction.text.replace("\u2060", "")
    )
    assert not instruction.find_elements(By.CSS_SELECTOR, "b, span[style*=color], a, img")
    assert not browser.find_elements(By.CSS_SELECTOR, ".katex, a[href^='http://evil']")
    _screenshot(browser, tmp_path, "drawn.png")
    browser.find_element(By.XPATH, "//label[.//p[text()='Show raw text']]").click()
    wait.until(  # the title and the instruction, as typed
        lambda b: b.find_element(By.TAG_NAME, "body").text.replace("\u2060", "").count(HOSTILE) >= 2
    )
    assert not browser.find_elements(By.CSS_SELECTOR, ".katex, a[href^='http://evil']")
    _screenshot(browser, tmp_path, "verbatim.png")


def test_a_link_as_the_servers_first_request_opens_the_app_not_its_files(server, browser):
    """The first request after a start is a bookmarked page: the app's own navigation and
    login must run (a folder named `pages/` beside the entry point made Streamlit serve the
    page files bare, every file listed in the sidebar, until someone opened the root)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/model_review")
    wait = WebDriverWait(browser, 45)
    field = wait.until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "input[aria-label='Username']"))
    )
    field.send_keys("lead")
    browser.find_element(By.CSS_SELECTOR, "input[aria-label='Password']").send_keys("itsm-demo")
    browser.find_element(By.XPATH, "//button[.//p[text()='Log in']]").click()
    _wait_for_heading(browser, "Model review")
    sidebar = wait.until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid='stSidebar']"))
    )
    wait.until(lambda _: "Logged in as" in sidebar.text)
    for more in sidebar.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebarNavViewButton']"):
        more.click()  # a long list is folded under "View N more"
    links = [  # each link's text is its icon's name, then its title
        a.text.split("\n")[-1]
        for a in sidebar.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebarNavLink']")
    ]
    assert "Dashboard" in links and "Model review" in links
    assert not {"streamlit app", "users", "imports"} & set(links)
    # the start page keeps its own address: a bookmark of it opens it, with no "not found"
    browser.get(f"{server}/dashboard")
    _wait_for_heading(browser, "Dashboard")
    time.sleep(1)
    assert "Page not found" not in browser.find_element(By.TAG_NAME, "body").text


@pytest.fixture
def served(demo_database, tmp_path):
    """The demo served from a copy, with that copy's path (to change and read it directly)."""
    source, data_dir = demo_database
    database = tmp_path / "demo.db"
    shutil.copyfile(source, database)
    with _serving(database, data_dir, tmp_path) as url:
        yield url, database


def _submitted_by(database: Path, username: str) -> int:
    with sqlite3.connect(database) as connection:
        return connection.execute(
            "SELECT count(*) FROM ratings JOIN users ON users.id = ratings.expert_id "
            "WHERE users.username = ? AND ratings.status = 'submitted'",
            (username,),
        ).fetchone()[0]


def test_a_tab_open_when_its_expert_is_deactivated_submits_nothing(served, browser, tmp_path):
    """The rubric is a fragment: its submit runs without the page's own check of the login,
    so the write checks the session itself when it commits."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    server, database = served
    wait = WebDriverWait(browser, 45)
    _log_in(browser, server, "expert1")
    _wait_for_heading(browser, "My queue")
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Your rating"))
    wait.until(lambda b: b.switch_to.active_element.get_attribute("type") == "radio")
    for key in "4343452344" + "1" + "4":  # ten dimensions, the verdict, the confidence
        ActionChains(browser).send_keys(key).perform()
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Draft kept"))
    assert browser.switch_to.active_element.text == "Submit rating"
    before = _submitted_by(database, "expert1")
    deactivated = subprocess.run(
        [sys.executable, "-m", "itsmreview.cli", "users", "deactivate", "expert1"],
        env=dict(os.environ, ITSMREVIEW_DATABASE_URL=f"sqlite:///{database}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert deactivated.returncode == 0, deactivated.stderr
    ActionChains(browser).send_keys(Keys.ENTER).perform()  # the tab that was already open
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "session has ended"))
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "sign in again" in body and "nothing was saved" in body
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "input[aria-label='Username']")))
    time.sleep(1)  # a write that slipped through would have committed by now
    assert _submitted_by(database, "expert1") == before
    _screenshot(browser, tmp_path, "session-ended.png")


def _one_value(database: Path, sql: str, *arguments):
    with sqlite3.connect(database) as connection:
        return connection.execute(sql, arguments).fetchone()[0]


def _claim(database: Path, username: str, round_name: str) -> int:
    """An expert's claim in the round, as the queue page makes it (its assignment id)."""
    script = (
        "import sys\n"
        "from itsmreview.accounts.queries import user_by_username\n"
        "from itsmreview.db import session_scope\n"
        "from itsmreview.review.rounds.assignment import claim_next\n"
        "with session_scope() as session:\n"
        "    expert = user_by_username(session=session, username=sys.argv[1])\n"
        "    print(claim_next(session=session, actor=expert, round_name=sys.argv[2]).id)\n"
    )
    claimed = subprocess.run(
        [sys.executable, "-c", script, username, round_name],
        env=dict(os.environ, ITSMREVIEW_DATABASE_URL=f"sqlite:///{database}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert claimed.returncode == 0, claimed.stderr
    return int(claimed.stdout.split()[-1])


ROUND_OF = "SELECT {} FROM review_rounds WHERE name = 'Browser round'"  # the flow's round


def test_a_lead_runs_a_round_from_the_rounds_page(served, browser, tmp_path):
    """Issue 35's round flow on the Rounds page, each step read back from the database: the
    default filter previews the demo's drafts, one click opens the round over them, the lead
    admits two experts, hands the assignment one of them took to the other, releases it and
    closes the round. Its screenshots are the user guide's."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    server, database = served
    wait = WebDriverWait(browser, 45)
    body = (By.TAG_NAME, "body")

    def click(text: str) -> None:
        wait.until(ec.element_to_be_clickable((By.XPATH, f"//button[.//p[text()='{text}']]")))
        browser.find_element(By.XPATH, f"//button[.//p[text()='{text}']]").click()

    def pick(label: str, option: str) -> None:
        box = wait.until(
            ec.element_to_be_clickable(
                (By.XPATH, f"//div[@data-testid='stSelectbox'][.//p[text()='{label}']]//input")
            )
        )
        box.click()
        box.send_keys(option, Keys.ENTER)

    def admitted() -> list[str]:
        names = _one_value(
            database,
            "SELECT group_concat(users.username, ',') FROM round_experts "
            "JOIN users ON users.id = expert_id JOIN review_rounds ON review_rounds.id = round_id "
            "WHERE review_rounds.name = 'Browser round'",
        )
        return sorted(names.split(",")) if names else []

    def chosen(label: str) -> str:  # a select box's choice is its input's value
        return browser.find_element(By.CSS_SELECTOR, f"input[aria-label='{label}']").get_attribute(
            "value"
        )

    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    wait.until(
        ec.element_to_be_clickable(
            (By.CSS_SELECTOR, "a[data-testid='stSidebarNavLink'][href$='/rounds']")
        )
    ).click()
    _wait_for_heading(browser, "Review rounds")
    drafts = _one_value(database, "SELECT count(*) FROM tasks WHERE status = 'draft'")
    assert drafts >= 3, "the demo holds drafts for a new round"
    wait.until(ec.text_to_be_present_in_element(body, f"{drafts} task(s) match"))
    name = browser.find_element(By.CSS_SELECTOR, "input[aria-label='Round name']")
    name.send_keys(Keys.CONTROL, "a")
    name.send_keys("Browser round", Keys.ENTER)
    wait.until(lambda b: name.get_attribute("value") == "Browser round")
    _screenshot(browser, tmp_path, "round-new.png")
    click(f"Open round over {drafts} task(s)")
    wait.until(ec.text_to_be_present_in_element(body, "Browser round opened over"))
    size = _one_value(
        database,
        "SELECT count(*) FROM round_tasks JOIN review_rounds ON review_rounds.id = round_id "
        "WHERE review_rounds.name = 'Browser round'",
    )
    assert size == drafts
    assert _one_value(database, "SELECT count(*) FROM tasks WHERE status = 'draft'") == 0

    browser.find_element(By.XPATH, "//*[@role='tab'][.//p[text()='Manage a round']]").click()
    members = wait.until(
        ec.element_to_be_clickable(
            (
                By.XPATH,
                "//div[@data-testid='stMultiSelect'][.//p[text()='Experts admitted to the "
                "round']]//input",
            )
        )
    )
    members.click()
    members.send_keys("expert1", Keys.ENTER, "expert4", Keys.ENTER, Keys.ESCAPE)
    click("Save experts")
    wait.until(ec.text_to_be_present_in_element(body, "2 expert(s) admitted to Browser round"))
    assert admitted() == ["expert1", "expert4"]
    _screenshot(browser, tmp_path, "round-members.png")

    taken = _claim(database, "expert1", "Browser round")
    browser.refresh()
    _wait_for_heading(browser, "Review rounds")
    browser.find_element(By.XPATH, "//*[@role='tab'][.//p[text()='Manage a round']]").click()
    pick("Round", "Browser round")
    wait.until(lambda _: chosen("Assignment").startswith(f"#{taken} "))
    pick("Hand it to", "expert4")
    click("Reassign")
    wait.until(ec.text_to_be_present_in_element(body, f"Assignment {taken} handed to expert4"))
    status = "SELECT status FROM assignments WHERE id = ?"
    assert _one_value(database, status, taken) == "released"
    moved = _one_value(  # the same task, now expert4's
        database,
        "SELECT assignments.id FROM assignments JOIN users ON users.id = expert_id "
        "WHERE users.username = 'expert4' AND status = 'reserved' AND task_version_id = "
        "(SELECT task_version_id FROM assignments WHERE id = ?)",
        taken,
    )
    assert moved is not None
    _screenshot(browser, tmp_path, "round-assignments.png")
    wait.until(lambda _: chosen("Assignment").startswith(f"#{moved} "))
    click("Release")
    wait.until(ec.text_to_be_present_in_element(body, "released."))
    wait.until(ec.text_to_be_present_in_element(body, "No reservation is open in this round"))
    assert _one_value(database, status, moved) == "released"

    wait.until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "button[aria-label='Remove expert1']"))
    ).click()
    click("Save experts")
    wait.until(ec.text_to_be_present_in_element(body, "1 expert(s) admitted to Browser round"))
    assert admitted() == ["expert4"]

    browser.find_element(
        By.XPATH, "//label[.//p[starts-with(text(), 'Close Browser round')]]"
    ).click()
    click("Close round")
    wait.until(ec.text_to_be_present_in_element(body, "Round Browser round closed"))
    assert _one_value(database, ROUND_OF.format("status")) == "closed"
    _screenshot(browser, tmp_path, "round-closed.png")
    actions = _one_value(
        database,
        "SELECT group_concat(action, ',') FROM ledger_entries "
        "WHERE artifact_type = 'review_round' AND artifact_id = 'Browser round'",
    )
    assert {"create", "members", "reassign", "release", "close"} <= set(actions.split(","))


def test_a_lead_reads_a_simulator_against_its_log_in_the_browser(server, browser, tmp_path):
    """The Simulator realism page: the demo simulator's figures, coloured, and a chart."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 45)
    _log_in(browser, server, "lead")
    _wait_for_heading(browser, "Dashboard")
    browser.get(f"{server}/realism")  # below the sidebar's fold: opened by its address
    _wait_for_heading(browser, "Simulator realism")
    body = (By.TAG_NAME, "body")
    wait.until(ec.text_to_be_present_in_element(body, "figures beyond the floor"))
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".js-plotly-plot")))
    wait.until(ec.text_to_be_present_in_element(body, "Events the spec made of it"))
    _screenshot(browser, tmp_path, "realism.png")


SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
NONE = re.compile(r"(?<![\w`'\"])(None|nan|NaN|NaT)(?![\w`'\"])(?! [a-z])")  # not "None yet"


def _rendered(browser, timeout: float = 60) -> str:
    """The page's text once its script has finished (Streamlit's running indicator gone and
    the text still for a moment)."""
    from selenium.webdriver.common.by import By

    deadline, last, still = time.monotonic() + timeout, None, 0
    while time.monotonic() < deadline:
        time.sleep(0.5)
        running = browser.find_elements(By.CSS_SELECTOR, "[data-testid='stStatusWidget']")
        text = browser.find_element(By.CSS_SELECTOR, "[data-testid='stMain']").text
        still = still + 1 if text == last and not running else 0
        if still >= 3:
            return text
        last = text
    raise TimeoutError(f"{browser.current_url} kept changing for {timeout}s")


def _nav_links(browser) -> dict[str, str]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    sidebar = browser.find_element(By.CSS_SELECTOR, "[data-testid='stSidebar']")
    WebDriverWait(browser, 45).until(lambda _: "Logged in as" in sidebar.text)
    for more in sidebar.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebarNavViewButton']"):
        more.click()
    return {
        a.text.split("\n")[-1]: a.get_attribute("href")
        for a in sidebar.find_elements(By.CSS_SELECTOR, "[data-testid='stSidebarNavLink']")
    }


def test_every_page_as_each_role_shows_no_error_none_or_code(server, browser):
    """Issue 35's walk: each role opens every page its sidebar lists, on the demo; a page
    fails on an exception, an error box, a bare None/nan, or a snake_case code in its
    text (headings, captions, Markdown tables, metrics, messages)."""
    from selenium.webdriver.common.by import By

    problems = []
    for username in ("admin", "lead", "expert1"):
        browser.delete_all_cookies()
        _log_in(browser, server, username)
        _rendered(browser)
        links = _nav_links(browser)
        assert len(links) >= 3, (username, links)
        for title, href in links.items():
            browser.get(href)
            text = _rendered(browser)
            where = f"{username} on {title}"
            if browser.find_elements(By.CSS_SELECTOR, "[data-testid='stException']"):
                problems.append(f"{where}: an exception")
            errors = [
                e.text
                for e in browser.find_elements(By.CSS_SELECTOR, "[data-testid='stAlert']")
                if e.find_elements(By.CSS_SELECTOR, "[data-testid='stAlertContentError']")
            ]
            problems += [f"{where}: error {e!r}" for e in errors]
            code_free = text  # names shown as code, and icons (their text is their name)
            for shown in browser.find_elements(
                By.CSS_SELECTOR,
                "[data-testid='stMain'] code, [data-testid='stIconMaterial'], "
                "[data-testid='stMain'] [data-testid='stExpanderIcon']",
            ):
                code_free = code_free.replace(shown.text, "") if shown.text else code_free
            for pattern, what in ((NONE, "missing value"), (SNAKE, "code")):
                problems += [
                    f"{where}: {what} {m.group()!r} in {code_free[m.start() - 40 : m.end() + 40]!r}"
                    for m in pattern.finditer(code_free)
                ]
    assert not problems, "\n".join(problems)


LONG_ROUND = "Long tasks"
LONG_TASK = "enterpriseops_gym_itsm_task"


@pytest.fixture
def long_task_server(demo_configured, demo_database, real_file, tmp_path):
    """The demo with the real EnterpriseOps-Gym task (a policy prompt of 1,464 words, a
    verifier read as an end-state diff) imported through the product's importer, in a round
    of its own that expert1 has taken."""
    from demo_rounds import open_round_of_its_own
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.catalog.importing import import_path
    from itsmreview.db import session_scope
    from itsmreview.review.rounds.assignment import claim_next

    with session_scope() as session:
        import_path(real_file("tasks", "enterpriseops_gym_itsm_task.json"), session=session)
    open_round_of_its_own(LONG_ROUND, LONG_TASK)
    with session_scope() as session:
        expert = user_by_username(session=session, username="expert1")
        assert claim_next(session=session, actor=expert, round_name=LONG_ROUND) is not None
    database = Path(demo_configured.removeprefix("sqlite:///"))
    with _serving(database, demo_database[1], tmp_path) as url:
        yield url


def _viewport(browser, width: int, height: int) -> None:
    """A page area of width x height (the window's own bars taken into account)."""
    browser.set_window_size(width, height)
    inner = browser.execute_script("return [window.innerWidth, window.innerHeight]")
    browser.set_window_size(2 * width - inner[0], 2 * height - inner[1])


DIFF_TOP = (
    "const t = [...document.querySelectorAll('th')].find(e => e.textContent === 'Before');"
    "return t && t.getBoundingClientRect().top"
)
FIRST_ITEM_TOP = (
    "const g = document.querySelector('.st-key-rubric [role=radiogroup]');"
    "return g && g.getBoundingClientRect().top"
)


@pytest.mark.realdata
def test_the_rubric_of_a_long_task_starts_in_the_first_viewport(
    long_task_server, browser, tmp_path
):
    """The rubric of a task with a long policy prompt starts within the first 1440x900 screen,
    beside its evidence (issue 35). Before the two panes its first item was at y=782 px here
    (1,146 px on a demo task, below its source variant) and the diff's header at 9,400 px."""
    from urllib.parse import quote

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _viewport(browser, 1440, 900)
    _log_in(browser, long_task_server, "expert1")
    _wait_for_heading(browser, "My queue")
    browser.get(f"{long_task_server}/queue?round={quote(LONG_ROUND)}&task={LONG_TASK}")
    wait = WebDriverWait(browser, 45)
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "h3"), "An update came in"))
    wait.until(lambda b: b.switch_to.active_element.get_attribute("type") == "radio")
    time.sleep(1)  # the run is over; let the layout settle
    top = browser.execute_script(FIRST_ITEM_TOP)
    assert _scrolled(browser) == 0
    diff = browser.execute_script(DIFF_TOP)
    print(f"first rubric item at y={top:.0f} px; the diff's header at y={diff:.0f} px")
    assert 0 < top < 900 - 100, top  # the item and its points in view
    assert diff < 1_500, diff  # in the evidence pane, a scroll away
    _screenshot(browser, tmp_path, "long-task.png")
