"""Page: the provenance ledger: head, verification, recorded sources, realism by provenance."""

import datetime as dt

import pandas as pd
import plotly.express as px
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.ledger.evidence.service import (
    ARTIFACT_KINDS,
    KINDS,
    TASKS_LISTED,
    Reference,
    artifact_names,
    audit_for,
    ledger_filters,
    ledger_page,
    record_source,
    summary_for,
)
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.cache import background_note, in_background
from itsmreview.ui.charts import NO_TOOLBAR
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import show_table
from itsmreview.ui.words import words

PAGE_SIZE = 200
ALL = "(all)"
COLOURS = {"logs": "#2e7d32", "external": "#1565c0", "expert": "#ef6c00", "undeclared": "#bdbdbd"}
user = require(Role.lead)
st.title("Provenance ledger")
st.write(
    "Where each part of the benchmark came from: the **logs**, **external** practice (papers, "
    "vendor schemas, other benchmarks) or **experts**. Entries are hash-chained and commit to "
    "the content they record, so an edit anywhere is found by **Verify**."
)

shown = in_background(summary_for)(user)
background_note(shown, "The provenance summary")
summary = shown.value or {"fields": []}
if summary["fields"]:
    st.subheader("Task fields by source")
    long = pd.DataFrame(
        [
            {"field": words(row["field"]), "source": kind, "tasks": row[kind]}
            for row in summary["fields"]
            for kind in COLOURS
        ]
    )
    figure = px.bar(
        long,
        x="tasks",
        y="field",
        color="source",
        orientation="h",
        color_discrete_map=COLOURS,
        category_orders={"source": list(COLOURS)},
    )
    figure.update_layout(
        height=80 + 40 * len(summary["fields"]),
        margin={"t": 10, "b": 10},
        yaxis_title="",
        legend_title_text="",
    )
    st.plotly_chart(figure, config=NO_TOOLBAR)
    activity = summary["activity"]
    st.caption(
        "Each field of each current task version counted once, by its newest declared source. "
        f"Review activity, not counted above: {activity['ratings']:,} ratings, "
        f"{activity['adjudications']:,} adjudications, {activity['gate_changes']:,} gate changes, "
        f"{activity['status_changes']:,} status changes, {activity['exports']:,} exports."
    )

with session_scope() as session:
    filters = ledger_filters(session=session, actor=user)
head = filters.head
st.subheader("Head")
if head is None:
    st.info("The ledger is empty.")
else:
    st.code(head["text"], language=None)
    st.caption(
        "Keep this outside the database (an export's manifest, a paper's appendix, a git commit): "
        "`itsmreview ledger verify --expect-head` then catches a truncated or re-written chain."
    )
with st.expander("Verify the ledger"):
    expected = st.text_input("Expected head (optional)", placeholder="SEQ:HASH")
    if st.button("Verify", type="primary"):
        report = perform(audit_for, actor=user, expect_head=expected.strip())
        if report is not FAILED:
            if report.ok:
                st.success(
                    f"Chain intact: {report.entries:,} entries; {report.objects_checked:,} "
                    "ratings, task versions, adjudications and gates match their entries."
                )
            if report.chain_problem:
                st.error(f"Entry {report.broken_at}: {report.chain_problem}.")
            if report.expected_head_problem:
                st.error(f"Expected head: {report.expected_head_problem}.")
            for problem in report.problems[:50]:
                st.error(problem)

