"""Entry point: role-aware navigation only."""

from pathlib import Path

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.ui.auth import current_user, log_out

PAGES = Path(__file__).parent / "pages"


def page(name: str, title: str, icon: str, default_for: Role | None = None) -> st.Page:
    return st.Page(
        PAGES / f"{name}.py",
        title=title,
        icon=icon,
        default=default_for is not None and user.role == default_for,
    )


st.set_page_config(page_title="itsmreview", page_icon="🧭", layout="wide")
user = current_user()
login = st.Page(PAGES / "login.py", title="Log in", icon="🔑",
                visibility="visible" if user is None else "hidden")
if user is None:
    navigation = st.navigation([login])
else:
    # the login page stays reachable (hidden) so a rerun right after logging in lands on it
    # and forwards to the role's start page
    sections = {"": [page("home", "Home", "🏠"), login]}
    if user.role == Role.expert:
        sections["Review"] = [page("queue", "My queue", "📝", Role.expert)]
    if user.role in (Role.lead, Role.admin):
        sections["Lead"] = [
            page("dashboard", "Dashboard", "📊", Role.lead),
            page("coverage", "Coverage", "🗺️"),
            page("ledger", "Ledger", "🔗"),
            page("exports", "Exports", "📦"),
        ]
    if user.role == Role.admin:
        sections["Admin"] = [
            page("users", "Users", "👥", Role.admin),
            page("imports", "Imports", "📥"),
        ]
    navigation = st.navigation(sections)
    with st.sidebar:
        st.caption(f"Logged in as **{user.display_name}** ({user.role})")
        if st.button("Log out", key="logout"):
            log_out()
            st.rerun()
navigation.run()
