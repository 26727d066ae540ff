"""The expert's page in a real browser: `python benchmarks/browser.py` (one command).

Loads the demo into a temporary database, serves it (`itsmreview serve`) and drives Debian's
Chromium through Selenium, as an expert would:

- login: from Enter on the password to a usable queue (the first rubric item focused);
- a click on a scale point: until the point is checked and the page idle, and how many
  script runs it caused;
- a whole rating by keyboard (a key per dimension, the verdict, the confidence), sent as
  fast as the browser takes them: the time, the script runs and the time spent waiting
  for one;
- a reload: the time to a usable page, and whether the expert is still logged in;
- a submit (of the draft kept after the keyboard rating): from the click on "Submit rating"
  to the next task open with its first item focused;
- a lead's round over 1,000 new draft tasks from the Rounds page: from the click on "Open
  round over 1000 task(s)" to its confirmation, against a rerun of the same page.

Baselines in the same run: one run of the rating form on the server ("Keep draft", what every
click on a scale point cost before: a rerun), and two floors of a login on this machine, timed
the same way: a one-file Streamlit app whose login form, on Enter, shows a title and ten radio
scales (no database, no task), and one that shows, from constants, the same elements as the
demo expert's page (what Streamlit needs to draw that page here, before any work of this
app's). Prints medians of `--repeats` and the ratios.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = os.environ.get("ITSMREVIEW_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ITSMREVIEW_CHROMEDRIVER", "/usr/bin/chromedriver")

# counts script runs and the time spent in them, from the app's own run state
WATCH_RUNS = """
window.itsmRuns = 0; window.itsmBusyMs = 0; let since = null;
const app = document.querySelector('[data-testid=stApp]');
new MutationObserver(() => {
  const running = app.getAttribute('data-test-script-state') === 'running';
  if (running && since === null) { since = performance.now(); window.itsmRuns += 1; }
  if (!running && since !== null) { window.itsmBusyMs += performance.now() - since; since = null; }
}).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
"""
IDLE = "return document.querySelector('[data-testid=stApp]')" + (
    ".getAttribute('data-test-script-state') !== 'running'"
)


POINT = "document.querySelectorAll('.st-key-rubric [role=radiogroup] input')[2]"


# the floors' login branch: a login form whose Enter shows the page
LOGIN_FORM = """
    with st.form("login"):
        st.text_input("Username")
        st.text_input("Password", type="password")
        if st.form_submit_button("Log in"):
            st.session_state["in"] = True
            st.rerun()
"""

FLOOR_APP = (
    """
import streamlit as st
if st.session_state.get("in"):
    st.title("My queue")
    with st.container(key="rubric"), st.form("rubric"):
        for i in range(10):
            st.radio(f"Item {i}", [1, 2, 3, 4, 5], index=None, horizontal=True)
        st.form_submit_button("Submit rating")
else:
"""
    + LOGIN_FORM
)

# the expert's page of the demo drawn from constants: the same kinds and numbers of elements
# (task fields, a transcript of ten turns with two tool calls, a turn-note form, the variant's
# figures and tables, a rubric of ten scales), no database, no login check; its login page
# loads the same element code ahead as the app's
PAGE_FLOOR_APP = (
    """