record = st.expander("Record a source", key="open-record-source", on_change="rerun")
if record.open:  # drawn when opened: the list of tasks costs a query
    # a new form (keys of a new generation) only after a source is recorded: a refusal keeps
    # every field as typed
    generation = st.session_state.setdefault("record-form", 0)

    def key(name: str) -> str:
        return f"record-{name}-{generation}"

    with record:
        # outside the form: the kind chooses the list the name is picked from
        artifact = st.selectbox("Artifact kind", ARTIFACT_KINDS, key=key("artifact"))
        search = (
            st.text_input(
                "Find a task (id or title)",
                key=f"ledger-task-search-{generation}",  # not a field of the record
                help=f"the first {TASKS_LISTED} matching tasks are listed below",
            )
            if artifact == "task"
            else ""
        )
        with session_scope() as session:
            names = artifact_names(session=session, actor=user, kind=artifact, search=search)
        with st.form("record-source"):
            left, right = st.columns(2)
            if names is None:
                name = left.text_input(
                    "Name", key=key(f"name-{artifact}"), help=f"any name for the {artifact}"
                )
            else:
                name = left.selectbox(
                    artifact.capitalize(),
                    list(names),
                    index=None,
                    format_func=names.get,
                    placeholder=f"Choose a {artifact} (type to search)",
                    key=key(f"name-{artifact}"),
                )
            task_version = (
                right.number_input(
                    "Task version",
                    min_value=1,
                    value=None,
                    step=1,
                    placeholder="the task as a whole",
                    help="Blank: the source holds for every version of the task",
                    key=key("task-version"),
                )
                if artifact == "task"
                else None
            )
            left, right = st.columns(2)
            field_name = left.text_input(
                "Field", placeholder="e.g. org_structure", key=key("field")
            )
            kind = right.selectbox("Came from", KINDS, index=1, key=key("kind"))
            title = st.text_input(
                "Reference", placeholder="e.g. ServiceNow CMDB data model", key=key("title")
            )
            a, b, c = st.columns(3)
            url = a.text_input("URL", key=key("url"))
            doi = b.text_input("DOI", key=key("doi"))
            version = c.text_input("Version", key=key("version"))
            note = st.text_input("Note", key=key("note"))
            sent = st.form_submit_button("Record")
        if sent and not (name or "").strip():
            st.error(f"Choose the {artifact} the source is about." if names else "Give a name.")
        elif sent:
            entry = perform(
                record_source,
                actor=user,
                about=f"{artifact}:{name.strip()}" + (f"@v{task_version}" if task_version else ""),
                field_name=field_name.strip(),
                kind=kind,
                reference=Reference(title, url or None, doi or None, version or None),
                note=note,
            )
            if entry is not FAILED:  # a new, empty form, and the new head above it
                st.session_state["record-form"] = generation + 1
                announce(f"Recorded as ledger entry {entry.seq}.")
                st.rerun()

st.subheader("Entries")
cols = st.columns(4)
source_kind = cols[0].selectbox("Source", [ALL, *KINDS, "system"])
artifact_type = cols[1].selectbox("Artifact", [ALL, *filters.artifact_types])
actor_name = cols[2].selectbox("By", [ALL, *sorted(filters.actors)])
days = cols[3].date_input("Between", value=(), format="YYYY-MM-DD")
since = until = None
if isinstance(days, tuple) and len(days) == 2:
    since = dt.datetime.combine(days[0], dt.time(), dt.UTC)
    until = dt.datetime.combine(days[1] + dt.timedelta(days=1), dt.time(), dt.UTC)
query = {
    "source_kind": None if source_kind == ALL else source_kind,
    "artifact_type": None if artifact_type == ALL else artifact_type,
    "actor_name": None if actor_name == ALL else actor_name,
    "since": since,
    "until": until,
}
page_key = "ledger-page"
if st.session_state.get("ledger-query") != query:  # other filters: back to their first page
    st.session_state["ledger-query"] = query
    st.session_state[page_key] = 1
page = max(1, int(st.session_state.get(page_key) or 1))
with session_scope() as session:
    shown = ledger_page(session=session, actor=user, page=page, page_size=PAGE_SIZE, **query)
pages = max(1, -(-shown.total // PAGE_SIZE))
if page > pages:  # entries went away since: show the last page
    st.session_state[page_key] = page = pages
    with session_scope() as session:
        shown = ledger_page(session=session, actor=user, page=page, page_size=PAGE_SIZE, **query)
st.number_input(f"Page (of {pages:,}; {shown.total:,} entries)", 1, pages, key=page_key)
show_table(shown.entries, {"seq": "#"})
