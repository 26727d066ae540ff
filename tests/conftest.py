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


@pytest.fixture(scope="session")
def demo_database(migrated_templates, tmp_path_factory):
    """A SQLite file with the demo loaded once per session; copy it before writing."""
    from itsmreview.demo.loader import load_demo

    folder = tmp_path_factory.mktemp("demo")
    path = folder / "demo.db"
    shutil.copyfile(migrated_templates["sqlite"], path)
    engine = db_module.create_db_engine(f"sqlite:///{path}")
    with db_module.session_scope(engine) as session:
        load_demo(session=session, data_dir=folder / "data")
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
