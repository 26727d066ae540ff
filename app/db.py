"""Engines, sessions and migrations for SQLite (embedded default) and PostgreSQL (team)."""

import json
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from itsmreview.errors import Busy
from itsmreview.settings import get_settings, normalise_database_url
from sqlalchemy import Engine, create_engine, event, func, insert, inspect, text
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, select

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from alembic.config import Config

T = TypeVar("T")
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


def _sqlite_begin(connection) -> None:
    """A writing transaction on SQLite (`write_transaction`) begins IMMEDIATE: it takes the
    single write lock up front (waiting up to the busy timeout), so it can never fail
    half-way because another writer committed after it read. Other transactions keep the
    driver's way: reads outside a transaction, BEGIN before the first write."""
    if connection.get_execution_options().get("sqlite_immediate"):
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def create_db_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys and a busy timeout on every connection."""
    url = normalise_database_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _set_sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    engine = create_engine(url, pool_pre_ping=True)
    event.listen(engine, "connect", _postgresql_settings)
    return engine


def _postgresql_settings(dbapi_connection, _record) -> None:
    """No JIT, once per connection: it pays off for long analytical queries only, and a
    claim's per-row look-ups made the planner compile it, at ten times what the claim costs.
    (A SET, not a startup option, which connection poolers such as PgBouncer refuse.)"""
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    try:
        dbapi_connection.execute("SET jit = off")
    finally:
        dbapi_connection.autocommit = autocommit


@lru_cache(maxsize=8)
def _engine_for(url: str) -> Engine:
    return create_db_engine(url)


def get_engine(url: str | None = None) -> Engine:
    """The shared engine of `url`, by default the configured database."""
    return _engine_for(url or get_settings().resolved_database_url())


@contextmanager
def session_scope(engine: Engine | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    # every table known to the ORM: a flush resolves the foreign keys of all mapped tables, and
    # a command that imported only some model modules failed on the first one it lacked
    import itsmreview.schema  # noqa: F401

    with Session(engine or get_engine(), expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


@contextmanager
def own_transaction(engine: Engine, *, wait_s: float = 2.0) -> Iterator[Session]:
    """A short transaction on a connection of its own, committed on success, beside whatever
    transaction the caller holds open (an import's lease must be visible to other processes
    before the import commits). On SQLite it waits at most `wait_s` for the write lock (a
    caller that holds it would otherwise wait for itself) and raises the busy error after."""
    with engine.connect() as connection:
        sqlite = engine.dialect.name == "sqlite"
        if sqlite:
            connection.exec_driver_sql(f"PRAGMA busy_timeout={int(wait_s * 1000)}")
            connection.commit()  # SQLAlchemy began a transaction for the pragma; the session's own
        try:
            with Session(bind=connection, expire_on_commit=False) as session:
                try:
                    yield session
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA busy_timeout=10000")
                connection.commit()


WRITE_RETRY_SECONDS = 30.0  # how long a write keeps retrying while the database is busy


def _busy(exc: DBAPIError) -> bool:
    """A failure that a retry of the whole transaction resolves: SQLite's lock, PostgreSQL's
    serialization failure, deadlock or lock timeout."""
    code = getattr(exc.orig, "sqlstate", None)
    if code in ("40001", "40P01", "55P03"):
        return True
    text_ = str(exc.orig).lower()
    return "database is locked" in text_ or "database is busy" in text_


def write_transaction(
    work: Callable[[Session], T],
    *,
    engine: Engine | None = None,
    budget_seconds: float = WRITE_RETRY_SECONDS,
) -> T:
    """work(session) in a transaction that takes SQLite's write lock up front and is retried
    whole, with growing waits, while the database is busy; raises Busy when the budget runs
    out. `work` must do nothing but database work (it may run more than once)."""
    engine = engine or get_engine()
    bind = (
        engine.execution_options(sqlite_immediate=True)
        if engine.dialect.name == "sqlite"
        else engine
    )
    deadline = time.monotonic() + budget_seconds
    wait = 0.02
    while True:
        try:
            with session_scope(bind) as session:
                return work(session)
        except DBAPIError as exc:
            if not _busy(exc):
                raise
            if time.monotonic() + wait > deadline:
                raise Busy(
                    "the database is busy with other people's changes; nothing was saved, "
                    "please try again in a moment"
                ) from exc
            time.sleep(wait * (0.5 + random.random()))
            wait = min(wait * 2, 1.0)


def distinct_walk(column, name: str = "walk"):
    """A select of the distinct non-NULL values of an indexed column, ascending, found by
    walking its index from each value to the next: one index probe a value, where DISTINCT
    reads every row (PostgreSQL has no skip scan)."""
    walk = select(func.min(column).label("value")).cte(name, recursive=True)
    following = select(func.min(column)).where(column > walk.c.value).scalar_subquery()
    walk = walk.union_all(select(following).where(walk.c.value.is_not(None)))
    return select(walk.c.value).where(walk.c.value.is_not(None))


def frame_of(session: Session, query) -> "pd.DataFrame":
    """The rows of a select() as a DataFrame named by its columns (label one to rename it)."""
    import pandas as pd

    result = session.exec(query)
    return pd.DataFrame([tuple(row) for row in result], columns=list(result.keys()))


def numeric_batches(session: Session, query, batch: int = 100_000) -> Iterator["np.ndarray"]:
    """The rows of a select() of numbers only (NULL as NaN) as float arrays of up to `batch`
    rows, read from the driver's cursor without building a row object per row: for reading
    millions of values into NumPy."""
    import numpy as np

    result = session.connection().execute(query)
    cursor = result.cursor
    try:
        while rows := cursor.fetchmany(batch):
            yield np.array(rows, dtype=float).reshape(len(rows), -1)
    finally:
        result.close()


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


def bulk_insert_records(session: Session, table, records: Sequence[dict]) -> None:
    """`bulk_insert` of records (column name -> value, every record with the same columns)
    into a mapped table, each value first turned into what the driver stores by its column's
    type (JSON as text, times as the dialect keeps them), as an ORM or Core insert would."""
    if not records:
        return
    dialect = session.get_bind().dialect
    names = list(records[0])
    processors = [
        table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names
    ]
    pairs = list(zip(names, processors, strict=True))
    rows = (tuple(record[n] if p is None else p(record[n]) for n, p in pairs) for record in records)
    bulk_insert(session, table.name, names, rows)


def insert_rows(
    session: Session, table: str, columns: Sequence[str], rows: Iterable[tuple]
) -> None:
    """The portable way (SQLAlchemy's executemany), for drivers without a faster one."""
    target = sa_table(table, *(sa_column(name) for name in columns))
    session.execute(insert(target), [dict(zip(columns, row, strict=True)) for row in rows])


def driver_rows(session: Session, sql: str, params: Sequence = ()) -> list[tuple]:
    """The rows of `sql` as the driver returns them: tuples, no SQLAlchemy row or type
    processing (which costs more than the read itself for hundreds of thousands of small
    rows), in the session's transaction. `sql` uses `?` placeholders on every dialect; JSON
    columns come back as text on both (see `json_reader`)."""
    connection = session.connection()
    cursor = connection.connection.cursor()
    if connection.dialect.name == "postgresql":  # psycopg's placeholders; a literal % doubled
        sql = sql.replace("%", "%%").replace("?", "%s")
        _json_as_text(cursor)
    try:
        cursor.execute(sql, tuple(params))
        return cursor.fetchall()
    finally:
        cursor.close()


def _json_as_text(cursor) -> None:
    """JSON columns of this psycopg cursor as their text: `json.loads` of that text takes a
    third of the time of psycopg's JSON loader, which decodes bytes through a Python call per
    value (776,667 ledger payloads: 1.7 s against 3.0 s)."""
    from psycopg.types.string import TextLoader

    for name in ("json", "jsonb"):
        cursor.adapters.register_loader(name, TextLoader)


def second_process_url(session: Session) -> str | None:
    """The URL a second process opens the session's database by (password included), or
    None when sharing work with one cannot help (one core) or cannot work (a database in
    memory). It sees what is committed, not the session's own pending writes."""
    if (os.cpu_count() or 1) < 2:
        return None
    url = session.get_bind().url
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        return None
    return url.render_as_string(hide_password=False)


def ids_in(session: Session, column: str, of: str = "integer") -> str:
    """`column IN` a list of ids (of: "integer" or "text") given as ONE `?` parameter (see
    `ids_param`, `values_param`): a JSON array read by `json_each` on SQLite, an array on
    PostgreSQL."""
    if session.get_bind().dialect.name == "postgresql":
        return f"{column} = ANY(?::{of}[])"
    return f"{column} IN (SELECT value FROM json_each(?))"


def ids_param(session: Session, ids: Sequence[int]):
    """The parameter `ids_in` expects for these ids."""
    return values_param(session, [int(i) for i in ids])


def values_param(session: Session, values: Sequence):
    """The parameter `ids_in` expects for these values (whole numbers or texts)."""
    import json

    values = list(values)
    return values if session.get_bind().dialect.name == "postgresql" else json.dumps(values)


def json_reader(session: Session):
    """How to read a JSON column's value from `driver_rows`: its text, decoded (NULL stays
    None), on either dialect."""
    return _read_json


def _read_json(value):
    return None if value is None else json.loads(value)


def in_ids(session: Session, column, ids: Sequence[int]):
    """column IN (ids) with the whole list as ONE bind parameter: an integer array on
    PostgreSQL (`= ANY(:ids)`), a JSON array read by `json_each` on SQLite. Never one
    parameter per id, whatever the list's length."""
    values = [int(i) for i in ids]
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy import Integer, any_, literal
        from sqlalchemy.dialects.postgresql import ARRAY

        return column == any_(literal(values, ARRAY(Integer)))
    import json

    from sqlalchemy import func, literal, select

    listed = func.json_each(literal(json.dumps(values))).table_valued("value")
    return column.in_(select(listed.c.value))


def analyze(session: Session, *tables: str) -> None:
    """Refresh the planner's statistics of tables just written in bulk (PostgreSQL: without
    them, autovacuum may be late or off and plans go wrong; SQLite: `ANALYZE` feeds its
    planner too). Names are the code's own table names, never user input."""
    for table in tables:
        session.exec(text(f'ANALYZE "{table}"'))


def alembic_config(url: str | None = None) -> "Config":
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url or get_settings().resolved_database_url())
    return config


MIGRATION_LOCK = 0x17540001  # the advisory lock migrations take on PostgreSQL
HEAD_REVISION = "0030"  # the newest migration; a test checks it against the scripts


def ensure_current(engine: Engine | None = None) -> None:
    """Migrate the database unless it is at HEAD_REVISION already (then Alembic, which
    reads every migration script, is not even imported: light commands start fast)."""
    engine = engine or get_engine()
    if current_revision(engine) != HEAD_REVISION:
        upgrade_database(engine)


def upgrade_database(engine: Engine | None = None, revision: str = "head") -> None:
    """Apply Alembic migrations up to `revision` on `engine` (default: the configured database)."""
    from alembic import command

    engine = engine or get_engine()
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    sqlite = engine.dialect.name == "sqlite"
    bind = engine.execution_options(sqlite_immediate=True) if sqlite else engine
    with bind.begin() as connection:  # SQLite: the write lock first, then the version
        if not sqlite:
            # replicas starting together on a new database migrate one after the other: the
            # second finds the first's revision when it gets the lock, and has nothing to do
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
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
