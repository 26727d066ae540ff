"""Writes under concurrent writers: SQLite takes its write lock up front and busy writes are
retried whole, so nobody sees "database is locked" and no update is lost."""

import sqlite3
import time

import pytest
from itsmreview.db import create_db_engine, write_transaction
from itsmreview.errors import Busy
from sqlalchemy import text
from sqlalchemy.exc import OperationalError


def test_read_then_write_from_many_threads_loses_nothing_on_sqlite(tmp_path, at_once):
    """Each writer reads a counter, waits, then writes it back plus one: on SQLite a writer
    that read inside a deferred transaction before another committed fails with "database is
    locked"; with the write lock taken up front they queue, and every increment lands.
    (SQLite only: PostgreSQL serialises such writers with row locks, not one write lock.)"""
    engine = create_db_engine(f"sqlite:///{tmp_path / 'counter.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE counter (n INTEGER NOT NULL)"))
        connection.execute(text("INSERT INTO counter VALUES (0)"))

    def increment(session):
        n = session.execute(text("SELECT n FROM counter")).scalar_one()
        time.sleep(0.01)
        session.execute(text("UPDATE counter SET n = :n"), {"n": n + 1})

    def writer(_):
        for _ in range(5):
            write_transaction(increment, engine=engine)

    assert at_once(writer, range(8)) == []
    with engine.connect() as connection:
        assert connection.execute(text("SELECT n FROM counter")).scalar_one() == 40
    engine.dispose()


def _locked() -> OperationalError:
    return OperationalError("UPDATE ...", {}, sqlite3.OperationalError("database is locked"))


def test_a_busy_write_is_retried_whole_then_reported_as_busy(engine):
    calls = []

    def flaky(session):
        calls.append(1)
        if len(calls) < 3:
            raise _locked()
        return session.execute(text("SELECT 7")).scalar_one()

    assert write_transaction(flaky, engine=engine) == 7 and len(calls) == 3

    def always_busy(_session):
        raise _locked()

    with pytest.raises(Busy, match="busy .* nothing was saved"):
        write_transaction(always_busy, engine=engine, budget_seconds=0.2)

    def broken(_session):
        raise OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: nope"))

    with pytest.raises(OperationalError, match="no such table"):  # not retried: not busy
        write_transaction(broken, engine=engine)
