"""Users, their roles, login sessions and failed logins (the tables of accounts)."""

from datetime import datetime
from enum import StrEnum

from itsmreview.db import utcnow
from sqlalchemy import JSON, String, UniqueConstraint
from sqlmodel import Field, SQLModel


class Role(StrEnum):
    expert = "expert"
    lead = "lead"
    admin = "admin"
    model = "model"  # a model rater: rates through model reviews only, never logs in


class User(SQLModel, table=True):
    __tablename__ = "users"

    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(sa_type=String(64), unique=True, index=True)
    display_name: str = Field(sa_type=String(128))
    email: str | None = Field(default=None, sa_type=String(320), unique=True, index=True)
    role: Role = Field(sa_type=String(16))
    password_hash: str = Field(sa_type=String(256))
    expertise: list[str] = Field(default_factory=list, sa_type=JSON)
    active: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    # raised on deactivation, role change and password reset: every open session ends
    session_epoch: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class LoginFailure(SQLModel, table=True):
    """Consecutive failed logins of one account name or one address, for throttling."""

    __tablename__ = "login_failures"
    __table_args__ = (UniqueConstraint("scope", "key"),)

    id: int | None = Field(default=None, primary_key=True)
    scope: str = Field(sa_type=String(16))  # "account" or "address"
    key: str = Field(sa_type=String(320))
    failures: int = 0
    last_failure_at: datetime | None = None
    locked_until: datetime | None = None


class LoginSession(SQLModel, table=True):
    """A browser's login, found again from its cookie after a reload: the cookie holds a random
    token and only its SHA-256 is stored. Ends at `expires_at`, on logout (`ended_at`), and
    whenever its user's `session_epoch` moves past `epoch` (deactivation, role change, password
    reset)."""

    __tablename__ = "login_sessions"

    id: int | None = Field(default=None, primary_key=True)
    token_sha256: str = Field(sa_type=String(64), unique=True, index=True)
    user_id: int = Field(foreign_key="users.id", index=True)
    epoch: int
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    ended_at: datetime | None = None


class UserPublic(SQLModel):
    id: int
    username: str
    display_name: str
    email: str | None = None
    role: Role
    expertise: list[str]
    active: bool
    created_at: datetime
