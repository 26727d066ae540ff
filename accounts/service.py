"""Creating users, checking passwords and roles."""

import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsmreview.accounts import acting, queries
from itsmreview.accounts.models import Role, User
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from sqlmodel import Session

# Argon2id with OWASP's first recommended setting (19 MiB, 2 passes, 1 lane): 34 ms a check on
# the 2-core machine where the library's default (64 MiB, 3 passes, 4 lanes) took 185 ms of a
# login; hashes made with other parameters still verify and are rehashed at the next login
_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
# verified against when the username is unknown, so that a failure costs the same either way
_DUMMY_HASH = _hasher.hash(secrets.token_urlsafe(16))
FAILED_LOGIN = "unknown username or wrong password"
USERNAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{1,63}$")
MIN_PASSWORD_LENGTH = 8


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def generate_password() -> str:
    return secrets.token_urlsafe(12)


MODEL_NEVER_LOGS_IN = (
    "{name} is a model rater: it rates through model reviews only and never logs in, so it "
    "has no password and cannot be activated (`itsmreview users list` shows the people)"
)


def refuse_model(user: User) -> None:
    """Raise InvalidInput when `user` is a model rater (no login, password or activation)."""
    if Role(user.role) == Role.model:
        raise InvalidInput(MODEL_NEVER_LOGS_IN.format(name=repr(user.username)))


def person_role(role: Role | str) -> Role:
    """The role a person can hold (model raters are made by model reviews, never by hand).
    Raises InvalidInput naming the roles."""
    people = [r.value for r in Role if r != Role.model]
    if role not in people:
        raise InvalidInput(f"role {role!r} is not one of {', '.join(people)}")
    return Role(role)


def create_user(
    *,
    session: Session,
    username: str,
    role: Role | str,
    password: str | None = None,
    display_name: str | None = None,
    expertise: Iterable[str] = (),
    email: str | None = None,
) -> tuple[User, str | None]:
    """Create a user; returns (user, generated password or None when one was given).

    Raises InvalidInput for a malformed name, unknown role or short password,
    Conflict when the username is taken.
    """
    if not USERNAME_PATTERN.match(username):
        raise InvalidInput(
            f"username {username!r} is not valid: use 2-64 lowercase letters, digits, '.', '_' "
            "or '-', starting with a letter or digit"
        )
    role = person_role(role)
    generated = None
    if password is None:
        password = generated = generate_password()
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(f"password is too short: use at least {MIN_PASSWORD_LENGTH} characters")
    if queries.user_by_username(session=session, username=username):
        raise Conflict(f"user {username!r} exists already; pick another name")
    if email and queries.user_by_email(session=session, email=normalise_email(email)):
        raise Conflict(f"another user has the e-mail address {email!r}")
    user = User(
        username=username,
        display_name=display_name or username,
        role=role,
        password_hash=hash_password(password),
        expertise=list(expertise),
        email=normalise_email(email) if email else None,
    )
    session.add(user)
    session.flush()
    return user, generated


class LoginThrottled(PermissionDenied):
    """Too many recent failures for this account name or address; `wait_s` says how long."""

    def __init__(self, message: str, wait_s: float):
        super().__init__(message)
        self.wait_s = wait_s


# an address may be shared (an office behind one proxy): it gets more free failures than an
# account, so that one person's typos cannot lock out the whole office
ADDRESS_FACTOR = 4


def _throttle_keys(username: str, address: str | None) -> list[tuple[str, str]]:
    keys = [("account", username[:320])]
    if address:
        keys.append(("address", address[:320]))
    return keys


def _delay(failures: int, free: int, cap: int) -> float:
    """Seconds to wait after `failures` consecutive failures: none for the first `free`, then
    doubling from 2 s, capped."""
    return 0.0 if failures < free else float(min(cap, 2 ** (failures - free + 1)))


def authenticate(
    *, session: Session, username: str, password: str, address: str | None = None
) -> User:
    """The active user with this name and password. Raises PermissionDenied otherwise, and
    LoginThrottled while the account name or the address must wait after repeated failures
    (unknown names are throttled alike, so throttling tells nothing about which names exist).
    A failure commits the session at once (with whatever else it holds), so that no rollback
    by the caller erases it; an unknown name costs the same password check as a known one."""
    from itsmreview.settings import get_settings

    settings = get_settings()
    name = username.strip().lower().replace("\x00", "")
    now = utcnow()
    keys = _throttle_keys(name, address)
    records = {(r.scope, r.key): r for r in queries.login_failures(session=session, keys=keys)}
    waiting = [r for r in records.values() if r.locked_until and r.locked_until > now]
    if waiting:
        wait = max((r.locked_until - now).total_seconds() for r in waiting)
        raise LoginThrottled(
            f"too many failed logins; wait {wait:.0f} s before trying again", wait_s=wait
        )
    user = queries.user_by_username(session=session, username=name)
    if user is not None and Role(user.role) == Role.model:
        # whatever its row says (a hand-set password, active): a model never logs in
        raise PermissionDenied(MODEL_NEVER_LOGS_IN.format(name=repr(user.username)))
    valid = verify_password(user.password_hash if user else _DUMMY_HASH, password)
    if user is not None and user.active and valid:
        if _hasher.check_needs_rehash(user.password_hash):
            user.password_hash = hash_password(password)
            session.add(user)
        if ("account", name) in records:
            session.delete(records[("account", name)])
            session.flush()
        return user
    for key in keys:
        free = settings.login_free_failures * (ADDRESS_FACTOR if key[0] == "address" else 1)
        failures = queries.count_failure(session=session, scope=key[0], key=key[1], now=now)
        delay = _delay(failures, free, settings.login_max_delay_s)
        until = now + timedelta(seconds=delay) if delay else None
        queries.lock_until(session=session, scope=key[0], key=key[1], until=until)
    session.commit()
    raise PermissionDenied(FAILED_LOGIN)


