"""Enqueueing jobs and running them: handlers by kind, claims under a renewed lease, retries.

Delivery is at least once: a worker that dies mid-job leaves it running under a lease that
lapses, and another worker claims it again. Handlers are therefore idempotent (each says how:
the gate applies a rating exactly once by its own queue, a model review resumes where it
stopped, an export publishes by one rename, summaries are recomputed whole)."""

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from itsmreview.db import get_engine, utcnow, write_transaction
from itsmreview.errors import Busy, InvalidInput, ItsmReviewError, NotFound
from itsmreview.jobs import queries
from itsmreview.jobs.models import Job, JobStatus
from itsmreview.processes import this_process
from itsmreview.settings import get_settings
from sqlalchemy import Engine
from sqlmodel import Session

log = logging.getLogger(__name__)

RETRY_S = 5.0  # the first retry's delay; doubled for each further attempt


@dataclass
class JobContext:
    """What a handler gets: the job's payload, and a way to report progress that the pages read
    from the database. `progress` returns False once the worker lost the job (its lease lapsed
    and another worker took it): a handler may stop then."""

    job_id: int
    kind: str
    key: str
    payload: dict
    worker: str
    engine: Engine
    _last: float = field(default=0.0, repr=False)

    def progress(self, fraction: float, message: str = "", *, every_s: float = 0.5) -> bool:
        now = time.monotonic()
        if now - self._last < every_s and fraction < 1.0:
            return True
        self._last = now
        try:
            return write_transaction(
                lambda s: queries.set_progress(
                    session=s,
                    job_id=self.job_id,
                    worker=self.worker,
                    progress=max(0.0, min(1.0, fraction)),
                    message=message[:500],
                ),
                engine=self.engine,
                budget_seconds=0.5,
            )
        except Busy:  # SQLite: the job's own transaction holds the one write lock; skip a beat
            return True


Handler = Callable[[JobContext], dict | None]
HANDLERS: dict[str, Handler] = {}


def handler(kind: str) -> Callable[[Handler], Handler]:
    """Register the function that runs jobs of `kind` (the worker's module does, for every kind)."""

    def register(function: Handler) -> Handler:
        HANDLERS[kind] = function
        return function

    return register


def enqueue(
    *,
    session: Session,
    kind: str,
    key: str = "",
    payload: dict | None = None,
    max_attempts: int = 3,
) -> Job:
    """Queue a job in the caller's transaction (workers are woken when it commits). While a job
    of the same kind and key is queued or running, that job is returned instead of a second."""
    if not kind or len(kind) > 64 or len(key) > 256:
        raise InvalidInput("a job's kind is 1-64 characters and its key at most 256")
    found = queries.active_job(session=session, kind=kind, key=key)
    if found is not None:
        return found
    job = Job(kind=kind, key=key, payload=payload or {}, max_attempts=max_attempts)
    session.add(job)
    session.flush()
    queries.notify(session=session, kind=kind)
    return job


def wake_workers(*, session: Session, kind: str) -> None:
    """Wake waiting workers when the caller's transaction commits (PostgreSQL's NOTIFY; on
    SQLite they poll): the gate does, for the ratings it queues."""
    queries.notify(session=session, kind=kind)


