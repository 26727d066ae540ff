"""A team deployment as `make team` lays it out, on PostgreSQL: two `itsmreview serve`
replicas behind nginx (app/deploy/nginx.conf, sticky by cookie), one `itsmreview worker`; an
expert rates a task on each replica in Chromium, and the worker applies both to the gate."""

import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest
from browser_module import browser_tests as _browser_tests

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_URL = os.environ.get(
    "ITSMREVIEW_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = [pytest.mark.browser, pytest.mark.postgres]


def need(condition: bool, reason: str) -> None:
    """As the `requirement` fixture (module scope here): skip, or fail in CI."""
    if condition:
        return
    if os.environ.get("ITSMREVIEW_REQUIRE_ALL_TESTS") == "1":
        pytest.fail(f"required in this run but unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


browser_tests = _browser_tests()
browser = browser_tests.browser  # the same fixture


def _database() -> str:
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(POSTGRES_URL)
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"itsm_team_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        need(False, f"PostgreSQL at {POSTGRES_URL}: {exc}")
    return url.set(database=name).render_as_string(hide_password=False)


def _drop(database_url: str) -> None:
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    admin = url.set(drivername="postgresql", database="postgres")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)')


def _start(stack: ExitStack, name: str, command: list[str], env: dict, folder: Path):
    log = stack.enter_context(open(folder / f"{name}.log", "wb"))  # noqa: SIM115
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)

    def stop():
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()

    stack.callback(stop)
    return process


def _replica_of(url: str, route: str) -> str:
    request = urllib.request.Request(
        f"{url}/_stcore/health", headers={"Cookie": f"itsmreview_route={route}"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.headers["X-Itsmreview-Replica"]


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """The deployment; yields its address, its database URL and a route cookie per replica."""
    need(Path(NGINX).exists(), "Debian's nginx (apt-get install nginx)")
    database_url = _database()
    folder = tmp_path_factory.mktemp("team")
    env = {
        **os.environ,
        "ITSMREVIEW_DATABASE_URL": database_url,
        "ITSMREVIEW_DATA_DIR": str(folder / "data"),
        "ITSMREVIEW_JOBS": "worker",
    }
    cli = [sys.executable, "-m", "itsmreview.cli"]
    loaded = subprocess.run(
        [*cli, "demo", "--no-serve"], env=env, capture_output=True, text=True, timeout=600
    )
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    from itsmreview.deploy import team as team_script

    port = browser_tests._free_port()
    replicas = [browser_tests._free_port(), browser_tests._free_port()]
    with ExitStack() as stack:
        stack.callback(_drop, database_url)
        processes = [
            _start(stack, f"replica{n}", [*cli, "serve", "--port", str(p)], env, folder)
            for n, p in enumerate(replicas)
        ]
        processes.append(_start(stack, "worker", [*cli, "worker", "--poll", "0.5"], env, folder))
        for p, process in zip(replicas, processes, strict=False):
            browser_tests._wait_healthy(f"http://127.0.0.1:{p}", process)
        team_script.STATE = folder
        conf = team_script.render_nginx(port, replicas)
        subprocess.run([NGINX, "-c", str(conf)], check=True, timeout=30)
        stack.callback(lambda: subprocess.run([NGINX, "-c", str(conf), "-s", "quit"], check=False))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        routes: dict[str, str] = {}
        while len(routes) < 2 and time.monotonic() < deadline:
            try:
                route = uuid.uuid4().hex
                routes.setdefault(_replica_of(url, route), route)
            except OSError:
                time.sleep(0.3)
        assert sorted(routes) == sorted(f"127.0.0.1:{p}" for p in replicas), routes
        for replica, route in routes.items():  # sticky: the same cookie, the same replica
            assert {_replica_of(url, route) for _ in range(5)} == {replica}
        yield {"url": url, "database_url": database_url, "routes": routes}


def _ratings(database_url: str, username: str) -> tuple[int, int]:
    """(submitted ratings of `username`, ratings still waiting for the gate)."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(database_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False)) as conn:
        submitted = conn.execute(
            "SELECT count(*) FROM ratings JOIN users ON users.id = ratings.expert_id "
            "WHERE users.username = %s AND ratings.status = 'submitted'",
            (username,),
        ).fetchone()[0]
        queued = conn.execute("SELECT count(*) FROM gate_pending").fetchone()[0]
    return submitted, queued


def _rate_one(browser, url: str, route: str, username: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{url}/_stcore/health")  # the cookie needs the site open
    browser.delete_all_cookies()
    browser.add_cookie({"name": "itsmreview_route", "value": route, "path": "/"})
    wait = WebDriverWait(browser, 60)
    browser_tests._log_in(browser, url, username)
    browser_tests._wait_for_heading(browser, "My queue", timeout=60)
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), "Your rating"))
    wait.until(lambda b: b.switch_to.active_element.get_attribute("type") == "radio")
    for key in "4343452344" + "1" + "4":  # ten dimensions, the verdict, the confidence
        ActionChains(browser).send_keys(key).perform()
    assert browser.switch_to.active_element.text == "Submit rating"
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    toast = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "[data-testid='stToast']")))
    assert "Rating submitted" in toast.text
    browser.delete_all_cookies()  # log out of this browser for the next expert


def test_an_expert_rates_on_each_replica_and_the_worker_applies_both(team, browser):
    before = {u: _ratings(team["database_url"], u)[0] for u in ("expert1", "expert2")}
    (first, second) = sorted(team["routes"].items())
    _rate_one(browser, team["url"], first[1], "expert1")
    _rate_one(browser, team["url"], second[1], "expert2")
    for username in ("expert1", "expert2"):
        assert _ratings(team["database_url"], username)[0] == before[username] + 1
    deadline = time.monotonic() + 30
    while _ratings(team["database_url"], "expert1")[1] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ratings(team["database_url"], "expert1")[1] == 0  # the worker applied both
