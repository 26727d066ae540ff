import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope, write_transaction
from itsmreview.errors import ItsmReviewError
from itsmreview.review.assignment import claim_next
from itsmreview.review.service import save_draft, submit_rating
from itsmreview.review.view import assignment_view, expert_queue
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.notice import announce
from itsmreview.ui.rating import rating_form, task_panel, turn_note_form, variant_panel
from itsmreview.ui.transcript import render_transcript

user = require(Role.expert)
st.title("My queue")
with session_scope() as session:
    queue = expert_queue(session=session, actor=user)
if st.button(
    "Take the next task",
    help="Reserve the next task of the open round that "
    "still needs experts, best matching your expertise first.",
):
    taken = perform(claim_next, actor=user)
    if taken is None:
        st.info("Every task of the round has its experts. Thank you!")
    elif taken is not FAILED:
        st.rerun()
if queue.empty:
    st.info("Nothing is assigned to you yet: take the next task above.")
    st.stop()
st.progress(queue.rated / queue.held, text=f"{queue.rated:,} of {queue.held:,} rated")
state = {"submitted": "Rated"}
labels = {
    int(r.assignment_id): f"{state.get(r.status, 'To rate')} · {r.title} ({r.persona})"
    for r in queue.rows.itertuples()
}
chosen = st.selectbox("Task", list(labels), format_func=labels.get, index=0)
if queue.rated > (shown := int((queue.rows.status == "submitted").sum())):
    st.caption(f"Listed: your open tasks and the {shown} you rated last.")
with session_scope() as session:
    view = assignment_view(session=session, actor=user, assignment_id=chosen)
left, right = st.columns([3, 2], gap="large")
with left:
    task_panel(view)
    for transcript in view.transcripts:
        with st.expander(
            f"Transcript: {transcript.title or transcript.external_id} "
            f"({transcript.n_turns} turns)",
            expanded=True,
        ):
            render_transcript(transcript.messages, key=f"tr-{transcript.id}")
            turn_note_form(view, transcript, user)


def _next_task(expert) -> str:
    """After a submit, the expert's next task is open without another click: an open
    reservation of theirs, or a new claim."""

    def claim(session):
        following = claim_next(session=session, actor=expert)
        if following is None:
            return None, None
        return following, expert_queue(session=session, actor=expert)

    try:
        following, mine = write_transaction(claim)
    except ItsmReviewError:  # the round closed, or the expert left it
        return ""
    if following is None:
        return "Every task of the round has its experts. Thank you!"
    title = mine.rows.loc[mine.rows["assignment_id"] == following.id, "title"].iloc[0]
    return f"Next: {title}."


def keep_draft(answers: dict) -> None:
    with session_scope() as session:
        save_draft(session=session, actor=user, assignment_id=chosen, **answers)


with right:
    variant_panel(view)
    answers = rating_form(view, keep_draft)
submitted = answers is not None and (
    perform(submit_rating, actor=user, assignment_id=chosen, **answers) is not FAILED
)
if submitted:
    announce(f"Rating submitted. {_next_task(user)}")
    st.rerun()
