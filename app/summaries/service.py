"""Figures that need a whole round or catalog, computed once per state of their data and
stored (`summaries`), so that a page reads them instead of computing them on view.

Each kind of figures is a named computation (`@computation("kind")`: a function of a session
and the summary's key), so that any process can run it: a page's, or a worker's. A reader
passes the current fingerprint of the data. A stored summary with that fingerprint is
current. Otherwise the figures are computed at once when the data is small (`inline`), or
else in the background while the page shows the stored ones, marked with the time they were
computed: as a job for `itsmreview worker` (setting `jobs=worker`), or on a thread of this
process; one computation per summary at a time."""

import json
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

JOB_KIND = "summary"  # the job kind of a background computation in a worker

Computation = Callable[[Session, str], Any]


@dataclass(frozen=True)
class _Registered:
    function: Computation
    writes: bool  # a build in a write transaction, not figures to store
    as_lead: bool = False  # called with `actor=`: the lead who asked (a worker re-checks them)


_COMPUTATIONS: dict[str, _Registered] = {}


def computation(kind: str, *, writes: bool = False) -> Callable[[Computation], Computation]:
    """Register `function(session, key)` as the computation of summaries of `kind`: it returns
    their JSON-ready figures, or with `writes` it builds something in its own write
    transaction (`run_in_background`). Registered at import, so a worker that imports the
    module can run it."""

    def register(function: Computation) -> Computation:
        _register(kind, _Registered(function, writes))
        return function

    return register


def lead_figures(function: Callable[..., Any]) -> Callable[..., Any]:
    """Register a lead's figures, `function(session=..., actor=..., **keys)` returning a
    DataFrame or JSON-ready data, as the computation named after the function; its key is the
    JSON of `keys`. It runs as the lead who asked (a worker checks their session again)."""
    kind = f"{function.__module__}.{function.__qualname__}"

    def compute(session: Session, key: str, actor) -> dict:
        result = function(session=session, actor=actor, **json.loads(key))
        if hasattr(result, "to_json"):  # a DataFrame
            return {"table": result.to_json(orient="table", index=False)}
        return {"value": result}

    _register(kind, _Registered(compute, writes=False, as_lead=True))
    function.summary_kind = kind
    return function


def _register(kind: str, entry: _Registered) -> None:
    known = _COMPUTATIONS.get(kind)
    if known is not None and known.function.__qualname__ != entry.function.__qualname__:
        raise ValueError(f"two computations are named {kind!r}")
    _COMPUTATIONS[kind] = entry


def registered_kinds() -> set[str]:
    return set(_COMPUTATIONS)


def _registered(kind: str) -> _Registered:
    """The computation of `kind`; a clear error when none is registered."""
    try:
        return _COMPUTATIONS[kind]
    except KeyError:
        raise LookupError(
            f"no computation of summaries named {kind!r} is registered "
            f"(known: {', '.join(sorted(_COMPUTATIONS)) or 'none'})"
        ) from None


def _call(entry: _Registered, session: Session, key: str, actor) -> Any:
    if entry.as_lead:
        if actor is None:
            raise ValueError("a lead's figures are computed as the lead who asked: pass actor")
        return entry.function(session, key, actor)
    return entry.function(session, key)


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
    inline: bool,
    actor=None,
) -> Materialised:
    """The stored figures of `kind`/`key` for the data in state `fingerprint`, computing them
    with the registered computation of `kind` inline or in the background (`actor`: the lead
    who asks, for figures registered with `lead_figures`)."""
    entry = _registered(kind)
    found = queries.stored(session=session, kind=kind, key=key)
    if found is not None and found.fingerprint == fingerprint:
        return Materialised(found.payload, found.computed_at, current=True, refreshing=False)
    if inline:
        started = time.perf_counter()
        payload = _call(entry, session, key, actor)
        summary = _summary(kind, key, fingerprint, payload, time.perf_counter() - started)
        try:
            with session.begin_nested():  # the caller's transaction keeps it
                queries.replace(session=session, summary=summary)
        except DBAPIError:
            pass  # a concurrent reader stored the same figures first
        return Materialised(payload, summary.computed_at, current=True, refreshing=False)
    _start(session.get_bind(), kind, key, fingerprint, actor)
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


def _in_workers() -> bool:
    from itsmreview.settings import get_settings

    return get_settings().jobs == "worker"