import streamlit as st
if st.session_state.get("in"):
    st.title("My queue")
    st.button("Take the next task")
    st.progress(0.5, text="3 of 6 rated")
    st.selectbox("Task", ["To rate · A task (persona)", "Rated · another"])
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.subheader("A task title of ordinary length for an ITSM incident")
        st.caption("Incident manager · track · version 1")
        for name in ("Instruction", "Environment", "Ground truth", "Verifier"):
            st.markdown(f"**{name}**")
            st.text("A sentence or two of task text, as an expert reads it. " * 3)
        with st.expander("Provenance (6 recorded sources)"):
            st.markdown("| a | b | c |\\n| --- | --- | --- |\\n" + "| x | y | z |\\n" * 6)
        with st.expander("Transcript (12 turns)", expanded=True):
            for turn in range(1, 11):
                role = "user" if turn % 2 else "assistant"
                with st.chat_message(role, avatar=":material/person:"):
                    st.markdown(f"**{turn}. Actor** · 2012-03-05T02:00:54Z")
                    if turn in (5, 9):
                        with st.expander("tool call: create_request"):
                            st.code('{\\n  "user": "U-8830"\\n}', language="json")
                            st.caption("result (turn 6)")
                            st.code("number: REQ0093321", language=None)
                    else:
                        st.text("A message of the simulated user or the agent. " * 2)
            with st.form("note"):
                a, b, c = st.columns(3)
                a.number_input("Turn", 1, 12, 1)
                b.selectbox("Flag", ["(none)", "unrealistic"])
                c.text_input("Comment on this turn")
                st.form_submit_button("Add note")
    with right:
        st.subheader("Source log variant")
        cols = st.columns(3)
        cols[0].metric("Rank", "#19")
        cols[1].metric("Cases", "12")
        cols[2].metric("Median duration", "3.1 d")
        st.caption("Variant #19 of 605: 0.6% of the cases follow it")
        st.markdown("| Step | Activity |\\n| --- | --- |\\n" + "| 1 | Queued |\\n" * 5)
        with st.expander("Roles (events of 12 cases)"):
            header = "| a | b | c | d |\\n| --- | --- | --- | --- |\\n"
            st.markdown(header + "| x | y | 1 | 2 |\\n" * 8)
        st.expander("Real example cases")
        st.subheader("Your rating")
        with st.container(key="rubric"), st.form("rubric"):
            st.caption("Keys: 1-9 choose a point")
            for i in range(8):
                st.radio(f"Item {i}", [1, 2, 3, 4, 5], index=None, horizontal=True)
                st.caption("1 Could not happen · 3 Plausible · 5 Happens routinely")
            verdicts = ["realistic", "unrealistic", "unsure"]
            st.radio("Overall verdict", verdicts, index=None, horizontal=True)
            st.radio("How sure are you?", [1, 2, 3, 4, 5], index=None, horizontal=True)
            st.multiselect("Flags", ["a", "b", "c"])
            st.text_area("Comment")
            x, y = st.columns(2)
            x.form_submit_button("Submit rating")
            y.form_submit_button("Keep draft")
else:
    from itsmreview.ui.preload import preload_grid_and_code

    preload_grid_and_code()
"""
    + LOGIN_FORM
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(process: subprocess.Popen, port: int) -> str:
    """The server's address once its health check answers (90 s at most)."""
    url = f"http://127.0.0.1:{port}"
    for _ in range(180):
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                if answer.read() == b"ok":
                    return url
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"the server on port {port} did not start")


