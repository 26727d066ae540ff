"""The evidence of the rating page, in the order of the rubric's items: the task's text (its
Markdown rendered safely, or raw), the expected end state with the ground truth and the verifier,
the machine checks, the transcripts, the source log variant and the provenance. A long section
starts collapsed, its length in its title."""

import streamlit as st
from itsmreview.catalog.state import diff_rows
from itsmreview.review.ratings.expert_view import AssignmentView
from itsmreview.ui.markup import is_long, length_label, safe_markdown
from itsmreview.ui.rating import provenance_card, turn_note_form
from itsmreview.ui.text import literal, show
from itsmreview.ui.transcript import render_transcript
from itsmreview.ui.variant import render_variant, variant_details
from itsmreview.ui.verifier import checks_panel, state_panel

RAW_LABEL = "Show raw text"
RAW_HELP = (
    "The task's text as written, every character shown. Off: its Markdown drawn (headings, "
    "bold, tables), with no HTML, no images and no links to follow."
)
SHORT_TRANSCRIPT = 20  # turns; a longer transcript starts collapsed


def task_header(view: AssignmentView) -> None:
    """The task's title, persona, track and version."""
    task, version = view.task, view.version
    st.subheader(literal(task.title))
    st.caption(literal(f"{task.persona} · {task.track} · version {version.version}"))
    if view.newest_version > version.version:
        st.info(
            f"The task has changed since it was assigned (now version {view.newest_version}). "
            f"You rate version {version.version}; your rating stays with it."
        )


def text_section(name: str, text: str, *, raw: bool, markdown: bool = True) -> None:
    """`text` under its name and length, collapsed when long; Markdown drawn safely unless
    `raw` (or not `markdown`: a verifier's queries are shown as written)."""
    with st.expander(f"{literal(name)} ({length_label(text)})", expanded=not is_long(text)):
        if raw or not markdown:
            show(text)
        else:
            st.markdown(safe_markdown(text))


def end_state_section(view: AssignmentView, *, raw: bool) -> None:
    """The expected end state as a diff, beside the ground truth and the verifier it comes
    from: what the rubric's ground-truth and verifier items are rated on."""
    version = view.version
    if not (view.state or view.alternatives or version.ground_truth or version.verifier):
        return
    rows = len(diff_rows(view.state))
    title = "Expected end state, ground truth and verifier" + (
        f" ({rows} changed field" + ("" if rows == 1 else "s") + ")" if rows else ""
    )
    with st.expander(title, expanded=True):
        state_panel(view.state, view.alternatives)
        if version.ground_truth:
            text_section("Ground truth", version.ground_truth, raw=raw)
        if version.verifier:
            text_section("Verifier", version.verifier, raw=raw, markdown=False)


def transcripts_section(view: AssignmentView, user) -> None:
    for transcript in view.transcripts:
        with st.expander(
            f"Transcript: {literal(transcript.title or transcript.external_id)} "
            f"({transcript.n_turns} turns)",
            expanded=transcript.n_turns <= SHORT_TRANSCRIPT,
        ):
            render_transcript(transcript.messages, key=f"tr-{transcript.id}")
            turn_note_form(view, transcript, user)


def variant_section(view: AssignmentView) -> None:
    steps = max((len(s) for s in view.source_sequences), default=0)
    title = "Source log variant" + (f" ({steps} steps)" if steps else "")
    with st.expander(title, expanded=True):
        if not view.source_sequences:
            st.info("This task declares no source variant.")
        for index, detail in enumerate(variant_details(view.source_log, view.source_sequences)):
            render_variant(detail, key=f"a{view.assignment.id}-v{index}", compact=True)


def evidence_panel(view: AssignmentView, user, *, raw: bool) -> None:
    """Everything the expert rates the task on, in the order of the rubric's items."""
    version = view.version
    for name, text in (("Instruction", version.instruction), ("Environment", version.environment)):
        if text:
            text_section(name, text, raw=raw)
    end_state_section(view, raw=raw)
    if view.checks is not None:
        checks_panel(view.checks)
    transcripts_section(view, user)
    variant_section(view)
    provenance_card(view.task.external_id)