def _queue(engine, kind: str, key: str, fingerprint: str = "", actor=None) -> bool:
    """Queue the computation for a worker, in a short transaction of its own (a page's
    session may never commit). False when one of this summary is queued or running already."""
    from itsmreview.jobs.service import enqueue

    payload = {"kind": kind, "key": key, "fingerprint": fingerprint}
    if actor is not None:  # the worker acts as this lead while their session lasts
        payload |= {"actor_id": int(actor.id), "actor_epoch": int(actor.session_epoch or 0)}
    with Session(engine) as session:
        job = enqueue(
            session=session,
            kind=JOB_KIND,
            key=_job_key(kind, key),
            payload=payload,
            max_attempts=2,
        )
        fresh = job.started_at is None and job.attempts == 0
        session.commit()
    return fresh


def _job_key(kind: str, key: str) -> str:
    """One job per summary: its kind and key, or their digest when longer than a job key."""
    import hashlib

    joined = f"{kind}|{key}"
    return joined if len(joined) <= 256 else hashlib.sha256(joined.encode()).hexdigest()


def _start(engine, kind: str, key: str, fingerprint: str, actor=None) -> None:
    if _in_workers():
        _queue(engine, kind, key, fingerprint, actor)
        return
    # one at a time; the next reader starts the next one
    _on_thread(
        kind, key, fingerprint, lambda: compute_and_store(engine, kind, key, fingerprint, actor)
    )


def _on_thread(kind: str, key: str, fingerprint: str, work: Callable[[], Any]) -> bool:
    """Run `work` on a thread of this process unless one of `kind`/`key` runs already;
    whether this call started it. A failure is kept for `last_failure(kind, key)`."""
    job = (kind, key, fingerprint)
    with _RUNNING_LOCK:
        if any(running[:2] == (kind, key) for running in _RUNNING):
            return False
        _RUNNING.add(job)

    def run() -> None:
        try:
            work()
            _FAILURES.pop((kind, key), None)
        except Exception as exc:  # noqa: BLE001 - kept for the page to show
            _FAILURES[(kind, key)] = f"{type(exc).__name__}: {exc}"
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(job)

    threading.Thread(target=run, name=f"summary {kind} {key}", daemon=True).start()
    return True


def compute_and_store(engine, kind: str, key: str, fingerprint: str, actor=None) -> dict:
    """Run the registered computation of `kind` for `key` and store its figures under
    `fingerprint` (a thread's or a worker's job): read in one transaction, written in another."""
    started = time.perf_counter()
    with Session(engine, expire_on_commit=False) as session:
        payload = _call(_registered(kind), session, key, actor)
        session.rollback()
    _store(engine, kind, key, fingerprint, payload, time.perf_counter() - started)
    return payload


def run_job(engine, payload: dict) -> dict:
    """A worker's `summary` job: figures computed and stored, or a build run (`writes`). A
    lead's figures run as the lead who asked, while their session lasts."""
    from itsmreview.db import write_transaction

    kind, key = payload["kind"], payload["key"]
    entry = _registered(kind)
    if entry.writes:
        write_transaction(lambda session: entry.function(session, key), engine=engine)
        return {"kind": kind, "key": key}
    actor = None
    if entry.as_lead:
        from itsmreview.accounts.service import SessionCheck, revalidate

        with Session(engine, expire_on_commit=False) as session:
            check = SessionCheck(int(payload["actor_id"]), int(payload["actor_epoch"]))
            actor = revalidate(session=session, check=check)
            session.expunge(actor)
    compute_and_store(engine, kind, key, payload.get("fingerprint", ""), actor)
    return {"kind": kind, "key": key, "fingerprint": payload.get("fingerprint", "")}


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


def run_in_background(engine, kind: str, key: str) -> bool:
    """Run the registered build `kind` (`writes=True`) for `key` in a write transaction
    (`db.write_transaction`), unless a run of it is going: a build that must happen once, such
    as a round's first adjudication queue. A worker's job (setting `jobs=worker`) or a thread
    of this process. Returns whether this call started it; a failure on a thread is kept for
    `last_failure(kind, key)`, a worker's in its job."""
    from itsmreview.db import write_transaction

    if not _registered(kind).writes:
        raise LookupError(
            f"{kind!r} is not a build (register it with computation(..., writes=True))"
        )
    if _in_workers():
        return _queue(engine, kind, key)
    build = _registered(kind).function
    return _on_thread(
        kind, key, "", lambda: write_transaction(lambda session: build(session, key), engine=engine)
    )
