"""The ledger's one table: append-only, hash-chained entries."""

from datetime import datetime

from itsmreview.db import utcnow
from sqlalchemy import JSON, String, Text
from sqlmodel import Field, SQLModel


class LedgerEntry(SQLModel, table=True):
    """One link of the hash chain; rows are only ever inserted."""

    __tablename__ = "ledger_entries"

    id: int | None = Field(default=None, primary_key=True)
    seq: int = Field(unique=True, index=True)
    created_at: datetime = Field(default_factory=utcnow)
    artifact_type: str = Field(sa_type=String(64), index=True)
    artifact_id: str = Field(sa_type=String(256), index=True)
    field: str | None = Field(default=None, sa_type=String(128))
    source_kind: str = Field(sa_type=String(16), index=True)
    reference: str = Field(default="", sa_type=Text)
    action: str = Field(sa_type=String(64))
    actor_id: int | None = Field(default=None, foreign_key="users.id")
    payload: dict = Field(default_factory=dict, sa_type=JSON)
    prev_hash: str = Field(sa_type=String(64))
    entry_hash: str = Field(sa_type=String(64), unique=True)
