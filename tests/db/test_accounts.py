"""Accounts under attack: throttling with backoff, no timing or lockout difference between
known and unknown names, sessions that end when the account changes, admin actions in the
ledger (both backends)."""

import statistics
import time
from datetime import timedelta

import pytest
from itsmreview.accounts.models import LoginFailure
from itsmreview.accounts.service import (
    LoginThrottled,
    SessionCheck,
    authenticate,
    create_user,
    reset_password,
    revalidate,
    set_active,
    set_role,
)
from itsmreview.cli import app
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, PermissionDenied
from itsmreview.ledger.models import LedgerEntry
from itsmreview.ledger.service import verify_chain
from sqlmodel import select
from typer.testing import CliRunner

PASSWORD = "the-right-password"


def _users(session):
    admin, _ = create_user(session=session, username="admin", role="admin", password=PASSWORD)
    eva, _ = create_user(session=session, username="eva", role="expert", password=PASSWORD)
    session.commit()
    return admin, eva


def _try(session, username, password, address=None):
    try:
        return authenticate(session=session, username=username, password=password, address=address)
    except PermissionDenied as exc:
        session.rollback()  # as a page's session_scope does: the failure was committed already
        return exc


def _expire_locks(session):
    for record in session.exec(select(LoginFailure)).all():
        record.locked_until = utcnow() - timedelta(seconds=1)
    session.commit()


def test_repeated_failures_lock_the_account_with_growing_waits(session, monkeypatch):
    _users(session)
    # the clock stands still: on a slow machine 200 tries can outlast the first 2 s wait
    frozen = utcnow()
    monkeypatch.setattr("itsmreview.accounts.service.utcnow", lambda: frozen)
    outcomes = [_try(session, "eva", f"wrong-{i}") for i in range(200)]
    assert all(isinstance(o, PermissionDenied) for o in outcomes)
    throttled = [o for o in outcomes if isinstance(o, LoginThrottled)]
    assert len(throttled) == 195  # the first 5 are free, every later one must wait
    # the right password right after 200 failures is refused too: the account must wait
    assert isinstance(_try(session, "eva", PASSWORD), LoginThrottled)
    monkeypatch.undo()
    _expire_locks(session)
    assert _try(session, "eva", PASSWORD).username == "eva"
    assert session.exec(select(LoginFailure).where(LoginFailure.key == "eva")).first() is None


def test_waits_double_and_are_capped(session, configured):
    _users(session)
    waits = []
    for i in range(12):
        _expire_locks(session)
        _try(session, "eva", f"wrong-{i}")
        record = session.exec(select(LoginFailure).where(LoginFailure.key == "eva")).one()
        waits.append(
            0 if record.locked_until is None else (record.locked_until - utcnow()).total_seconds()
        )
    rounded = [round(w) for w in waits]
    assert rounded[:4] == [0, 0, 0, 0]
    assert rounded[4:9] == [2, 4, 8, 16, 32]
    assert max(rounded) <= configured.login_max_delay_s


def test_unknown_names_are_throttled_alike_and_cost_the_same(session):
    _users(session)
    unknown = [_try(session, "nobody-here", f"x{i}") for i in range(6)]
    known = [_try(session, "eva", f"x{i}") for i in range(6)]
    assert [type(o) for o in unknown] == [type(o) for o in known]
    assert str(unknown[0]) == str(known[0])

    def cost(name):
        _expire_locks(session)
        start = time.perf_counter()
        _try(session, name, "wrong")
        return time.perf_counter() - start

    # interleaved, so that a burst of other load on the machine slows both alike
    pairs = [(cost("eva"), cost("nobody-here")) for _ in range(7)]
    known_s = statistics.median(k for k, _ in pairs)
    unknown_s = statistics.median(u for _, u in pairs)
    # both run one argon2 verification; without the dummy hash unknown names took ~0.1 ms
    assert unknown_s > 0.5 * known_s


def test_a_hash_of_older_parameters_is_replaced_at_the_next_login(session):
    from argon2 import PasswordHasher

    _, eva = _users(session)
    eva.password_hash = PasswordHasher(time_cost=3, memory_cost=65536, parallelism=4).hash(PASSWORD)
    session.commit()
    authenticate(session=session, username="eva", password=PASSWORD)
    session.commit()
    session.refresh(eva)
    assert eva.password_hash.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert authenticate(session=session, username="eva", password=PASSWORD).id == eva.id


def test_an_address_is_throttled_across_account_names(session):
    _users(session)
    outcomes = [_try(session, f"guess{i}", "wrong", address="203.0.113.9") for i in range(21)]
    assert not any(isinstance(o, LoginThrottled) for o in outcomes[:20])
    assert isinstance(_try(session, "eva", PASSWORD, address="203.0.113.9"), LoginThrottled)
    assert _try(session, "eva", PASSWORD, address="198.51.100.1").username == "eva"


