"""Every select of accounts: users by name, id or e-mail, login sessions, failed logins."""

from functools import lru_cache

from itsmreview.accounts.models import LoginFailure, LoginSession, Role, User
from sqlalchemy import bindparam
from sqlmodel import Session, select


def user_by_username(*, session: Session, username: str) -> User | None:
    return session.exec(select(User).where(User.username == username)).first()


def list_users(*, session: Session, role: Role | None = None) -> list[User]:
    query = select(User).order_by(User.role, User.username)
    if role is not None:
        query = query.where(User.role == role)
    return list(session.exec(query).all())


def user_by_email(*, session: Session, email: str) -> User | None:
    return session.exec(select(User).where(User.email == email)).first()


def login_failures(*, session: Session, keys: list[tuple[str, str]]) -> list[LoginFailure]:
    """The failure records of the given (scope, key) pairs that exist."""
    if not keys:
        return []
    rows = session.exec(
        select(LoginFailure)
        .where(LoginFailure.scope.in_({scope for scope, _ in keys}))
        .where(LoginFailure.key.in_({key for _, key in keys}))
    ).all()
    return [row for row in rows if (row.scope, row.key) in set(keys)]


def user_by_id(*, session: Session, user_id: int) -> User | None:
    return session.get(User, user_id)


def count_failure(*, session: Session, scope: str, key: str, now) -> int:
    """Add one failure to (scope, key), atomically (no lost update when failures race), and
    return the new count. A first failure inserts the row inside a savepoint; if a concurrent
    first failure inserted it meanwhile, only the savepoint is undone and the row is updated."""
    from sqlalchemy import update
    from sqlalchemy.exc import IntegrityError

    increment = (
        update(LoginFailure)
        .where(LoginFailure.scope == scope, LoginFailure.key == key)
        .values(failures=LoginFailure.failures + 1, last_failure_at=now)
        .returning(LoginFailure.failures)
    )
    updated = session.exec(increment).first()
    if updated is not None:
        return int(updated[0])
    try:
        with session.begin_nested():
            session.add(LoginFailure(scope=scope, key=key, failures=1, last_failure_at=now))
        return 1
    except IntegrityError:
        return int(session.exec(increment).first()[0])


def lock_until(*, session: Session, scope: str, key: str, until) -> None:
    from sqlalchemy import update

    session.exec(
        update(LoginFailure)
        .where(LoginFailure.scope == scope, LoginFailure.key == key)
        .values(locked_until=until)
    )


def login_session(*, session: Session, token_sha256: str) -> LoginSession | None:
    return session.exec(
        select(LoginSession).where(LoginSession.token_sha256 == token_sha256)
    ).first()


def end_login_sessions(*, session: Session, user_id: int, now) -> None:
    """End every open login of one user."""
    from sqlalchemy import update

    session.exec(
        update(LoginSession)
        .where(LoginSession.user_id == user_id, LoginSession.ended_at.is_(None))
        .values(ended_at=now)
    )


def forget_old_sessions(*, session: Session, before) -> None:
    """Delete logins that expired or ended before `before`."""
    from sqlalchemy import delete, or_

    session.exec(
        delete(LoginSession).where(
            or_(LoginSession.expires_at < before, LoginSession.ended_at < before)
        )
    )


def acting_rows(*, session: Session, user_ids: list[int]) -> dict[int, object]:
    """user id -> (username, active, role, session_epoch) as stored now, read in the caller's
    transaction: on PostgreSQL the rows stay share-locked until it ends, so a concurrent
    deactivation, role change or password reset waits for it, or it sees theirs."""
    query = _acting_rows(session.get_bind().dialect.name == "postgresql")
    return {row.id: row for row in session.exec(query, params={"ids": list(user_ids)}).all()}


@lru_cache(maxsize=2)
def _acting_rows(share_lock: bool):
    """`acting_rows`' statement, built once: it runs before every commit that writes."""
    query = select(User.id, User.username, User.active, User.role, User.session_epoch).where(
        User.id.in_(bindparam("ids", expanding=True))
    )
    return query.with_for_update(read=True) if share_lock else query
