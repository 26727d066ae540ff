"""Tasks, task versions (content-hashed) and transcripts."""

from datetime import datetime
from enum import StrEnum

from itsmreview.db import utcnow
from sqlalchemy import JSON, Index, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


class Track(StrEnum):
    single_agent = "single-agent"
    simulated_actors = "simulated-actors"
    multi_agent_team = "multi-agent-team"


class TaskStatus(StrEnum):
    draft = "draft"
    in_review = "in_review"
    pending = "pending"
    approved = "approved"
    needs_revision = "needs_revision"
    rejected = "rejected"
    adjudication = "adjudication"


class SourceKind(StrEnum):
    logs = "logs"
    external = "external"
    expert = "expert"


class Task(SQLModel, table=True):
    """A task across its versions. `status` mirrors the decision on the newest version, so a
    re-imported task reads as unreviewed until its new version is reviewed; each version keeps
    its own decision (TaskVersion.status)."""

    __tablename__ = "tasks"
    __table_args__ = (Index("ix_tasks_persona_external_id", "persona", "external_id"),)

    id: int | None = Field(default=None, primary_key=True)
    external_id: str = Field(sa_type=String(256), unique=True, index=True)
    title: str = Field(sa_type=String(512))
    persona: str = Field(sa_type=String(128), index=True)
    track: Track = Field(sa_type=String(32), index=True)
    status: TaskStatus = Field(default=TaskStatus.draft, sa_type=String(32), index=True)
    # the newest version's benchmark-authoring fields, mirrored for the Tasks page's filters
    difficulty: str | None = Field(default=None, sa_type=String(16), index=True)
    user_type: str | None = Field(default=None, sa_type=String(64), index=True)
    simulator_backbone: str | None = Field(default=None, sa_type=String(128), index=True)
    author_id: int | None = Field(default=None, foreign_key="users.id")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class TaskVersion(SQLModel, table=True):
    __tablename__ = "task_versions"
    __table_args__ = (
        UniqueConstraint("task_id", "version"),
        UniqueConstraint("task_id", "content_hash"),
    )

    id: int | None = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="tasks.id", index=True, ondelete="CASCADE")
    version: int
    content_hash: str = Field(sa_type=String(64))
    title: str = Field(default="", sa_type=String(512))
    persona: str = Field(default="", sa_type=String(128))
    track: str = Field(default="", sa_type=String(32))
    source_format: str = Field(default="native", sa_type=String(32))
    instruction: str = Field(sa_type=Text)
    environment: str = Field(default="", sa_type=Text)
    ground_truth: str = Field(default="", sa_type=Text)
    verifier: str = Field(default="", sa_type=Text)
    tags: list[str] = Field(default_factory=list, sa_type=JSON)
    source: dict = Field(default_factory=dict, sa_type=JSON)
    provenance: list[dict] = Field(default_factory=list, sa_type=JSON)
    extra: dict = Field(default_factory=dict, sa_type=JSON)
    edited_by_id: int | None = Field(default=None, foreign_key="users.id")
    created_at: datetime = Field(default_factory=utcnow)
    difficulty: str | None = Field(default=None, sa_type=String(16), index=True)  # easy|medium|hard
    user_type: str | None = Field(default=None, sa_type=String(64), index=True)
    # the simulated actors' model, from the transcripts' simulator metadata
    simulator_backbone: str | None = Field(default=None, sa_type=String(128), index=True)
    # the review decision on this version (draft: never in a review round)
    status: TaskStatus = Field(
        default=TaskStatus.draft,
        sa_type=String(32),
        index=True,
        sa_column_kwargs={"server_default": "draft"},
    )


class TaskVersionVariant(SQLModel, table=True):
    """A variant a task version's source declares, by sequence key: the Tasks page filters
    by it in SQL instead of reading every source."""

    __tablename__ = "task_version_variants"

    task_version_id: int = Field(
        foreign_key="task_versions.id", primary_key=True, ondelete="CASCADE"
    )
    sequence_key: str = Field(sa_type=String(64), primary_key=True, index=True)
    sequence: list[str] = Field(default_factory=list, sa_type=JSON)


class Transcript(SQLModel, table=True):
    __tablename__ = "transcripts"
    __table_args__ = (UniqueConstraint("task_version_id", "external_id"),)

    id: int | None = Field(default=None, primary_key=True)
    task_version_id: int = Field(foreign_key="task_versions.id", index=True, ondelete="CASCADE")
    external_id: str = Field(sa_type=String(256))
    title: str = Field(default="", sa_type=String(512))
    simulator: dict = Field(default_factory=dict, sa_type=JSON)
    messages: list[dict] = Field(default_factory=list, sa_type=JSON)
    n_turns: int = 0
    extra: dict = Field(default_factory=dict, sa_type=JSON)
