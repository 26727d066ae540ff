"""Every statement of the job queue: enqueue, claim under a lease (SKIP LOCKED on PostgreSQL),
renew, finish, and the wake-up channel (LISTEN/NOTIFY) that workers wait on."""

from datetime import datetime

import pandas as pd
from itsmreview.db import frame_of
from itsmreview.jobs.models import Job, JobStatus
from sqlalchemy import Engine, or_, text, update
from sqlalchemy.engine import make_url
from sqlmodel import Session, select

CHANNEL = "itsmreview_jobs"


def active_job(*, session: Session, kind: str, key: str) -> Job | None:
    return session.exec(
        select(Job).where(
            Job.kind == kind,
            Job.key == key,
            Job.status.in_([JobStatus.queued, JobStatus.running]),
        )
    ).first()


def notify(*, session: Session, kind: str) -> None:
    """Wake listening workers when this transaction commits (PostgreSQL; SQLite workers poll)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_notify(:channel, :kind)"), {"channel": CHANNEL, "kind": kind}
        )


def claimable(*, session: Session, now: datetime, kinds: list[str] | None) -> Job | None:
    """The oldest job a worker may take now: queued and due, or running under a lapsed lease
    (its worker died). Rows other workers are taking are skipped, not waited for."""
    query = select(Job).where(
        or_(
            (Job.status == JobStatus.queued) & (Job.run_after <= now),
            (Job.status == JobStatus.running) & (Job.lease_until < now),
        )
    )
    if kinds:
        query = query.where(Job.kind.in_(kinds))
    query = query.order_by(Job.run_after, Job.id).limit(1)
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return session.exec(query).first()


def _owned(job_id: int, worker: str):
    return (Job.id == job_id) & (Job.worker == worker) & (Job.status == JobStatus.running)


def renew(*, session: Session, job_id: int, worker: str, lease_until: datetime) -> bool:
    """Extend the lease, only while this worker still holds the job."""
    done = session.execute(
        update(Job).where(_owned(job_id, worker)).values(lease_until=lease_until)
    )
    return done.rowcount == 1


def set_progress(
    *, session: Session, job_id: int, worker: str, progress: float, message: str
) -> bool:
    done = session.execute(
        update(Job).where(_owned(job_id, worker)).values(progress=progress, message=message)
    )
    return done.rowcount == 1


def close(*, session: Session, job_id: int, worker: str, **values) -> bool:
    """Finish, fail or requeue a job, only while this worker still holds it: a worker whose
    lease lapsed and whose job another worker took changes nothing."""
    done = session.execute(update(Job).where(_owned(job_id, worker)).values(**values))
    return done.rowcount == 1


def jobs_frame(*, session: Session, limit: int = 50) -> pd.DataFrame:
    """The newest jobs, for the pages and `itsmreview jobs`."""
    query = select(
        Job.id,
        Job.kind,
        Job.key,
        Job.status,
        Job.attempts,
        Job.progress,
        Job.message,
        Job.worker,
        Job.error,
        Job.created_at,
        Job.started_at,
        Job.finished_at,
    ).order_by(Job.id.desc())
    return frame_of(session, query.limit(limit))


def job_by_id(*, session: Session, job_id: int) -> Job | None:
    return session.get(Job, job_id)


class Listener:
    """A connection of its own (outside any pool, in autocommit) that listens for enqueued jobs
    (PostgreSQL's NOTIFY); notifications that come while the worker is busy wait in it."""

    def __init__(self, engine: Engine):
        import psycopg

        url = make_url(engine.url).set(drivername="postgresql")
        self._conn = psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)
        self._conn.execute(f"LISTEN {CHANNEL}")

    def wait(self, timeout: float) -> bool:
        """Whether a job was enqueued within `timeout` seconds (or before, while busy)."""
        woken = False
        for _ in self._conn.notifies(timeout=timeout, stop_after=1):
            woken = True
        if woken:  # drain the rest: one look at the queue serves them all
            for _ in self._conn.notifies(timeout=0):
                pass
        return woken

    def close(self) -> None:
        self._conn.close()
