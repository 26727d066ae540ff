"""Login state and role checks for pages (the services check roles again)."""

import streamlit as st
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import authenticate
from itsmreview.db import session_scope
from itsmreview.errors import PermissionDenied

USER_KEY = "itsmreview_user"


def current_user() -> User | None:
    data = st.session_state.get(USER_KEY)
    return User(**data) if data else None


def log_in(username: str, password: str) -> User:
    with session_scope() as session:
        user = authenticate(session=session, username=username, password=password)
        st.session_state[USER_KEY] = {
            "id": user.id,
            "username": user.username,
            "display_name": user.display_name,
            "role": Role(user.role),
            "expertise": list(user.expertise),
            "active": user.active,
            "password_hash": "",
        }
    return user


def log_out() -> None:
    st.session_state.pop(USER_KEY, None)


def require(*roles: Role) -> User:
    """The logged-in user if it has one of `roles` (admins pass); otherwise stop the page."""
    user = current_user()
    if user is None:
        st.error("Log in first.")
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
