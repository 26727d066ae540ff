"""Entry point: role-aware navigation only."""

from pathlib import Path

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.errors import PermissionDenied
from itsmreview.ui.auth import adopt_sso_identity, current_user, keep_session_cookie, log_out
from itsmreview.ui.notice import show_announcements
from itsmreview.ui.text import literal

PAGES = Path(__file__).parent / "pages"


PAGE_TITLES = {
    "home": ("Home", ":material/home:"),
    "queue": ("My queue", ":material/rate_review:"),
    "variants": ("Variant explorer", ":material/timeline:"),
    "completeness": ("Persona completeness", ":material/checklist:"),
    "dashboard": ("Dashboard", ":material/monitoring:"),
    "coverage": ("Coverage", ":material/account_tree:"),
    "tasks": ("Tasks", ":material/assignment:"),
    "ledger": ("Ledger", ":material/link:"),
    "exports": ("Exports", ":material/inventory_2:"),
    "users": ("Users", ":material/group:"),
    "imports": ("Imports", ":material/upload_file:"),
}


def page(name: str, default_for: Role | None = None, *, hidden: bool = False) -> st.Page:
    title, icon = PAGE_TITLES[name]
    return st.Page(
        PAGES / f"{name}.py",
        title=title,
        icon=icon,
        default=default_for is not None and user is not None and user.role == default_for,
        visibility="hidden" if hidden else "visible",
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
    default=user is None,
    visibility="visible" if user is None else "hidden",
)
if user is None:
    # every page answers its address and asks for a login first (a link survives the
    # login); the login page opens a start page in one run
    navigation = st.navigation(
        [login, *(page(name, hidden=True) for name in PAGE_TITLES)], position="hidden"
    )
else:
    # the login page stays reachable (hidden): it forwards to the role's start page
    sections = {"": [page("home"), login]}
    if user.role == Role.expert:
        sections["Review"] = [
            page("queue", Role.expert),
            page("variants"),
            page("completeness"),
        ]
    if user.role in (Role.lead, Role.admin):
        sections["Lead"] = [
            page("dashboard", Role.lead),
            page("coverage"),
            page("variants"),
            page("tasks"),
            page("completeness"),
            page("ledger"),
            page("exports"),
        ]
    if user.role == Role.admin:
        sections["Admin"] = [page("users", Role.admin), page("imports")]
    navigation = st.navigation(sections)
    with st.sidebar:
        st.caption(f"Logged in as **{user.display_name}** ({user.role})")
        if st.button("Log out", key="logout"):
            log_out()
            st.rerun()
keep_session_cookie()
show_announcements()
navigation.run()
