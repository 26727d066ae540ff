"""Figures that need a whole round or catalog, computed once per state of their data and
stored (`summaries`), so that a page reads them instead of computing them on view.

A reader passes the current fingerprint of the data. A stored summary with that fingerprint
is current. Otherwise the figures are computed at once when the data is small (`inline`), or
else in a background thread of this process while the page shows the stored ones, marked with
the time they were computed; one computation per summary at a time."""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from itsmreview.db import utcnow
from itsmreview.summaries import queries
from itsmreview.summaries.models import Summary
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session


@dataclass(frozen=True)
class Materialised:
    """Figures as stored: `payload` is None while the first computation runs."""

    payload: Any
    computed_at: datetime | None
    current: bool
    refreshing: bool


_RUNNING: set[tuple[str, str, str]] = set()
_RUNNING_LOCK = threading.Lock()
_FAILURES: dict[tuple[str, str], str] = {}


def materialised(
    *,
    session: Session,
    kind: str,
    key: str,
    fingerprint: str,
    compute: Callable[[Session], dict],
    inline: bool,
) -> Materialised:
    """The stored figures of `kind`/`key` for the data in state `fingerprint`, computing
    them with `compute(session)` (a JSON-ready dict) inline or in the background."""
    found = queries.stored(session=session, kind=kind, key=key)
    if found is not None and found.fingerprint == fingerprint:
        return Materialised(found.payload, found.computed_at, current=True, refreshing=False)
    if inline:
        started = time.perf_counter()
        payload = compute(session)
        summary = _summary(kind, key, fingerprint, payload, time.perf_counter() - started)
        try:
            with session.begin_nested():  # the caller's transaction keeps it
                queries.replace(session=session, summary=summary)
        except DBAPIError:
            pass  # a concurrent reader stored the same figures first
        return Materialised(payload, summary.computed_at, current=True, refreshing=False)
    _start(session.get_bind(), kind, key, fingerprint, compute)
    return Materialised(
        None if found is None else found.payload,
        None if found is None else found.computed_at,
        current=False,
        refreshing=True,
    )


def last_failure(kind: str, key: str) -> str | None:
    """Why the newest background computation of this summary failed, if it did."""
    return _FAILURES.get((kind, key))


def wait_for_background(timeout: float = 60.0) -> None:
    """Block until no background computation runs (tests, benchmarks, the CLI)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with _RUNNING_LOCK:
            if not _RUNNING:
                return
        time.sleep(0.02)
    raise TimeoutError("background summaries still running")


def _start(engine, kind: str, key: str, fingerprint: str, compute) -> None:
    job = (kind, key, fingerprint)
    with _RUNNING_LOCK:
        if any(running[:2] == (kind, key) for running in _RUNNING):
            return  # one at a time; the next reader starts the next one
        _RUNNING.add(job)

    def run() -> None:
        try:
            started = time.perf_counter()
            with Session(engine, expire_on_commit=False) as session:
                payload = compute(session)
                session.rollback()
            _store(engine, kind, key, fingerprint, payload, time.perf_counter() - started)
            _FAILURES.pop((kind, key), None)
        except Exception as exc:  # noqa: BLE001 - kept for the page to show
            _FAILURES[(kind, key)] = f"{type(exc).__name__}: {exc}"
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(job)

    threading.Thread(target=run, name=f"summary {kind} {key}", daemon=True).start()


def _summary(kind: str, key: str, fingerprint: str, payload: dict, seconds: float) -> Summary:
    return Summary(
        kind=kind,
        key=key,
        fingerprint=fingerprint,
        payload=payload,
        computed_at=utcnow(),
        seconds=seconds,
    )


def _store(engine, kind: str, key: str, fingerprint: str, payload: dict, seconds: float) -> None:
    """Write the summary in its own short transaction; a concurrent writer of the same summary
    may win (both computed the same figures), which is fine."""
    with Session(engine) as session:
        try:
            queries.replace(
                session=session, summary=_summary(kind, key, fingerprint, payload, seconds)
            )
            session.commit()
        except DBAPIError:
            session.rollback()


def run_in_background(engine, name: str, work: Callable[[Session], Any]) -> bool:
    """Run `work(session)` in a write transaction (`db.write_transaction`) on a thread of
    this process, unless a run of the same `name` is going: a build that must happen once,
    such as a round's first adjudication queue. Returns whether this call started it; a
    failure is kept for `last_failure(name, "")`."""
    from itsmreview.db import write_transaction

    job = (name, "", "")
    with _RUNNING_LOCK:
        if any(running[:1] == (name,) for running in _RUNNING):
            return False
        _RUNNING.add(job)

    def run() -> None:
        try:
            write_transaction(work, engine=engine)
            _FAILURES.pop((name, ""), None)
        except Exception as exc:  # noqa: BLE001 - kept for the page to show
            _FAILURES[(name, "")] = f"{type(exc).__name__}: {exc}"
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(job)

    threading.Thread(target=run, name=name, daemon=True).start()
    return True
