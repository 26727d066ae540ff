"""Page: a Delphi round's revision phase, where an expert sees the panel's anonymous answers
beside their own and keeps or changes each one (a change says why)."""

import pandas as pd
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.review.consensus.service import reveal, revise, rounds_to_revise
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.text import literal
from itsmreview.ui.words import MISSING

user = require(Role.expert)
st.title("Consensus")
st.write(
    "A Delphi round: you rated its tasks blind. Here you see, per task and rubric item, how the "
    "whole panel answered (anonymously) beside your own answer. Keep it or change it; say why "
    "when you change it. The lead ends the phase when the panel has answered."
)
with session_scope() as session:
    names = rounds_to_revise(session=session, actor=user)
if not names:
    st.info("No Delphi round waits for your revision.")
    st.stop()
name = st.selectbox("Round", names, key="consensus-round") if len(names) > 1 else names[0]
with session_scope() as session:
    shown = reveal(session=session, actor=user, round_name=name)
left = [t for t in shown["tasks"] if not t["revised"]]
st.progress(
    1 - len(left) / max(len(shown["tasks"]), 1),
    text=f"Phase {shown['phase']}: {len(shown['tasks']) - len(left)} of {len(shown['tasks'])} "
    f"task(s) answered; you are {shown['you_are']} to the panel",
)
if not left:
    st.success("You have answered every task of this phase. Thank you.")
    st.stop()
task = left[0]
st.subheader(literal(f"Task {task['task']}"))
rows = [
    {
        "Item": item,
        "Yours": f["yours"],
        "Panel median": f["median"],
        "Middle half": f"{f['q1']:g} to {f['q3']:g}",
        "Answers": ", ".join(f"{score:g}: {n}" for score, n in f["answers"].items()),
    }
    for item, f in task["items"].items()
]
st.dataframe(pd.DataFrame(rows), hide_index=True, placeholder=MISSING)
for note in task["comments"]:
    st.markdown(literal(f"*{note['by']}:* {note['comment']}"))
key = f"consensus-{name}-{task['task_version_id']}"
with st.form(key):
    scores, reasons = {}, {}
    for item, f in task["items"].items():
        cols = st.columns([1, 3])
        scores[item] = cols[0].number_input(
            item, value=float(f["yours"]), step=1.0, key=f"{key}-{item}"
        )
        reasons[item] = cols[1].text_input(
            f"Why you change {item} (only if you do)", key=f"{key}-{item}-why"
        )
    sent = st.form_submit_button("Keep these answers", type="primary")
if sent:
    done = perform(
        revise,
        actor=user,
        round_name=name,
        task_version_id=task["task_version_id"],
        scores=scores,
        reasons=reasons,
    )
    if done is not FAILED:
        st.toast(f"{done} answer(s) changed" if done else "Answers kept")
        st.rerun()
