"""Entry point: role-aware navigation only."""

from pathlib import Path

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.errors import PermissionDenied
from itsmreview.ui.auth import adopt_sso_identity, current_user, keep_session_cookie, log_out
from itsmreview.ui.notice import show_announcements
from itsmreview.ui.text import literal

PAGES = Path(__file__).parent / "pages"


def page(name: str, title: str, icon: str, default_for: Role | None = None) -> st.Page:
    return st.Page(
        PAGES / f"{name}.py",
        title=title,
        icon=icon,
        default=default_for is not None and user.role == default_for,
    )


st.set_page_config(page_title="itsmreview", page_icon=":material/fact_check:", layout="wide")
try:
    adopt_sso_identity()
except PermissionDenied as exc:
    st.error(literal(str(exc)))
user = current_user()
login = st.Page(
    PAGES / "login.py",
    title="Log in",
    icon=":material/login:",
    visibility="visible" if user is None else "hidden",
)
if user is None:
    navigation = st.navigation([login])
else:
    # the login page stays reachable (hidden) so a rerun right after logging in lands on it
    # and forwards to the role's start page
    sections = {"": [page("home", "Home", ":material/home:"), login]}
    if user.role == Role.expert:
        sections["Review"] = [
            page("queue", "My queue", ":material/rate_review:", Role.expert),
            page("variants", "Variant explorer", ":material/timeline:"),
            page("completeness", "Persona completeness", ":material/checklist:"),
        ]
    if user.role in (Role.lead, Role.admin):
        sections["Lead"] = [
            page("dashboard", "Dashboard", ":material/monitoring:", Role.lead),
            page("coverage", "Coverage", ":material/account_tree:"),
            page("variants", "Variant explorer", ":material/timeline:"),
            page("tasks", "Tasks", ":material/assignment:"),
            page("completeness", "Persona completeness", ":material/checklist:"),
            page("ledger", "Ledger", ":material/link:"),
            page("exports", "Exports", ":material/inventory_2:"),
        ]
    if user.role == Role.admin:
        sections["Admin"] = [
            page("users", "Users", ":material/group:", Role.admin),
            page("imports", "Imports", ":material/upload_file:"),
        ]
    navigation = st.navigation(sections)
    with st.sidebar:
        st.caption(f"Logged in as **{user.display_name}** ({user.role})")
        if st.button("Log out", key="logout"):
            log_out()
            st.rerun()
keep_session_cookie()
show_announcements()
navigation.run()