def job_status(*, session: Session, job_id: int) -> Job:
    job = queries.job_by_id(session=session, job_id=job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    return job


def recent_jobs(*, session: Session, limit: int = 50):
    return queries.jobs_frame(session=session, limit=limit)


def _claim(engine: Engine, worker: str, kinds: list[str] | None) -> JobContext | None:
    def claim(session: Session) -> JobContext | None:
        now = utcnow()
        job = queries.claimable(session=session, now=now, kinds=kinds)
        if job is None:
            return None
        job.status = JobStatus.running
        job.worker = worker
        job.attempts += 1
        job.lease_until = now + timedelta(seconds=get_settings().job_lease_s)
        job.started_at = now
        session.add(job)
        session.flush()
        return JobContext(job.id, job.kind, job.key, dict(job.payload or {}), worker, engine)

    return write_transaction(claim, engine=engine)


class _Heartbeat:
    """Renews a running job's lease every third of it until stopped."""

    def __init__(self, context: JobContext):
        self._context = context
        self._lease_s = get_settings().job_lease_s
        self._stop = threading.Event()
        self.lost = False
        self._thread = threading.Thread(
            target=self._run, name=f"lease {context.job_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        c = self._context
        while not self._stop.wait(self._lease_s / 3):
            try:
                held = write_transaction(
                    lambda s: queries.renew(
                        session=s,
                        job_id=c.job_id,
                        worker=c.worker,
                        lease_until=utcnow() + timedelta(seconds=self._lease_s),
                    ),
                    engine=c.engine,
                )
            except Exception:  # noqa: BLE001 - the next beat tries again; the lease has slack
                log.exception("renewing the lease of job %s", c.job_id)
                continue
            if not held:
                self.lost = True
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _close(context: JobContext, **values) -> bool:
    return write_transaction(
        lambda s: queries.close(session=s, job_id=context.job_id, worker=context.worker, **values),
        engine=context.engine,
    )


def run_next(
    *, worker: str | None = None, engine: Engine | None = None, kinds: list[str] | None = None
) -> JobContext | None:
    """Claim the next due job and run it to its end here; None when nothing is due."""
    engine = engine or get_engine()
    worker = worker or this_process()
    context = _claim(engine, worker, kinds)
    if context is None:
        return None
    function = HANDLERS.get(context.kind)
    if function is None:
        _close(
            context,
            status=JobStatus.failed,
            error=f"no handler for jobs of kind {context.kind!r} in this worker",
            finished_at=utcnow(),
        )
        return context
    beat = _Heartbeat(context)
    try:
        result = function(context)
    except Exception as exc:  # noqa: BLE001 - stored with the job, retried or failed
        beat.stop()
        log.exception("job %s (%s) failed", context.job_id, context.kind)
        # a refusal (bad input, no permission, not found) fails the same way again
        final = isinstance(exc, ItsmReviewError) and not isinstance(exc, Busy)
        _retry_or_fail(context, f"{type(exc).__name__}: {exc}", final=final)
        return context
    beat.stop()
    _close(
        context,
        status=JobStatus.done,
        progress=1.0,
        result=_json_ready(result),
        error=None,
        finished_at=utcnow(),
        lease_until=None,
    )
    return context


def _retry_or_fail(context: JobContext, error: str, *, final: bool = False) -> None:
    def decide(session: Session) -> None:
        job = queries.job_by_id(session=session, job_id=context.job_id)
        if job is None or job.worker != context.worker or job.status != JobStatus.running:
            return  # another worker holds it now
        if job.attempts < job.max_attempts and not final:
            delay = RETRY_S * 2 ** (job.attempts - 1)
            values = dict(status=JobStatus.queued, run_after=utcnow() + timedelta(seconds=delay))
        else:
            values = dict(status=JobStatus.failed, finished_at=utcnow())
        queries.close(
            session=session,
            job_id=context.job_id,
            worker=context.worker,
            error=error[:4000],
            lease_until=None,
            **values,
        )

    write_transaction(decide, engine=context.engine)


def _json_ready(result: Any) -> dict | None:
    if result is None or isinstance(result, dict):
        return result
    return {"result": str(result)}


class Worker:
    """Runs jobs until stopped: every due job, then waits for a NOTIFY (PostgreSQL) or the next
    poll. `between` runs between looks (the gate's queue is applied there)."""

    def __init__(
        self,
        *,
        engine: Engine | None = None,
        name: str | None = None,
        poll_s: float = 2.0,
        kinds: list[str] | None = None,
        between: Callable[[], Any] | None = None,
    ):
        self.engine = engine or get_engine()
        self.name = name or f"{this_process()} {uuid.uuid4().hex[:8]}"
        self.poll_s = poll_s
        self.kinds = kinds
        self.between = between
        self.ran = 0
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        listener = None
        if self.engine.dialect.name == "postgresql":
            listener = queries.Listener(self.engine)
        try:
            while not self._stop.is_set():
                if self.between is not None:
                    try:
                        self.between()
                    except Exception:  # noqa: BLE001 - logged; the next look retries
                        log.exception("between jobs")
                while not self._stop.is_set() and run_next(
                    worker=self.name, engine=self.engine, kinds=self.kinds
                ):
                    self.ran += 1
                if listener is not None:
                    listener.wait(self.poll_s)
                else:
                    self._stop.wait(self.poll_s)
        finally:
            if listener is not None:
                listener.close()
