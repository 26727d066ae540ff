"""Page: the model's labels for turns no mapping rule matched, each confirmed or rejected by
an expert before it counts."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.realism.service import decide_label, labels_to_confirm
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.text import literal

user = require(Role.expert, Role.lead)
st.title("Turn labels")
st.write(
    "A mapping spec turns simulated conversations into the log's events rule by rule. For a "
    "turn no rule matched, the model proposed the event it amounts to (or none). Check each "
    "one: only the labels you confirm count in the simulator's figures."
)
with session_scope() as session:
    waiting = labels_to_confirm(session=session, actor=user, limit=50)
if not waiting:
    st.info(
        "No label waits for a decision. A lead asks for labels with `itsmreview realism label`."
    )
    st.stop()
st.caption(f"{len(waiting)} label(s) waiting (the oldest 50 shown)")
label = waiting[0]
st.subheader(literal(f"Task {label['task']}, turn {label['turn']}"))
for before in label["context"]:
    st.markdown(literal(f"*{before['role']}:* {before['text']}"))
st.markdown(literal(f"**{label['role']} ({label['actor']}):** {label['text'] or '(no text)'}"))
if "tool" in label:
    st.code(str(label["tool"]), language="json")
st.markdown(literal(f"Proposed: **{label['label']}**: {label['reason']}"))
st.caption(literal(f"{label['model']}, spec {label['spec']}, transcript {label['transcript']}"))
confirm, reject = st.columns(2)
decision = None
if confirm.button("Confirm", type="primary", key=f"label-confirm-{label['id']}"):
    decision = True
if reject.button("Reject", key=f"label-reject-{label['id']}"):
    decision = False
if decision is not None:
    done = perform(decide_label, actor=user, label_id=label["id"], accept=decision)
    if done is not FAILED:
        st.toast("Confirmed: it counts now" if decision else "Rejected")
        st.rerun()
