"""The record of each export written: its manifest's digest, name, filters and counts."""

from datetime import datetime

from itsmreview.db import utcnow
from sqlalchemy import JSON, String, Text
from sqlmodel import Field, SQLModel


class Export(SQLModel, table=True):
    __tablename__ = "exports"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(128))
    format: str = Field(sa_type=String(32))
    task_filter: dict = Field(default_factory=dict, sa_type=JSON)
    task_count: int = 0
    content_hash: str = Field(sa_type=String(64))
    path: str | None = Field(default=None, sa_type=Text)
    manifest: dict = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = Field(default=None, foreign_key="users.id")
