"""Materialised figures: results that need a whole round or catalog, stored with the state
of the data they were computed from."""

from datetime import datetime

from itsmreview.db import utcnow
from sqlalchemy import JSON, Float, String
from sqlmodel import Field, SQLModel


class Summary(SQLModel, table=True):
    __tablename__ = "summaries"

    kind: str = Field(sa_type=String(64), primary_key=True)
    key: str = Field(sa_type=String(256), primary_key=True)
    fingerprint: str = Field(sa_type=String(256))
    payload: dict = Field(default_factory=dict, sa_type=JSON)
    computed_at: datetime = Field(default_factory=utcnow)
    seconds: float = Field(default=0.0, sa_type=Float)
