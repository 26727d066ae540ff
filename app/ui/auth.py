"""Login state and role checks for pages (the services check roles again)."""

import streamlit as st
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import SessionCheck, authenticate, revalidate, user_for_identity
from itsmreview.db import session_scope
from itsmreview.errors import PermissionDenied

USER_KEY = "itsmreview_user"
ENDED_KEY = "itsmreview_session_ended"


def current_user() -> User | None:
    """The logged-in user as the database has them now: a deactivated user, or one whose
    sessions were ended (role change, password reset), is logged out on the next rerun."""
    data = st.session_state.get(USER_KEY)
    if not data:
        return None
    try:
        with session_scope() as session:
            check = SessionCheck(data["id"], data.get("epoch", -1))
            user = revalidate(session=session, check=check)
            _remember(user)
    except PermissionDenied as exc:
        st.session_state.pop(USER_KEY, None)
        st.session_state[ENDED_KEY] = str(exc)
        return None
    return User(**{k: v for k, v in st.session_state[USER_KEY].items() if k != "epoch"})


def session_ended_message() -> str | None:
    """Why the session was ended, once (shown on the login page)."""
    return st.session_state.pop(ENDED_KEY, None)


def _remember(user: User) -> None:
    st.session_state[USER_KEY] = {
        "id": user.id,
        "username": user.username,
        "display_name": user.display_name,
        "role": Role(user.role),
        "expertise": list(user.expertise),
        "active": user.active,
        "password_hash": "",
        "epoch": user.session_epoch,
    }


def _client_address() -> str | None:
    """The address of the browser's connection (None where Streamlit does not know it)."""
    address = st.context.ip_address
    return address if isinstance(address, str) and address else None


def log_in(username: str, password: str) -> User:
    with session_scope() as session:
        user = authenticate(
            session=session, username=username, password=password, address=_client_address()
        )
        _remember(user)
    return user


def sso_configured() -> bool:
    """Single sign-on is on when Streamlit's secrets have an [auth] section (st.login)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


def adopt_sso_identity() -> None:
    """After st.login, map the identity's e-mail to a local account (roles stay local)."""
    if USER_KEY in st.session_state or not sso_configured():
        return
    if not st.user.get("is_logged_in"):
        return
    with session_scope() as session:
        _remember(user_for_identity(session=session, email=st.user.get("email")))


def log_out() -> None:
    st.session_state.pop(USER_KEY, None)
    if sso_configured() and st.user.get("is_logged_in"):
        st.logout()


def require(*roles: Role) -> User:
    """The logged-in user if it has one of `roles` (admins pass); otherwise stop the page."""
    user = current_user()
    if user is None:
        st.error(session_ended_message() or "Log in first.")
        st.stop()
    if user.role != Role.admin and user.role not in roles:
        st.error(PermissionDenied(f"This page needs the {' or '.join(roles)} role.").args[0])
        st.stop()
    return user


START_PAGES = {
    Role.expert: "pages/queue.py",
    Role.lead: "pages/dashboard.py",
    Role.admin: "pages/users.py",
}


def start_page(user: User) -> str:
    """The page a user lands on after logging in, relative to the entry script."""
    return START_PAGES[Role(user.role)]
