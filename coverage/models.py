"""Imported event logs and the statistics materialised at import."""

from datetime import datetime
from enum import StrEnum

from itsmreview.db import utcnow
from sqlalchemy import JSON, Float, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


class VariantLevel(StrEnum):
    raw = "raw"
    collapsed = "collapsed"


class EventLog(SQLModel, table=True):
    __tablename__ = "event_logs"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(128), index=True)
    version: int = 1
    source_path: str = Field(sa_type=Text)
    sha256: str = Field(sa_type=String(64), index=True)
    mapping: dict = Field(default_factory=dict, sa_type=JSON)
    mapping_hash: str = Field(sa_type=String(64))
    preset: str | None = Field(default=None, sa_type=String(32))
    # the key of its files' folder, relative to the storage root (itsmreview.storage)
    events_path: str | None = Field(default=None, sa_type=Text)
    n_cases: int = 0
    n_events: int = 0
    n_activities: int = 0
    n_variants: int = 0
    n_collapsed_variants: int = 0
    n_df_pairs: int = 0
    n_singleton_variants: int = 0
    first_timestamp: datetime | None = None
    last_timestamp: datetime | None = None
    imported_at: datetime = Field(default_factory=utcnow)
    imported_by_id: int | None = Field(default=None, foreign_key="users.id")


class LogVariant(SQLModel, table=True):
    __tablename__ = "log_variants"
    __table_args__ = (UniqueConstraint("log_id", "level", "sequence_key"),)

    id: int | None = Field(default=None, primary_key=True)
    log_id: int = Field(foreign_key="event_logs.id", index=True, ondelete="CASCADE")
    level: VariantLevel = Field(sa_type=String(16))
    rank: int
    sequence: list[str] = Field(sa_type=JSON)
    sequence_key: str = Field(sa_type=String(64))
    length: int
    case_count: int
    share: float = Field(sa_type=Float)
    median_throughput_s: float | None = Field(default=None, sa_type=Float)
    example_case_ids: list[str] = Field(default_factory=list, sa_type=JSON)


class LogDirectlyFollows(SQLModel, table=True):
    __tablename__ = "log_directly_follows"
    __table_args__ = (UniqueConstraint("log_id", "source", "target"),)

    id: int | None = Field(default=None, primary_key=True)
    log_id: int = Field(foreign_key="event_logs.id", index=True, ondelete="CASCADE")
    source: str = Field(sa_type=String(256))
    target: str = Field(sa_type=String(256))
    count: int


class LogActivity(SQLModel, table=True):
    __tablename__ = "log_activities"
    __table_args__ = (UniqueConstraint("log_id", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    log_id: int = Field(foreign_key="event_logs.id", index=True, ondelete="CASCADE")
    name: str = Field(sa_type=String(256))
    event_count: int
    case_count: int


class LogRoleValue(SQLModel, table=True):
    __tablename__ = "log_role_values"
    __table_args__ = (UniqueConstraint("log_id", "attribute", "value"),)

    id: int | None = Field(default=None, primary_key=True)
    log_id: int = Field(foreign_key="event_logs.id", index=True, ondelete="CASCADE")
    attribute: str = Field(sa_type=String(128))
    value: str = Field(sa_type=String(256))
    event_count: int
    case_count: int


class TeamMapping(SQLModel, table=True):
    """One version of a log's mapping of a role attribute's values (assignment groups) to the
    teams practitioners distil them into, optionally with a level or role per group."""

    __tablename__ = "team_mappings"
    __table_args__ = (UniqueConstraint("log_name", "attribute", "version"),)

    id: int | None = Field(default=None, primary_key=True)
    log_name: str = Field(sa_type=String(128), index=True)
    attribute: str = Field(sa_type=String(128))
    version: int = 1
    teams: dict = Field(default_factory=dict, sa_type=JSON)  # group -> team
    levels: dict = Field(default_factory=dict, sa_type=JSON)  # group -> level or role
    source_kind: str = Field(default="expert", sa_type=String(16))  # expert | external
    reference: str = Field(default="", sa_type=Text)
    content_sha256: str = Field(sa_type=String(64))
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = Field(default=None, foreign_key="users.id")


class LeaseState(StrEnum):
    running = "running"  # the import may still write and publish; renewed while it runs
    published = "published"  # committed with its log: never removed by cleanup
    ended = "ended"  # the import failed or was refused: its files may go
    reaped = "reaped"  # a cleanup took it: its files are being removed


class ImportLease(SQLModel, table=True):
    """An import's claim on the storage key it stages its files under. Committed on its own
    before the import writes a file, renewed while it runs; the import's own transaction
    marks it published (only while it is still running), so a cleanup, which first marks an
    ended or expired lease reaped in a committed transaction of its own, never removes files
    a log points at."""

    __tablename__ = "import_leases"

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(sa_type=String(255), unique=True)
    holder: str = Field(default="", sa_type=String(255))  # host and process, for people
    state: LeaseState = Field(default=LeaseState.running, sa_type=String(16))
    started_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime = Field(index=True)