def test_sessions_end_when_the_account_changes(session):
    admin, eva = _users(session)
    check = SessionCheck(eva.id, eva.session_epoch)
    assert revalidate(session=session, check=check).role == "expert"

    set_role(session=session, actor=admin, username="eva", role="lead")
    session.commit()
    with pytest.raises(PermissionDenied, match="session has ended"):
        revalidate(session=session, check=check)
    check = SessionCheck(eva.id, eva.session_epoch)
    assert revalidate(session=session, check=check).role == "lead"

    set_active(session=session, actor=admin, username="eva", active=False)
    session.commit()
    with pytest.raises(PermissionDenied, match="no longer active"):
        revalidate(session=session, check=check)
    assert isinstance(_try(session, "eva", PASSWORD), PermissionDenied)

    set_active(session=session, actor=admin, username="eva", active=True)
    _, generated = reset_password(session=session, actor=admin, username="eva")
    session.commit()
    with pytest.raises(PermissionDenied):
        revalidate(session=session, check=SessionCheck(eva.id, check.epoch))
    assert isinstance(_try(session, "eva", PASSWORD), PermissionDenied)
    assert _try(session, "eva", generated).username == "eva"

    actions = [
        e.action
        for e in session.exec(
            select(LedgerEntry).where(LedgerEntry.artifact_type == "user").order_by(LedgerEntry.seq)
        ).all()
    ]
    assert actions == ["set-role", "deactivate", "activate", "reset-password"]
    assert verify_chain(session=session).ok
    assert generated not in str([e.payload for e in session.exec(select(LedgerEntry)).all()])


def test_admins_cannot_lock_themselves_or_everyone_out(session):
    admin, eva = _users(session)
    with pytest.raises(Conflict, match="yourself"):
        set_active(session=session, actor=admin, username="admin", active=False)
    with pytest.raises(Conflict, match="last active admin"):
        set_role(session=session, actor=admin, username="admin", role="lead")
    with pytest.raises(PermissionDenied):
        set_role(session=session, actor=eva, username="eva", role="admin")


def test_users_commands(configured):
    runner = CliRunner()

    def run(*args, input=None):
        return runner.invoke(app, list(args), input=input)

    assert run("users", "add", "eva", "--role", "expert").exit_code == 0
    assert run("users", "deactivate", "eva").output.strip() == "eva: expert, deactivated"
    assert "(deactivated)" in run("users", "list").output
    assert run("users", "activate", "eva").output.strip() == "eva: expert, active"
    assert run("users", "set-role", "eva", "lead").output.strip() == "eva: lead, active"
    reset = run("users", "reset-password", "eva", "--password-stdin", input="new-password-1\n")
    assert reset.exit_code == 0 and "password:" not in reset.output
    unknown = run("users", "deactivate", "nobody")
    assert unknown.exit_code == 1 and "no user 'nobody'" in unknown.output
    bad_role = run("users", "set-role", "eva", "owner")
    assert bad_role.exit_code == 1 and "not one of" in bad_role.output
    profile = run("users", "set-profile", "eva", "--name", "Eva Ek", "--expertise", "L2 resolver")
    assert profile.output.strip() == "eva: Eva Ek; expertise: L2 resolver"
    cleared = run("users", "set-profile", "eva", "--expertise", "")
    assert cleared.output.strip() == "eva: Eva Ek; expertise: -"
    empty = run("users", "set-profile", "eva", "--name", " ")
    assert empty.exit_code == 1 and "1-128 characters" in empty.output


def test_a_profile_change_is_an_admins_keeps_sessions_and_is_in_the_ledger(session):
    """Display name and expertise: admins only, never a model rater's, open sessions go on
    (no epoch move), one ledger entry with what changed, none when nothing did."""
    from itsmreview.accounts.service import set_profile
    from itsmreview.errors import InvalidInput

    admin, _ = create_user(session=session, username="root", role="admin", password=PASSWORD)
    eva, _ = create_user(session=session, username="eva", role="expert", password=PASSWORD)
    epoch = eva.session_epoch
    with pytest.raises(PermissionDenied):
        set_profile(session=session, actor=eva, username="eva", display_name="Queen Eva")
    set_profile(
        session=session,
        actor=admin,
        username="eva",
        expertise=["Change manager", " ", "Change manager"],
    )
    set_profile(session=session, actor=admin, username="eva", expertise=["Change manager"])
    assert (eva.expertise, eva.session_epoch) == (["Change manager"], epoch)
    session.commit()
    entries = session.exec(
        select(LedgerEntry).where(
            LedgerEntry.artifact_id == "eva", LedgerEntry.action == "set-profile"
        )
    ).all()
    assert [e.payload for e in entries] == [{"expertise": {"from": [], "to": ["Change manager"]}}]
    model = create_user(session=session, username="bot", role="expert", password=PASSWORD)[0]
    model.role = "model"
    with pytest.raises(InvalidInput, match="model rater"):
        set_profile(session=session, actor=admin, username="bot", display_name="Bot")
    assert verify_chain(session=session).ok


def test_concurrent_failures_for_a_new_name_are_all_counted(engine, at_once):
    """Eight wrong passwords at once for a name never seen: each is a clean refusal (no
    unique-constraint error from two first failures), and every one is counted."""
    from sqlmodel import Session

    def attempt(i):
        with Session(engine, expire_on_commit=False) as session:
            try:
                authenticate(session=session, username="newcomer", password=f"x{i}")
            except PermissionDenied:
                return

    assert at_once(attempt, list(range(8))) == []
    with Session(engine) as session:
        record = session.exec(select(LoginFailure).where(LoginFailure.key == "newcomer")).one()
    assert record.failures == 8
