"""Logins that survive a reload: a random token whose hash is stored, ended by logout, expiry,
deactivation, role change and password reset (both backends)."""

import hashlib
from datetime import timedelta

import pytest
from itsmreview.accounts.models import LoginSession
from itsmreview.accounts.service import (
    create_user,
    end_session,
    open_session,
    reset_password,
    resume_session,
    set_active,
    set_role,
)
from itsmreview.db import utcnow
from itsmreview.errors import PermissionDenied
from sqlmodel import select

PASSWORD = "the-right-password"


@pytest.fixture
def people(session):
    admin, _ = create_user(session=session, username="admin", role="admin", password=PASSWORD)
    eva, _ = create_user(session=session, username="eva", role="expert", password=PASSWORD)
    session.commit()
    return admin, eva


def test_a_token_finds_its_user_and_only_its_hash_is_stored(session, people):
    _, eva = people
    token = open_session(session=session, user=eva)
    session.commit()
    assert len(token) >= 43  # 32 random bytes
    [stored] = session.exec(select(LoginSession)).all()
    assert stored.token_sha256 == hashlib.sha256(token.encode()).hexdigest()
    assert token not in stored.token_sha256
    assert resume_session(session=session, token=token).username == "eva"
    with pytest.raises(PermissionDenied, match="log in again"):
        resume_session(session=session, token=token[:-1] + ("A" if token[-1] != "A" else "B"))


def test_logout_ends_the_login_for_every_tab(session, people):
    _, eva = people
    token = open_session(session=session, user=eva)
    other = open_session(session=session, user=eva)  # another browser
    end_session(session=session, token=token)
    session.commit()
    with pytest.raises(PermissionDenied):
        resume_session(session=session, token=token)
    assert resume_session(session=session, token=other).username == "eva"


def test_a_login_expires(session, people, monkeypatch):
    from itsmreview.settings import get_settings

    _, eva = people
    monkeypatch.setattr(get_settings(), "session_hours", 1.0)
    token = open_session(session=session, user=eva)
    login = session.exec(select(LoginSession)).one()
    assert login.expires_at - login.created_at == timedelta(hours=1)
    login.expires_at = utcnow() - timedelta(seconds=1)
    session.add(login)
    session.commit()
    with pytest.raises(PermissionDenied):
        resume_session(session=session, token=token)


@pytest.mark.parametrize(
    "change",
    [
        lambda s, admin: set_active(session=s, actor=admin, username="eva", active=False),
        lambda s, admin: set_role(session=s, actor=admin, username="eva", role="lead"),
        lambda s, admin: reset_password(session=s, actor=admin, username="eva"),
    ],
    ids=["deactivated", "role changed", "password reset"],
)
def test_an_account_change_ends_its_logins_server_side(session, people, change):
    admin, eva = people
    token = open_session(session=session, user=eva)
    session.commit()
    change(session, admin)
    session.commit()
    with pytest.raises(PermissionDenied):
        resume_session(session=session, token=token)
    ended = session.exec(select(LoginSession).where(LoginSession.user_id == eva.id)).one()
    assert ended.ended_at is not None


def test_old_logins_are_forgotten_when_a_new_one_opens(session, people):
    _, eva = people
    token = open_session(session=session, user=eva)
    login = session.exec(select(LoginSession)).one()
    login.expires_at = utcnow() - timedelta(days=2)
    session.add(login)
    session.commit()
    open_session(session=session, user=eva)
    session.commit()
    assert len(session.exec(select(LoginSession)).all()) == 1
    with pytest.raises(PermissionDenied):
        resume_session(session=session, token=token)