def _serve(folder: Path) -> tuple[subprocess.Popen, str]:
    env = dict(
        os.environ,
        ITSMREVIEW_DATABASE_URL=f"sqlite:///{folder / 'demo.db'}",
        ITSMREVIEW_DATA_DIR=str(folder),
        PYTHONSAFEPATH="1",
    )
    cli = [sys.executable, "-m", "itsmreview.cli"]
    subprocess.run([*cli, "demo", "--no-serve"], env=env, check=True, capture_output=True)
    port = _free_port()
    process = subprocess.Popen(
        [*cli, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, _healthy(process, port)


def _serve_floor(folder: Path, source: str) -> tuple[subprocess.Popen, str]:
    (folder / "floor.py").write_text(source)
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(folder / "floor.py"),
            "--server.port",
            str(port),
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, _healthy(process, port)


def floor_login(url: str, repeats: int, folder: Path) -> list[float]:
    """Enter on the password to the ten scales of the rubric drawn and the page idle."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    drawn = (
        "return document.querySelectorAll('.st-key-rubric [role=radiogroup]').length === 10 && "
        + IDLE[7:]
    )
    times = []
    for index in range(repeats + 1):
        driver = _browser(folder / f"floor-{index}")
        try:
            driver.get(url)
            wait = WebDriverWait(driver, 60, poll_frequency=0.01)
            wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "input[type=password]")))
            field = driver.find_element(By.CSS_SELECTOR, "input[type=password]")
            start = time.perf_counter()
            field.send_keys(Keys.ENTER)
            wait.until(lambda d: d.execute_script(drawn))
            if index:  # the first warms the server
                times.append(time.perf_counter() - start)
        finally:
            driver.quit()
    return times


def _browser(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def _ready(driver, timeout: float = 60) -> None:
    """Until the first rubric item has the focus and the page is idle."""
    from selenium.webdriver.support.ui import WebDriverWait

    focused = "return document.activeElement?.type === 'radio' && " + IDLE[7:]
    WebDriverWait(driver, timeout, poll_frequency=0.01).until(lambda d: d.execute_script(focused))


def _median(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.0f} ms (min {min(values) * 1000:.0f})"


def measure(url: str, repeats: int, folder: Path, tag: str) -> dict[str, list[float]]:
    """Each repeat in a new browser profile (`tag` keeps profiles apart), so it logs in."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    out: dict[str, list[float]] = {
        k: []
        for k in (
            "login",
            "click",
            "click runs",
            "keyboard rating",
            "keyboard runs",
            "keyboard waiting",
            "reload",
            "submit to the next task",
            "draft rerun (baseline)",
        )
    }
    for index in range(repeats):
        driver = _browser(folder / f"profile-{tag}-{index}")
        try:
            driver.get(url)
            wait = WebDriverWait(driver, 60, poll_frequency=0.01)
            field = wait.until(
                ec.presence_of_element_located((By.CSS_SELECTOR, "input[aria-label='Username']"))
            )
            field.send_keys(f"expert{index % 5 + 1}")
            password = driver.find_element(By.CSS_SELECTOR, "input[aria-label='Password']")
            password.send_keys("itsm-demo")
            start = time.perf_counter()
            password.send_keys(Keys.ENTER)
            _ready(driver)
            out["login"].append(time.perf_counter() - start)
            driver.execute_script(WATCH_RUNS)
            time.sleep(0.5)  # the login's last run has settled
            start = time.perf_counter()
            driver.execute_script(f"{POINT}.click()")
            wait.until(lambda d: d.execute_script(f"return {POINT}.checked && ({IDLE[7:]})"))
            out["click"].append(time.perf_counter() - start)
            out["click runs"].append(driver.execute_script("return window.itsmRuns"))
            _ready(driver)
            driver.execute_script(
                "document.querySelector('.st-key-rubric [role=radiogroup] input').focus()"
            )
            driver.execute_script("window.itsmRuns = 0; window.itsmBusyMs = 0")
            scales = driver.execute_script(
                "return document.querySelectorAll('.st-key-rubric [role=radiogroup]').length"
            )
            # every dimension, then the verdict (accept) and the confidence
            keys = ("43452344" * 4)[: scales - 2] + "14"
            start = time.perf_counter()
            for key in keys:
                ActionChains(driver).send_keys(key).perform()
            wait.until(
                lambda d: (
                    d.execute_script("return document.activeElement?.innerText") == "Submit rating"
                )
            )
            out["keyboard rating"].append(time.perf_counter() - start)
            out["keyboard runs"].append(driver.execute_script("return window.itsmRuns"))
            out["keyboard waiting"].append(driver.execute_script("return window.itsmBusyMs") / 1e3)
            keep = driver.find_element(By.XPATH, "//button[.//p[text()='Keep draft']]")
            driver.execute_script("window.itsmRuns = 0; window.itsmBusyMs = 0")
            keep.click()
            wait.until(lambda d: d.execute_script("return window.itsmRuns") >= 1)
            wait.until(lambda d: d.execute_script(IDLE))
            out["draft rerun (baseline)"].append(
                driver.execute_script("return window.itsmBusyMs") / 1e3
            )
            start = time.perf_counter()
            driver.refresh()
            _ready(driver)
            out["reload"].append(time.perf_counter() - start)
            # the kept draft is whole: submit it; the next task opens with its first item
            # focused (its address names the task)
            before = driver.current_url
            submit = driver.find_element(By.XPATH, "//button[.//p[text()='Submit rating']]")
            start = time.perf_counter()
            submit.click()
            wait.until(lambda d, was=before: d.current_url != was)
            _ready(driver)
            out["submit to the next task"].append(time.perf_counter() - start)
        finally:
            driver.quit()
    return out


ROUND_TASKS = 1000


def _import_batch(folder: Path, prefix: str) -> None:
    """ROUND_TASKS new draft tasks whose ids start with `prefix`, imported by the CLI."""
    import json

    bundle = folder / f"{prefix}tasks.json"
    bundle.write_text(
        json.dumps(
            [
                {
                    "id": f"{prefix}{n:04d}",
                    "title": f"Benchmark task {n}",
                    "persona": "L1 service desk agent",
                    "track": "single-agent",
                    "instruction": "Reset the caller's password after verifying identity.",
                }
                for n in range(ROUND_TASKS)
            ]
        )
    )
    env = dict(os.environ, ITSMREVIEW_DATABASE_URL=f"sqlite:///{folder / 'demo.db'}")
    subprocess.run(
        [sys.executable, "-m", "itsmreview.cli", "tasks", "import", str(bundle)],
        env=env,
        check=True,
        capture_output=True,
    )


def measure_rounds(url: str, repeats: int, folder: Path) -> dict[str, list[float]]:
    """A lead opens a round over ROUND_TASKS new drafts from the Rounds page: from the click
    on "Open round over N task(s)" to its confirmation; and, as the baseline in the same
    page, a rerun of that page (Enter in the round's name)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    out: dict[str, list[float]] = {"round creation": [], "rounds page rerun (baseline)": []}
    body = (By.TAG_NAME, "body")
    for index in range(repeats + 1):
        prefix = f"bench{index}-"
        _import_batch(folder, prefix)
        driver = _browser(folder / f"lead-{index}")
        try:
            driver.get(f"{url}/rounds")
            wait = WebDriverWait(driver, 120, poll_frequency=0.01)
            field = wait.until(
                ec.presence_of_element_located((By.CSS_SELECTOR, "input[aria-label='Username']"))
            )
            field.send_keys("lead")
            password = driver.find_element(By.CSS_SELECTOR, "input[aria-label='Password']")
            password.send_keys("itsm-demo", Keys.ENTER)
            search = wait.until(
                ec.presence_of_element_located(
                    (By.CSS_SELECTOR, "input[aria-label='Id or title contains']")
                )
            )
            search.send_keys(prefix, Keys.ENTER)
            wait.until(ec.text_to_be_present_in_element(body, f"{ROUND_TASKS} task(s) match"))
            wait.until(lambda d: d.execute_script(IDLE))
            name = driver.find_element(By.CSS_SELECTOR, "input[aria-label='Round name']")
            name.send_keys(Keys.CONTROL, "a")
            name.send_keys(f"Benchmark round {index}")
            driver.execute_script(WATCH_RUNS)
            start = time.perf_counter()
            name.send_keys(Keys.ENTER)
            wait.until(lambda d: d.execute_script("return window.itsmRuns") >= 1)
            wait.until(lambda d: d.execute_script(IDLE))
            rerun = time.perf_counter() - start
            button = wait.until(
                ec.element_to_be_clickable(
                    (By.XPATH, f"//button[.//p[text()='Open round over {ROUND_TASKS} task(s)']]")
                )
            )
            start = time.perf_counter()
            button.click()
            wait.until(ec.text_to_be_present_in_element(body, f"opened over {ROUND_TASKS} task(s)"))
            if index:  # the first warms the server
                out["round creation"].append(time.perf_counter() - start)
                out["rounds page rerun (baseline)"].append(rerun)
        finally:
            driver.quit()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--only-rounds", action="store_true", help="Measure only the lead's round creation."
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="itsmreview-browser-"))
    process, url = _serve(folder)
    try:
        if not args.only_rounds:  # before the lead's round: it becomes the experts' newest
            measure(url, 1, folder, "warm")  # warm the server's caches
            out = measure(url, args.repeats, folder, "run")
        rounds = measure_rounds(url, args.repeats, folder)
    finally:
        process.terminate()
        process.wait(timeout=15)
    creation = statistics.median(rounds["round creation"])
    rerun = statistics.median(rounds["rounds page rerun (baseline)"])
    print(
        f"{'round creation, ' + str(ROUND_TASKS) + ' tasks':<36}{_median(rounds['round creation'])}"
    )
    print(f"{'rounds page rerun (baseline)':<36}{_median(rounds['rounds page rerun (baseline)'])}")
    print(f"round creation / a rerun of the page: {creation / rerun:.2f}")
    if args.only_rounds:
        shutil.rmtree(folder, ignore_errors=True)
        return
    try:
        for name, source in (("bare app", FLOOR_APP), ("same page, constants", PAGE_FLOOR_APP)):
            floor, floor_url = _serve_floor(folder, source)
            try:
                out[f"login floor ({name})"] = floor_login(floor_url, args.repeats, folder)
            finally:
                floor.terminate()
                floor.wait(timeout=15)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    names = (
        "login",
        "login floor (bare app)",
        "login floor (same page, constants)",
        "click",
        "keyboard rating",
        "reload",
        "submit to the next task",
    )
    for name in (*names, "draft rerun (baseline)"):
        print(f"{name:<36}{_median(out[name])}")
    print(f"{'script runs per click':<36}{statistics.median(out['click runs']):8.0f}")
    print(f"{'script runs, keyboard rating':<36}{statistics.median(out['keyboard runs']):8.0f}")
    waiting = statistics.median(out["keyboard waiting"]) * 1000
    print(f"{'waiting, keyboard rating':<36}{waiting:8.0f} ms")
    baseline = statistics.median(out["draft rerun (baseline)"])
    print(f"click / a rerun of the form: {statistics.median(out['click']) / baseline:.2f}")
    login_s = statistics.median(out["login"])
    for name in ("bare app", "same page, constants"):
        floor_s = statistics.median(out[f"login floor ({name})"])
        print(f"login / the login of the floor ({name}): {login_s / floor_s:.2f}")


if __name__ == "__main__":
    main()
