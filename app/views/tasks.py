"""Page: the task catalogue, filtered, and one task in full with its ratings and checks."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.catalog.task_list import declared_variants, filter_choices, task_detail, task_table
from itsmreview.db import session_scope
from itsmreview.review.ratings.checks import checks_of_version
from itsmreview.review.ratings.expert_view import rating_history, turn_notes_of_task
from itsmreview.review.repair.service import repair_iterations
from itsmreview.ui.auth import require
from itsmreview.ui.links import linked_filters
from itsmreview.ui.rating import provenance_card
from itsmreview.ui.tables import readable, show_table
from itsmreview.ui.text import label as show_field
from itsmreview.ui.text import literal
from itsmreview.ui.transcript import render_transcript
from itsmreview.ui.variant import render_variant, variant_details
from itsmreview.ui.verifier import checks_panel, state_panel
from itsmreview.ui.words import MISSING, words

PAGE_SIZE = 50
TABLE_COLUMNS = [
    "id",
    "title",
    "persona",
    "track",
    "decision",
    "version",
    "changed_after_rating",
    "difficulty",
    "user_type",
    "simulator_backbone",
    "repairs",
    "log",
]
# each filter of task_table by the key of its widget
FILTER_KEYS = {
    name: f"tasks-{name}"
    for name in (
        "personas",
        "tracks",
        "statuses",
        "text",
        "variant_key",
        "difficulties",
        "user_types",
        "backbones",
    )
}

user = require(Role.lead)
st.title("Tasks")
with session_scope() as session:
    choices = filter_choices(session=session, actor=user)
    variants = declared_variants(session=session, actor=user)
if not choices["persona"]:
    st.info("The catalog is empty: `itsmreview tasks import PATH` or the Imports page.")
    st.stop()
linked = linked_filters()
if linked is not None:  # a link's filters (from Coverage, a variant, a persona) replace the page's
    for name in FILTER_KEYS.values():
        st.session_state.pop(name, None)
    st.session_state[FILTER_KEYS["personas"]] = [
        p for p in linked["personas"] if p in choices["persona"]
    ]
    st.session_state[FILTER_KEYS["variant_key"]] = (
        linked["variant_key"] if linked["variant_key"] in variants else None
    )
    st.session_state.pop("task-table", None)  # the first task of the list opens
filters = st.columns(5)
filters[0].multiselect("Persona", choices["persona"], key=FILTER_KEYS["personas"])
filters[1].multiselect("Track", choices["track"], key=FILTER_KEYS["tracks"])
filters[2].multiselect("Status", choices["status"], key=FILTER_KEYS["statuses"])
filters[3].text_input("Search id or title", key=FILTER_KEYS["text"])
filters[4].selectbox(
    "Source variant",
    [None, *variants],
    format_func=lambda k: "any" if k is None else variants[k],
    key=FILTER_KEYS["variant_key"],
)
authoring = st.columns(3)
authoring[0].multiselect(
    "Difficulty",
    choices["difficulty"],
    help="easy, medium, hard (L1-L3 as imported)",
    key=FILTER_KEYS["difficulties"],
)
authoring[1].multiselect("Simulated user type", choices["user_type"], key=FILTER_KEYS["user_types"])
authoring[2].multiselect(
    "Simulator backbone",
    choices["simulator_backbone"],
    help="The model behind the simulated actors, from the transcripts' metadata",
    key=FILTER_KEYS["backbones"],
)
chosen_filters = {name: st.session_state[key] for name, key in FILTER_KEYS.items()}
if st.session_state.get("task-filters") != chosen_filters:
    st.session_state["task-filters"] = chosen_filters
    st.session_state["task-page"] = 1
page_number = int(st.session_state.get("task-page", 1))
with session_scope() as session:
    listing = task_table(
        session=session,
        actor=user,
        offset=(page_number - 1) * PAGE_SIZE,
        limit=PAGE_SIZE,
        **chosen_filters,
    )
table = listing.rows
with session_scope() as session:
    repairs = repair_iterations(session=session, actor=user, task_ids=table["task_id"].tolist())
table = table.assign(repairs=[repairs.get(int(t), 0) for t in table["task_id"]])
pages = max(1, -(-listing.matching // PAGE_SIZE))
first = (page_number - 1) * PAGE_SIZE
st.caption(
    f"{listing.matching:,} of {listing.total:,} tasks"
    + (f"; rows {first + 1:,}-{first + len(table):,}" if len(table) else "")
)
event = st.dataframe(
    readable(
        table[TABLE_COLUMNS],
        {
            "id": "Task",
            "title": "Title",
            "persona": "Persona",
            "track": "Track",
            "decision": "Decision",
            "version": "Version",
            "difficulty": "Difficulty",
            "user_type": "User type",
            "simulator_backbone": "Simulator",
            "repairs": "Repairs",
            "log": "Source log",
        },
    ),
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    key="task-table",
    column_config={
        "Changed after rating": st.column_config.CheckboxColumn(
            "Changed after rating", help="A newer version exists than the one experts rated."
        ),
        "Repairs": st.column_config.NumberColumn(
            "Repairs", help="New versions put back into review after a needs-revision decision"
        ),
    },
    placeholder=MISSING,
)
if pages > 1:
    st.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1, key="task-page")
rows = event.selection.rows if event and event.selection else []
chosen = table.iloc[rows[0]]["id"] if rows else (table.iloc[0]["id"] if len(table) else None)
if chosen is None:
    st.stop()
with session_scope() as session:
    shown = task_detail(session=session, actor=user, external_id=chosen)
task = shown["task"]
st.header(literal(task["title"]))
st.caption(
    literal(f"{task['id']} · v{shown['version']} · {task['persona']} · {task['track']}")
    + f" · {words(shown['status'])}"
)
row = table[table["id"] == chosen].iloc[0]
if row["changed_after_rating"]:
    st.warning(
        f"Experts rated version {int(row['rated_version'])}; this is version "
        f"{shown['version']}. Their ratings stay with the version they rated."
    )
with session_scope() as session:
    history = rating_history(session=session, actor=user, external_id=chosen)
    notes = turn_notes_of_task(session=session, actor=user, external_id=chosen)
with st.expander(f"Ratings and their history ({len(history)} submitted revisions)"):
    if history.empty:
        st.caption("No expert has rated this task yet.")
    else:
        show_table(history)
    if len(notes):
        st.markdown("**Notes on transcript turns**")
        show_table(notes.drop(columns=["id"]))
left, right = st.columns([3, 2], gap="large")
with left:
    for label in ("instruction", "environment", "ground_truth", "verifier"):
        if task.get(label):
            show_field(label.replace("_", " ").capitalize(), task[label])
    state_panel(task.get("state"), task.get("alternatives"))
    with session_scope() as session:
        checks_panel(
            checks_of_version(session=session, actor=user, task_version_id=shown["task_version_id"])
        )
    for transcript in task["transcripts"]:
        with st.expander(
            f"Transcript {literal(transcript['id'])} ({len(transcript['messages'])} turns)"
        ):
            if transcript.get("simulator"):
                st.json(transcript["simulator"], expanded=False)
            render_transcript(transcript["messages"], key=f"browse-{transcript['id']}")
with right:
    provenance_card(chosen)
    source = task.get("source") or {}
    details = variant_details(source.get("log"), source.get("variants", []))
    for index, detail in enumerate(details):
        st.markdown(f"**Source variant {index + 1}**")
        render_variant(detail, key=f"browse-{chosen}-{index}", compact=True)
