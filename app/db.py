"""Engines, sessions and migrations for SQLite (embedded default) and PostgreSQL (team)."""

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

import pandas as pd
from alembic import command
from alembic.config import Config
from itsmreview.settings import get_settings, normalise_database_url
from sqlalchemy import Engine, create_engine, event, insert, inspect, text
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.engine import make_url
from sqlmodel import Session

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def utcnow() -> datetime:
    """Aware UTC now; SQLModel stores aware datetimes and returns them in UTC on both backends."""
    return datetime.now(UTC)


def _set_sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def create_db_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys and a busy timeout on every connection."""
    url = normalise_database_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _set_sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


@lru_cache(maxsize=8)
def _engine_for(url: str) -> Engine:
    return create_db_engine(url)


def get_engine(url: str | None = None) -> Engine:
    """The shared engine of `url`, by default the configured database."""
    return _engine_for(url or get_settings().resolved_database_url())


@contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    with Session(engine or get_engine(), expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def frame_of(session: Session, query) -> pd.DataFrame:
    """The rows of a select() as a DataFrame named by its columns (label one to rename it)."""
    result = session.exec(query)
    return pd.DataFrame([tuple(row) for row in result], columns=list(result.keys()))


def bulk_insert(
    session: Session, table: str, columns: Sequence[str], rows: Iterable[tuple]
) -> None:
    """Insert many rows inside the session's transaction at driver speed: COPY on PostgreSQL,
    one executemany on SQLite. Values must be what the driver stores (JSON already as text);
    `table` and `columns` are the code's own names, never user input."""
    connection = session.connection()
    raw = connection.connection.dbapi_connection
    names = ", ".join(f'"{name}"' for name in columns)
    dialect = connection.dialect
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        with raw.cursor() as cursor, cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
            for row in rows:
                copy.write_row(row)
        return
    if dialect.name != "sqlite":
        insert_rows(session, table, columns, rows)
        return
    marks = ", ".join("?" * len(columns))
    cursor = raw.cursor()
    try:
        cursor.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', rows)
    finally:
        cursor.close()


def insert_rows(
    session: Session, table: str, columns: Sequence[str], rows: Iterable[tuple]
) -> None:
    """The portable way (SQLAlchemy's executemany), for drivers without a faster one."""
    target = sa_table(table, *(sa_column(name) for name in columns))
    session.execute(insert(target), [dict(zip(columns, row, strict=True)) for row in rows])


def analyze(session: Session, *tables: str) -> None:
    """Refresh the planner's statistics of tables just written in bulk (PostgreSQL: without
    them, autovacuum may be late or off and plans go wrong; SQLite: `ANALYZE` feeds its
    planner too). Names are the code's own table names, never user input."""
    for table in tables:
        session.exec(text(f'ANALYZE "{table}"'))


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url or get_settings().resolved_database_url())
    return config


def upgrade_database(engine: Engine | None = None, revision: str = "head") -> None:
    """Apply Alembic migrations up to `revision` on `engine` (default: the configured database)."""
    engine = engine or get_engine()
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine | None = None) -> str | None:
    """The Alembic revision the database is at, or None when it was never migrated."""
    engine = engine or get_engine()
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        row = connection.exec_driver_sql("SELECT version_num FROM alembic_version").first()
        return row[0] if row else None


def describe_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    return make_url(url).render_as_string(hide_password=True)
