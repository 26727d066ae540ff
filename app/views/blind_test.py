"""Page: the blind test, where an expert tells real cases from simulated ones, unlabelled."""

import pandas as pd
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.realism.blind_tests import answer, blind_test_names, next_fragment
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.text import literal

user = require(Role.expert)
st.title("Blind test")
st.write(
    "Each fragment is a stretch of one ticket's life: its status changes and the team "
    "handling it (teams renamed in order of appearance). Some come from the real log, some "
    "from simulated conversations. Which is this one?"
)
with session_scope() as session:
    names = blind_test_names(session=session, actor=user, only_open=True)
if not names:
    st.info("No blind test is open. A lead opens one from the Simulator realism page.")
    st.stop()
name = st.selectbox("Test", names, key="blind-test") if len(names) > 1 else names[0]
with session_scope() as session:
    fragment, done, total = next_fragment(session=session, actor=user, name=name)
st.progress(done / total if total else 1.0, text=f"{done} of {total} answered")
if fragment is None:
    st.success("You have answered every fragment of this test. Thank you.")
    st.stop()

st.subheader(f"Fragment {fragment.position}")
steps = pd.DataFrame(fragment.steps)
steps.index = range(1, len(steps) + 1)
st.table(steps.rename(columns={"activity": "Status", "team": "Team"}))
with st.form(f"blind-{name}-{fragment.id}", clear_on_submit=True):
    judged = st.radio(
        "This fragment is",
        ["real", "simulated"],
        format_func={"real": "Real (from the log)", "simulated": "Simulated"}.get,
        index=None,
        horizontal=True,
    )
    confidence = st.select_slider(
        "How sure are you?",
        options=[1, 2, 3, 4, 5],
        value=3,
        format_func={1: "1 guess", 2: "2", 3: "3", 4: "4", 5: "5 sure"}.get,
    )
    if st.form_submit_button("Answer and go on", type="primary"):
        if judged is None:
            st.error("Choose real or simulated first.")
        else:
            done_now = perform(
                answer,
                actor=user,
                name=name,
                fragment_id=fragment.id,
                judged=judged,
                confidence=confidence,
            )
            if done_now is not FAILED:
                st.rerun()
st.caption(literal(f"Test: {name}"))
