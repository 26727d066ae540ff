"""Task, source-variant and rubric widgets of the rating page."""

import streamlit as st
from itsmreview.review.view import AssignmentView
from itsmreview.ui.transcript import escape_markdown
from itsmreview.ui.variant import render_variant


def task_panel(view: AssignmentView) -> None:
    task, version = view.task, view.version
    st.subheader(task.title)
    st.caption(f"{task.persona} · {task.track} · version {version.version}")
    if view.newest_version > version.version:
        st.info(
            f"The task has changed since it was assigned (now version {view.newest_version}). "
            f"You rate version {version.version}; your rating stays with it."
        )
    for label, text in (
        ("Instruction", version.instruction),
        ("Environment", version.environment),
        ("Ground truth", version.ground_truth),
        ("Verifier", version.verifier),
    ):
        if text:
            st.markdown(f"**{label}**")
            st.markdown(escape_markdown(text))


def variant_panel(view: AssignmentView) -> None:
    st.subheader("Source log variant")
    if not view.variants:
        st.info("This task declares no source variant.")
    for index, detail in enumerate(view.variants):
        render_variant(detail, key=f"a{view.assignment.id}-v{index}", compact=True)


def rating_form(view: AssignmentView) -> dict | None:
    """The rubric form; returns the answers when submitted, else None."""
    rubric, previous = view.rubric, view.own_scores
    st.subheader("Your rating")
    if view.own_rating is not None:
        st.caption(
            f"Submitted (revision {view.own_rating.revision}); submitting again "
            "creates a new revision."
        )
    key = f"a{view.assignment.id}"
    with st.form(f"rating-{key}"):
        scores = {}
        for dimension in rubric.dimensions:
            low, high = dimension.scale
            options = list(range(low, high + 1))
            current = previous.get(dimension.key)
            scores[dimension.key] = st.radio(
                dimension.label + ("" if dimension.required else " (optional)"),
                options,
                index=options.index(int(current)) if current is not None else None,
                format_func=lambda v, d=dimension: (
                    f"{v}" + (f" · {d.anchors[v]}" if v in d.anchors else "")
                ),
                horizontal=True,
                help=dimension.guidance,
                key=f"{key}-{dimension.key}",
            )
        verdict = st.radio(
            "Overall verdict",
            rubric.verdicts,
            horizontal=True,
            index=rubric.verdicts.index(view.own_rating.verdict)
            if view.own_rating and view.own_rating.verdict
            else None,
            key=f"{key}-verdict",
        )
        flags = st.multiselect(
            "Flags",
            [f.key for f in rubric.flags],
            default=view.own_rating.flags if view.own_rating else [],
            format_func={f.key: f.label for f in rubric.flags}.get,
            key=f"{key}-flags",
        )
        low, high = rubric.confidence.scale
        confidence = st.slider(
            rubric.confidence.label,
            low,
            high,
            view.own_rating.confidence
            if view.own_rating and view.own_rating.confidence
            else high - 1,
            key=f"{key}-confidence",
        )
        comment = st.text_area(
            "Comment", view.own_rating.comment if view.own_rating else "", key=f"{key}-comment"
        )
        submitted = st.form_submit_button("Submit rating", type="primary")
    if not submitted:
        return None
    if verdict is None:
        st.error("Choose an overall verdict.")
        return None
    return {
        "scores": scores,
        "verdict": verdict,
        "flags": flags,
        "comment": comment,
        "confidence": confidence,
    }
