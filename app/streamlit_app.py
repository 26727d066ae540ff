"""Entry point: role-aware navigation only."""

from pathlib import Path

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.errors import PermissionDenied
from itsmreview.review.gate.work import start_worker_if_background
from itsmreview.storage import warm_up_in_background
from itsmreview.ui.auth import adopt_sso_identity, current_user, keep_session_cookie, log_out
from itsmreview.ui.notice import show_announcements
from itsmreview.ui.text import literal

# not `pages/`: beside the entry point, Streamlit runs such a folder as an old-style multipage
# app (the entry point skipped, every file listed) until a request opens the root
PAGES = Path(__file__).parent / "views"


PAGE_TITLES = {
    "home": ("Home", ":material/home:"),
    "queue": ("My queue", ":material/rate_review:"),
    "variants": ("Variant explorer", ":material/timeline:"),
    "completeness": ("Persona completeness", ":material/checklist:"),
    "dashboard": ("Dashboard", ":material/monitoring:"),
    "rounds": ("Rounds", ":material/event_note:"),
    "coverage": ("Coverage", ":material/account_tree:"),
    "realism": ("Simulator realism", ":material/psychology:"),
    "blind_test": ("Blind test", ":material/visibility_off:"),
    "turn_labels": ("Turn labels", ":material/label:"),
    "consensus": ("Consensus", ":material/forum:"),
    "teams": ("Team mapping", ":material/groups:"),
    "tasks": ("Tasks", ":material/assignment:"),
    "ledger": ("Ledger", ":material/link:"),
    "exports": ("Exports", ":material/inventory_2:"),
    "model_review": ("Model review", ":material/smart_toy:"),
    "users": ("Users", ":material/group:"),
    "imports": ("Imports", ":material/upload_file:"),
}


def page(name: str, *, hidden: bool = False) -> st.Page:
    """Every page keeps its own address (`/dashboard`): the default page, whose address is
    the root, is the login page, which forwards a logged-in user to their start page."""
    title, icon = PAGE_TITLES[name]
    return st.Page(
        PAGES / f"{name}.py",
        title=title,
        icon=icon,
        visibility="hidden" if hidden else "visible",
    )


st.set_page_config(page_title="itsmreview", page_icon=":material/fact_check:", layout="wide")
start_worker_if_background()  # a server applies submits to the gate itself (once started)
warm_up_in_background()  # an S3 storage's client, opened before the first page needs it
try:
    adopt_sso_identity()
except PermissionDenied as exc:
    st.error(literal(str(exc)))
user = current_user()
login = st.Page(
    PAGES / "login.py",
    title="Log in",
    icon=":material/login:",
    default=True,
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
    listed = {"": ["home"]}
    if user.role == Role.expert:
        listed["Review"] = [
            "queue",
            "consensus",
            "variants",
            "completeness",
            "blind_test",
            "turn_labels",
        ]
    if user.role in (Role.lead, Role.admin):
        listed["Lead"] = [
            "dashboard",
            "rounds",
            "coverage",
            "teams",
            "variants",
            "tasks",
            "completeness",
            "ledger",
            "exports",
            "model_review",
            "realism",
            "turn_labels",
            "imports",
        ]
    if user.role == Role.admin:
        listed["Admin"] = ["users"]
    sections = {title: [page(name) for name in names] for title, names in listed.items()}
    # another role's pages answer their address too: each says which role it needs
    shown = {name for names in listed.values() for name in names}
    sections[""] += [login, *(page(n, hidden=True) for n in PAGE_TITLES if n not in shown)]
    navigation = st.navigation(sections)
    with st.sidebar:
        st.caption(f"Logged in as **{user.display_name}** ({user.role})")
        if st.button("Log out", key="logout"):
            log_out()
            st.rerun()
keep_session_cookie()
show_announcements()
navigation.run()
