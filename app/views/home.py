"""Page: the start page, the platform's counts and where to go next for each role."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.overview.service import platform_counts
from itsmreview.ui.auth import require

# where each count is worked on: (a lead's page, an expert's page), each with its title
TILE_PAGES = {
    "Event logs": (("coverage", "Coverage"), ("variants", "Variant explorer")),
    "Tasks": (("tasks", "Tasks"), ("queue", "My queue")),
    "Review rounds": (("rounds", "Rounds"), ("queue", "My queue")),
    "Ratings": (("dashboard", "Dashboard"), ("queue", "My queue")),
}

user = require(Role.expert, Role.lead)
st.title("itsmreview")
st.markdown(
    """
Benchmark tasks for ITSM agents are only as good as their realism. Here, practitioners judge
each task, with the transcripts of its simulated users and colleagues, **next to the real
process-log variant it was derived from**. Agreement statistics say how far the ratings can be
trusted; coverage says how much of the real work the approved tasks span; the provenance ledger
says where every artifact came from.
"""
)
with session_scope() as session:
    counts = platform_counts(session=session)
columns = st.columns(4)
for column, (label, value) in zip(columns, counts.items(), strict=False):
    column.metric(label, f"{value:,}")
    page, title = TILE_PAGES[label][user.role == Role.expert]
    column.page_link(f"views/{page}.py", label=title, icon=":material/arrow_forward:")
st.subheader("Where to start")
if user.role == Role.expert:
    st.markdown(
        "Open **My queue** and rate the tasks assigned to you. Drafts are yours alone; "
        "you never see other experts' ratings of a task before submitting your own."
    )
else:
    st.markdown(
        "- **Dashboard**: review progress per expert and round.\n"
        "- **Coverage**: which log variants and roles the tasks cover.\n"
        "- **Ledger**: where each artifact came from (logs, external practice, experts).\n"
        "- **Exports**: approved task sets for others to reproduce."
    )