@dataclass(frozen=True)
class SessionCheck:
    """What a browser session remembered of its user when it logged in."""

    user_id: int
    epoch: int


def revalidate(*, session: Session, check: SessionCheck) -> User:
    """The user behind an open browser session, as the database has them now (role, name).
    Raises PermissionDenied when the user is gone, deactivated, or their sessions were ended
    (deactivation, role change, password reset) since the session began."""
    user = queries.user_by_id(session=session, user_id=check.user_id)
    if user is None or not user.active or Role(user.role) == Role.model:
        raise PermissionDenied("your account is no longer active; ask an admin")
    if user.session_epoch != check.epoch:
        raise PermissionDenied("your session has ended (your account was changed); log in again")
    return user


def _token_sha256(token: str) -> str:
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()


def open_session(*, session: Session, user: User) -> str:
    """A new login of `user` that lasts `session_hours`; returns its token (for the browser's
    cookie; only its hash is stored). Logins that ended or expired a day ago are forgotten."""
    from itsmreview.accounts.models import LoginSession
    from itsmreview.settings import get_settings

    now = utcnow()
    queries.forget_old_sessions(session=session, before=now - timedelta(days=1))
    token = secrets.token_urlsafe(32)
    session.add(
        LoginSession(
            token_sha256=_token_sha256(token),
            user_id=user.id,
            epoch=user.session_epoch,
            created_at=now,
            expires_at=now + timedelta(hours=get_settings().session_hours),
        )
    )
    session.flush()
    return token


def resume_session(*, session: Session, token: str) -> User:
    """The user of an open login. Raises PermissionDenied when the token is unknown, expired
    or ended, or the user was deactivated or changed since."""
    login = queries.login_session(session=session, token_sha256=_token_sha256(token[:256]))
    if login is None:
        raise PermissionDenied("your session has ended; log in again")
    user = revalidate(session=session, check=SessionCheck(login.user_id, login.epoch))
    if login.ended_at is not None or login.expires_at <= utcnow():
        raise PermissionDenied("your session has ended; log in again")
    return user


def end_session(*, session: Session, token: str) -> None:
    """Log out: the login of `token` ends for every tab that shares it."""
    login = queries.login_session(session=session, token_sha256=_token_sha256(token[:256]))
    if login is not None and login.ended_at is None:
        login.ended_at = utcnow()
        session.add(login)
        session.flush()


def require_role(user: User | None, *roles: Role) -> User:
    """`user` if it has one of `roles` (admins pass every check). Raises PermissionDenied.
    The user is checked again when the transaction that acts for them commits a write
    (`acting`): still active, same role, same session epoch, or nothing is written."""
    if user is None:
        raise PermissionDenied("log in first")
    if user.role == Role.model:
        raise PermissionDenied(
            f"{user.username} is a model rater; it acts only through model reviews"
        )
    if user.role == Role.admin or user.role in roles:
        acting.note(user)
        return user
    allowed = " or ".join(r.value for r in roles)
    raise PermissionDenied(f"this needs the {allowed} role; {user.username} is {user.role}")


def add_user(
    *,
    session: Session,
    actor: User,
    username: str,
    role: Role | str,
    password: str | None = None,
    display_name: str | None = None,
    expertise: Iterable[str] = (),
) -> tuple[User, str | None]:
    """`create_user` on behalf of an admin. Raises PermissionDenied for anyone else."""
    require_role(actor, Role.admin)
    return create_user(
        session=session,
        username=username,
        role=role,
        password=password,
        display_name=display_name,
        expertise=expertise,
    )


def _managed_user(session: Session, actor: User, username: str) -> User:
    require_role(actor, Role.admin)
    user = queries.user_by_username(session=session, username=username.strip().lower())
    if user is None:
        raise NotFound(f"no user {username!r}; `itsmreview users list` shows them")
    return user


