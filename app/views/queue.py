"""Page: the expert's queue, the task with its evidence beside the rubric, one task at a time."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope, write_transaction
from itsmreview.errors import ItsmReviewError
from itsmreview.review.ratings.expert_view import assignment_view, expert_queue, expert_rounds
from itsmreview.review.ratings.service import save_draft, submit_rating
from itsmreview.review.rounds.assignment import claim_next
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.evidence import RAW_HELP, RAW_LABEL, evidence_panel, task_header
from itsmreview.ui.keys import rubric_keys
from itsmreview.ui.notice import announce
from itsmreview.ui.rating import (
    DRAFT_LABEL,
    RUBRIC_CONTAINER,
    SUBMIT_LABEL,
    finding_form,
    findings_panel,
    proposal_form,
    rating_form,
)
from itsmreview.ui.text import literal

PANE_HEIGHT = 560  # px: both panes and the controls above them fit a 1440x900 screen

user = require(Role.expert)
st.title("My queue")
with session_scope() as session:
    rounds = expert_rounds(session=session, actor=user)
round_name = rounds[0] if rounds else None
# the round, the task and the next one on one line: the panes below start high on the screen
controls = st.columns([2, 6, 2] if len(rounds) > 1 else [8, 2], vertical_alignment="bottom")
if len(rounds) > 1:
    asked = st.query_params.get("round")
    if asked not in rounds:  # the round of the expert's open work, else the newest
        with session_scope() as session:
            mine = expert_queue(session=session, actor=user, rated_shown=0).rows
        asked = mine["round"].iloc[0] if len(mine) else rounds[0]
    round_name = controls[0].selectbox(
        "Round", rounds, index=rounds.index(asked), key="queue-round"
    )
    st.query_params["round"] = round_name
with session_scope() as session:
    queue = expert_queue(session=session, actor=user, round_name=round_name)
if controls[-1].button(
    "Take the next task",
    help="Reserve the next task of the round that still needs experts, best matching your "
    "expertise first.",
    width="stretch",
):
    taken = perform(claim_next, actor=user, round_name=round_name)
    if taken is None:
        st.info("Every task of the round has its experts. Thank you!")
    elif taken is not FAILED:
        st.rerun()
if queue.empty:
    st.info("Nothing is assigned to you yet: take the next task above.")
    st.stop()
state = {"submitted": "Rated"}
rows = queue.rows.set_index("assignment_id", drop=False)
labels = {
    int(r.assignment_id): f"{state.get(r.status, 'To rate')} · {r.title} ({r.persona})"
    for r in rows.itertuples()
}
linked = [
    a
    for a, task in zip(rows.assignment_id, rows.task, strict=True)
    if task == st.query_params.get("task")
]
options = list(labels)
chosen = controls[-2].selectbox(
    "Task",
    options,
    format_func=labels.get,
    index=options.index(int(linked[0])) if linked else 0,
)
st.query_params["task"] = rows.loc[chosen, "task"]
if queue.rated > (shown := int((queue.rows.status == "submitted").sum())):
    st.caption(f"Listed: your open tasks and the {shown} you rated last.")
st.progress(queue.rated / queue.held, text=f"{queue.rated:,} of {queue.held:,} rated")
with session_scope() as session:
    view = assignment_view(session=session, actor=user, assignment_id=chosen)
# two panes of a fixed height, side by side: the evidence scrolls in its own, the rubric stays
# in view in the other (keyed per task, so that a new task opens both at their tops)
evidence, rubric = st.columns([3, 2], gap="large")
with evidence, st.container(height=PANE_HEIGHT, key=f"evidence-{chosen}"):
    task_header(view)
    raw = st.toggle(RAW_LABEL, key="raw-text", help=RAW_HELP)
    evidence_panel(view, user, raw=raw)


def _next_task(expert, round_name: str) -> tuple[str, str | None]:
    """After a submit, the expert's next task of the same round is open without another
    click: an open reservation of theirs, or a new claim. Returns the message and the task."""

    def claim(session):
        following = claim_next(session=session, actor=expert, round_name=round_name)
        if following is None:
            return None
        mine = expert_queue(session=session, actor=expert, round_name=round_name).rows
        return mine.loc[mine["assignment_id"] == following.id].iloc[0]

    try:
        following = write_transaction(claim)
    except ItsmReviewError:  # the round closed, or the expert left it
        return "", None
    if following is None:
        return "Every task of the round has its experts. Thank you!", None
    return f"Next: {literal(following['title'])}.", str(following["task"])


@st.fragment
def rate(shown, round_name: str) -> None:
    """The rubric reruns alone when its draft is kept (its widgets hold the answers, so the
    view read by the page serves those runs too); a submit opens the next task."""
    assignment_id = shown.assignment.id
    action, answers = rating_form(shown)
    if action == "draft":
        if perform(save_draft, actor=user, assignment_id=assignment_id, **answers) is not FAILED:
            st.caption("Draft kept: only you see it until you submit.")
    elif action == "submit":
        if perform(submit_rating, actor=user, assignment_id=assignment_id, **answers) is FAILED:
            return
        message, following = _next_task(user, round_name)
        announce(f"Rating submitted. {message}")
        if following is not None:
            st.query_params["task"] = following
        st.rerun()


with rubric, st.container(height=PANE_HEIGHT, key=f"rating-{chosen}"):
    rate(view, rows.loc[chosen, "round"])
    proposal_form(view, user)
    findings_panel(view, user)
    finding_form(view, user)
rubric_keys(RUBRIC_CONTAINER, submit=SUBMIT_LABEL, draft=DRAFT_LABEL, key=f"keys-{chosen}")
