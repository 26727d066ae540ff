"""Page: persona completeness, whether the task set covers each job persona's work activities."""

import pandas as pd
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.coverage.overview import log_names
from itsmreview.db import session_scope
from itsmreview.review.ratings.completeness import (
    add_activities,
    checklist,
    persona_activity_list,
    personas,
    remove_activity,
    report,
    submit_review,
)
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.links import tasks_link
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal

KINDS = {"logs": "log state", "lead": "work activity", "expert": "work activity"}
user = require(Role.expert, Role.lead)
st.title("Persona completeness")
st.write("Does the task set capture all the work activities of each job persona?")
with session_scope() as session:
    names = personas(session=session)
if not names:
    st.info("No persona yet: import tasks first.")
    st.stop()

if user.role == Role.expert:
    preferred = [p for p in names if p in (user.expertise or [])] + [
        p for p in names if p not in (user.expertise or [])
    ]
    persona = st.selectbox("Persona", preferred)
    with session_scope() as session:
        data = checklist(session=session, actor=user, persona=persona)
    st.subheader(f"The {len(data.tasks)} tasks of this persona")
    show_table(data.tasks)
    if not data.activities:
        st.info("A lead has not listed this persona's work activities yet.")
        st.stop()
    with st.form(f"completeness-{persona}"):
        before = set(data.mine.captured_ids) if data.mine else set()
        ticked = []
        # the persona's work apart from the states a log records
        for heading, group in (
            ("Which work activities of the persona do these tasks capture?", False),
            ("Which states of the source log do they pass through?", True),
        ):
            shown = [a for a in data.activities if (a.source == "logs") == group]
            if shown:
                st.markdown(f"**{heading}**")
            ticked += [
                a.id
                for a in shown
                if st.checkbox(literal(a.activity), value=a.id in before, key=f"act-{a.id}")
            ]
        missing = st.text_area(
            "Activities of this persona that no task captures (one per line)",
            "\n".join(data.mine.missing) if data.mine else "",
        )
        comment = st.text_area("Comment", data.mine.comment if data.mine else "")
        sent = st.form_submit_button("Submit judgement", type="primary")
    if sent:
        recorded = perform(
            submit_review,
            actor=user,
            persona=persona,
            captured_ids=ticked,
            missing=missing.splitlines(),
            comment=comment,
        )
        if recorded is not FAILED:
            st.success("Thank you: your judgement is recorded.")
    st.stop()

with session_scope() as session:
    results = report(session=session, actor=user)
summary = pd.DataFrame(
    [
        {
            "persona": r.persona,
            "experts": r.experts,
            "activities": len(r.activities),
            "captured": r.share_captured,
        }
        for r in results
    ]
)
show_table(
    summary,
    {"experts": "Expert judgements", "captured": "Captured"},
    column_config={
        "Captured": st.column_config.ProgressColumn(
            "share of activities captured", format="percent", min_value=0.0, max_value=1.0
        )
    },
)
for result in results:
    with st.expander(f"{literal(result.persona)}: {result.experts} expert judgement(s)"):
        tasks_link(f"Open the tasks of {result.persona}", persona=result.persona)
        show_table(
            result.activities.assign(
                source=result.activities["source"].map(KINDS).fillna(result.activities["source"])
            ),
            {"source": "Kind", "share": "Experts finding it captured"},
            column_config={
                "Experts finding it captured": st.column_config.ProgressColumn(
                    "experts finding it captured", format="percent", min_value=0.0, max_value=1.0
                ),
            },
        )
        if len(result.missing):
            st.markdown("**Named as missing**")
            show_table(result.missing)
with st.expander("Edit a persona's work activities"):
    persona = st.selectbox("Persona", names, key="edit-persona")
    lines = st.text_area("Add activities (one per line)", key="edit-lines")
    with session_scope() as session:
        available_logs = log_names(session=session)
    seed = st.selectbox(
        "... and every activity of log",
        [None, *available_logs],
        format_func=lambda n: "(none)" if n is None else n,
    )
    if st.button("Add"):
        added = perform(
            add_activities,
            actor=user,
            persona=persona,
            activities=lines.splitlines(),
            log_name=seed,
        )
        if added is not FAILED:
            st.success(f"Added {added} activit{'y' if added == 1 else 'ies'}.")
    with session_scope() as session:
        current = persona_activity_list(session=session, actor=user, persona=persona)
    if current:
        gone = st.selectbox(
            "Remove", [a.id for a in current], format_func={a.id: a.activity for a in current}.get
        )
        if st.button("Remove activity"):
            with session_scope() as session:
                remove_activity(session=session, actor=user, activity_id=gone)
            st.rerun()
