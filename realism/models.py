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


class BlindTest(SQLModel, table=True):
    """A blind test: fragments of real cases and of a simulator's mapped transcripts, drawn
    alike and shuffled, for experts to tell apart."""

    __tablename__ = "blind_tests"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(128), unique=True)
    simulator: str = Field(sa_type=String(128))
    spec: str = Field(sa_type=String(128))
    spec_sha256: str = Field(sa_type=String(64))
    log: str = Field(sa_type=String(256))
    log_version: int
    seed: int
    state: str = Field(default="open", sa_type=String(16))
    created_by_id: int | None = Field(default=None, foreign_key="users.id")
    created_at: datetime = Field(default_factory=utcnow)
    closed_at: datetime | None = None


class BlindFragment(SQLModel, table=True):
    """One fragment, in the order experts see them; `source` (real or simulated) and
    `reference` (the case or transcript) are never shown to them."""

    __tablename__ = "blind_fragments"
    __table_args__ = (UniqueConstraint("test_id", "position"),)

    id: int | None = Field(default=None, primary_key=True)
    test_id: int = Field(foreign_key="blind_tests.id", index=True, ondelete="CASCADE")
    position: int
    source: str = Field(sa_type=String(16))
    reference: str = Field(sa_type=String(512))
    steps: list[dict] = Field(default_factory=list, sa_type=JSON)


class BlindAnswer(SQLModel, table=True):
    """An expert's answer on one fragment: judged real or simulated, with a confidence 1-5."""

    __tablename__ = "blind_answers"
    __table_args__ = (UniqueConstraint("fragment_id", "expert_id"),)

    id: int | None = Field(default=None, primary_key=True)
    fragment_id: int = Field(foreign_key="blind_fragments.id", index=True, ondelete="CASCADE")
    expert_id: int = Field(foreign_key="users.id", index=True)
    judged: str = Field(sa_type=String(16))
    confidence: int
    answered_at: datetime = Field(default_factory=utcnow)


TEXT_TURN = -1  # `call` of a label on a turn's text (not on one of its tool calls)


class TurnLabel(SQLModel, table=True):
    """A model's label for a turn no rule of a spec matched: an activity of the log, or none
    (`label` null). It counts (joins the mapped events) only once an expert confirms it."""

    __tablename__ = "turn_labels"
    __table_args__ = (UniqueConstraint("transcript_id", "spec", "turn", "call"),)

    id: int | None = Field(default=None, primary_key=True)
    transcript_id: int = Field(foreign_key="transcripts.id", index=True, ondelete="CASCADE")
    spec: str = Field(sa_type=String(128), index=True)
    turn: int
    call: int = TEXT_TURN
    label: str | None = Field(default=None, sa_type=String(256))
    reason: str = Field(default="", sa_type=String(2000))
    model: str = Field(sa_type=String(128))
    prompt_sha256: str = Field(sa_type=String(64))
    state: str = Field(default="proposed", sa_type=String(16), index=True)
    decided_by_id: int | None = Field(default=None, foreign_key="users.id")
    decided_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
