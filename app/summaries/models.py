"""Materialised figures: results that need a whole round or catalog, stored with the state
of the data they were computed from."""

from datetime import datetime

from itsmreview.db import utcnow
from sqlalchemy import JSON, Float, Index, String, Text
from sqlmodel import Field, SQLModel


class Summary(SQLModel, table=True):
    __tablename__ = "summaries"

    kind: str = Field(sa_type=String(64), primary_key=True)
    key: str = Field(sa_type=String(256), primary_key=True)
    fingerprint: str = Field(sa_type=String(256))
    payload: dict = Field(default_factory=dict, sa_type=JSON)
    computed_at: datetime = Field(default_factory=utcnow)
    seconds: float = Field(default=0.0, sa_type=Float)


class QueuedAdjudication(SQLModel, table=True):
    """A task of a round that waits for a lead's adjudication, with the gate's reasons: the
    round's adjudication queue, materialised. Every path that decides tasks keeps it exact
    (`review.reliability`: the gate worker's and the submit's decisions, a whole-round
    re-decision, an adjudication, machine checks); a round's queue counts only once its
    `Summary` row of kind `adjudication-queue` exists (written when it is built)."""

    __tablename__ = "adjudication_queue"
    __table_args__ = (Index("ix_adjudication_queue_round_task", "round_id", "external_id"),)

    round_id: int = Field(foreign_key="review_rounds.id", primary_key=True, ondelete="CASCADE")
    task_version_id: int = Field(
        foreign_key="task_versions.id", primary_key=True, ondelete="CASCADE"
    )
    external_id: str = Field(sa_type=String(256))  # the task's, which never changes: order
    reasons: str = Field(default="", sa_type=Text)  # the gate's, joined by "; "
    decided_at: datetime = Field(default_factory=utcnow)
