"""Creating users, checking passwords and roles."""

import re
import secrets
from collections.abc import Iterable

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from itsmreview.accounts import queries
from itsmreview.accounts.models import Role, User
from itsmreview.errors import Conflict, InvalidInput, PermissionDenied
from sqlmodel import Session

_hasher = PasswordHasher()
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
    try:
        role = Role(role)
    except ValueError:
        raise InvalidInput(
            f"role {role!r} is not one of {', '.join(r.value for r in Role)}"
        ) from None
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


def authenticate(*, session: Session, username: str, password: str) -> User:
    """The active user with this name and password. Raises PermissionDenied otherwise."""
    user = queries.user_by_username(session=session, username=username.strip().lower())
    if user is None or not user.active or not verify_password(user.password_hash, password):
        raise PermissionDenied("unknown username or wrong password")
    return user


def require_role(user: User | None, *roles: Role) -> User:
    """`user` if it has one of `roles` (admins pass every check). Raises PermissionDenied."""
    if user is None:
        raise PermissionDenied("log in first")
    if user.role == Role.admin or user.role in roles:
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
    if user is None or not user.active:
        raise PermissionDenied(
            f"no itsmreview account for {email}; ask an admin to add you "
            "(itsmreview users add NAME --role ... --email ...)"
        )
    return user
