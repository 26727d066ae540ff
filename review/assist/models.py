"""A model review (one run of the model rater over a round) and each request it made."""

from datetime import datetime
from enum import StrEnum

from itsmreview.db import utcnow
from sqlalchemy import Float, Index, String, Text
from sqlmodel import Field, SQLModel


class ModelRunStatus(StrEnum):
    running = "running"
    cancelled = "cancelled"
    finished = "finished"
    failed = "failed"


class RequestOutcome(StrEnum):
    rated = "rated"
    refused = "refused"  # stop reason `refusal`
    cut_off = "cut_off"  # stop reason `max_tokens` before the rating was complete
    malformed = "malformed"  # no rating tool call, or one the rubric refuses
    error = "error"  # the API answered with an error after the SDK's retries


class ModelRun(SQLModel, table=True):
    """A model review of a round: which model and prompt rate, how far it got, what it cost.
    A run is resumed by running it again: tasks its rater has rated are never sent again."""

    __tablename__ = "model_runs"

    id: int | None = Field(default=None, primary_key=True)
    round_id: int = Field(foreign_key="review_rounds.id", index=True, ondelete="CASCADE")
    rater_id: int = Field(foreign_key="users.id", index=True)
    model: str = Field(sa_type=String(128))
    prompt_sha256: str = Field(sa_type=String(64))
    task_limit: int | None = None  # the most tasks the run may rate
    planned: int = 0  # tasks to rate when the run started (its limit applied)
    status: ModelRunStatus = Field(default=ModelRunStatus.running, sa_type=String(16))
    cancel_requested: bool = False
    rated: int = 0
    skipped: int = 0  # rated by this rater before the run (or its earlier part) started
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = Field(default=0.0, sa_type=Float)  # None: the model has no price
    estimated_cost_usd: float | None = Field(default=None, sa_type=Float)
    error: str = Field(default="", sa_type=Text)
    started_by_id: int | None = Field(default=None, foreign_key="users.id")
    created_at: datetime = Field(default_factory=utcnow)
    owner: str = Field(default="", sa_type=String(128))  # 'host pid' of the process running it
    heartbeat_at: datetime | None = None
    finished_at: datetime | None = None


class ModelRequest(SQLModel, table=True):
    """One request of a run for one task: its outcome, tokens and cost, and the rating it
    produced (None when it failed)."""

    __tablename__ = "model_requests"
    __table_args__ = (Index("ix_model_requests_run_task", "run_id", "task_version_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="model_runs.id", ondelete="CASCADE")
    task_version_id: int = Field(foreign_key="task_versions.id", index=True)
    rating_id: int | None = Field(default=None, foreign_key="ratings.id")
    outcome: RequestOutcome = Field(sa_type=String(16))
    reason: str = Field(default="", sa_type=Text)
    stop_reason: str | None = Field(default=None, sa_type=String(32))
    request_id: str | None = Field(default=None, sa_type=String(128))
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = Field(default=None, sa_type=Float)
    seconds: float = Field(default=0.0, sa_type=Float)
    created_at: datetime = Field(default_factory=utcnow)