def _record(session: Session, actor: User, user: User, action: str, payload: dict) -> None:
    from itsmreview.ledger.service import append_entry

    user.session_epoch += 1  # every open session of the user ends
    acting.epoch_moved(session, user.id)  # an admin's change of themself still commits
    session.add(user)
    queries.end_login_sessions(session=session, user_id=user.id, now=utcnow())
    session.flush()
    append_entry(
        session=session,
        artifact_type="user",
        artifact_id=user.username,
        action=action,
        source_kind="system",
        actor_id=actor.id,
        payload=payload,
    )


def set_active(*, session: Session, actor: User, username: str, active: bool) -> User:
    """Deactivate (no login, open sessions end) or reactivate a user. Admins only; an admin
    cannot deactivate themself. Recorded in the ledger."""
    user = _managed_user(session, actor, username)
    refuse_model(user)
    if not active and user.id == actor.id:
        raise Conflict("you cannot deactivate yourself; ask another admin")
    if user.active == active:
        return user
    user.active = active
    _record(session, actor, user, "activate" if active else "deactivate", {"active": active})
    return user


def set_role(*, session: Session, actor: User, username: str, role: Role | str) -> User:
    """Change a user's role (their open sessions end). Admins only; the last active admin
    keeps the role. Recorded in the ledger."""
    user = _managed_user(session, actor, username)
    role = person_role(role)
    if Role(user.role) == Role.model:
        raise InvalidInput(f"{user.username} is a model rater; its role cannot change")
    if Role(user.role) == role:
        return user
    if Role(user.role) == Role.admin:
        admins = [u for u in queries.list_users(session=session, role=Role.admin) if u.active]
        if len(admins) <= 1:
            raise Conflict(f"{user.username} is the last active admin; make another admin first")
    before = Role(user.role)
    user.role = role
    _record(session, actor, user, "set-role", {"from": before.value, "to": role.value})
    return user


def set_profile(
    *,
    session: Session,
    actor: User,
    username: str,
    display_name: str | None = None,
    expertise: Iterable[str] | None = None,
) -> User:
    """Change a user's display name and/or expertise (the personas their claims favour);
    None leaves one as it is. Admins only; open sessions go on. Recorded in the ledger."""
    from itsmreview.ledger.service import append_entry

    user = _managed_user(session, actor, username)
    refuse_model(user)
    changes: dict = {}
    if display_name is not None:
        name = display_name.strip()
        if not name or len(name) > 128:
            raise InvalidInput("a display name is 1-128 characters")
        if name != user.display_name:
            changes["display_name"] = {"from": user.display_name, "to": name}
            user.display_name = name
    if expertise is not None:
        personas = list(dict.fromkeys(e.strip() for e in expertise if e.strip()))
        if personas != list(user.expertise or []):
            changes["expertise"] = {"from": list(user.expertise or []), "to": personas}
            user.expertise = personas
    if changes:
        session.add(user)
        session.flush()
        append_entry(
            session=session,
            artifact_type="user",
            artifact_id=user.username,
            action="set-profile",
            source_kind="system",
            actor_id=actor.id,
            payload=changes,
        )
    return user


def reset_password(
    *, session: Session, actor: User, username: str, password: str | None = None
) -> tuple[User, str | None]:
    """Give a user a new password (generated unless given; returned once) and end their open
    sessions and login throttling. Admins only. Recorded in the ledger (never the password)."""
    user = _managed_user(session, actor, username)
    refuse_model(user)
    generated = None
    if password is None:
        password = generated = generate_password()
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(f"password is too short: use at least {MIN_PASSWORD_LENGTH} characters")
    user.password_hash = hash_password(password)
    for record in queries.login_failures(session=session, keys=[("account", user.username)]):
        session.delete(record)
    _record(session, actor, user, "reset-password", {})
    return user, generated


def users_overview(*, session: Session, actor: User) -> list[User]:
    """All users, by role then name. Admins only."""
    require_role(actor, Role.admin)
    return queries.list_users(session=session)


def normalise_email(email: str) -> str:
    email = email.strip().lower()
    if "@" not in email or email.startswith("@") or email.endswith("@"):
        raise InvalidInput(f"{email!r} is not an e-mail address")
    return email


def user_for_identity(*, session: Session, email: str | None) -> User:
    """The active local user whose e-mail matches a single-sign-on identity. Roles stay local:
    an identity without an account gets nothing. Raises PermissionDenied."""
    if not email:
        raise PermissionDenied("the identity provider sent no e-mail address")
    user = queries.user_by_email(session=session, email=email.strip().lower())
    if user is None or not user.active or Role(user.role) == Role.model:
        raise PermissionDenied(
            f"no itsmreview account for {email}; ask an admin to add you "
            "(itsmreview users add NAME --role ... --email ...)"
        )
    return user


def find_user(*, session: Session, username: str) -> User:
    """The user named `username`. Raises NotFound."""
    user = queries.user_by_username(session=session, username=username)
    if user is None:
        raise NotFound(f"no user {username!r}")
    return user
