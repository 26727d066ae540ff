"""The job queue's one table: what to run, who runs it under which lease, and how far it got."""

from datetime import datetime
from enum import StrEnum

from itsmreview.db import utcnow
from sqlalchemy import JSON, Float, Index, String, Text, column
from sqlmodel import Field, SQLModel


class JobStatus(StrEnum):
    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"


class Job(SQLModel, table=True):
    """One piece of background work. A worker claims it under a lease that it renews while it
    runs; a job whose lease ran out (its worker died) is claimed again, up to `max_attempts`.
    At most one queued or running job per (kind, key): enqueueing it again returns that one."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_claim", "status", "run_after"),
        Index(
            "ux_jobs_active_kind_key",
            "kind",
            "key",
            unique=True,
            sqlite_where=column("status").in_(("queued", "running")),
            postgresql_where=column("status").in_(("queued", "running")),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(sa_type=String(64))
    key: str = Field(default="", sa_type=String(256))
    payload: dict = Field(default_factory=dict, sa_type=JSON)
    status: JobStatus = Field(default=JobStatus.queued, sa_type=String(16))
    attempts: int = 0
    max_attempts: int = 3
    run_after: datetime = Field(default_factory=utcnow)
    lease_until: datetime | None = None
    worker: str | None = Field(default=None, sa_type=String(256))
    progress: float = Field(default=0.0, sa_type=Float)
    message: str = Field(default="", sa_type=Text)
    error: str | None = Field(default=None, sa_type=Text)
    result: dict | None = Field(default=None, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
