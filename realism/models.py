"""Mapped transcripts: the events a mapping spec made of a transcript (issue 36)."""

from datetime import datetime

from itsmreview.db import utcnow
from sqlalchemy import JSON, String, UniqueConstraint
from sqlmodel import Field, SQLModel


class MappedTranscript(SQLModel, table=True):
    """A transcript's event sequence under one mapping spec (the newest mapping replaces an
    older one of the same spec), the simulator that wrote it and what no rule covered."""

    __tablename__ = "mapped_transcripts"
    __table_args__ = (UniqueConstraint("transcript_id", "spec"),)

    id: int | None = Field(default=None, primary_key=True)
    transcript_id: int = Field(foreign_key="transcripts.id", index=True, ondelete="CASCADE")
    spec: str = Field(sa_type=String(128), index=True)
    spec_version: int
    spec_sha256: str = Field(sa_type=String(64))
    log: str = Field(sa_type=String(256))
    simulator: str = Field(sa_type=String(128), index=True)
    events: list[dict] = Field(default_factory=list, sa_type=JSON)
    units: int = 0
    unmapped: list[list] = Field(default_factory=list, sa_type=JSON)
    mapped_at: datetime = Field(default_factory=utcnow)
