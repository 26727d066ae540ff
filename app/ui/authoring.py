"""The Dashboard's benchmark-authoring section: the audit score and admissions, realism and
agreement per difficulty, simulator backbone and user type, machine checks, repairs,
proposed resolutions and the author-facing feedback of tasks that need revision."""

import pandas as pd
import streamlit as st
from itsmreview.db import session_scope
from itsmreview.review.dashboard.service import GROUPINGS, round_authoring
from itsmreview.review.gate.round_data import find_round
from itsmreview.review.gate.service import current_gate
from itsmreview.review.repair.service import (
    acceptance_outcome,
    decide_proposal,
    feedback,
    feedback_markdown,
    proposals_frame,
)
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.cache import background_note, in_background
from itsmreview.ui.charts import NO_TOOLBAR, audit_score_chart, draw, group_chart
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal


def _audit(audit: dict) -> None:
    st.markdown("**The 100-point audit**")
    if not audit["scored"]:
        st.caption("No task has every audit criterion scored yet.")
        return
    tiles = st.columns(3)
    tiles[0].metric("Tasks scored", f"{audit['scored']:,}")
    tiles[1].metric("Admitted", f"{audit['admitted']:,}")
    tiles[2].metric("Share admitted", f"{audit['share_admitted']:.0%}")
    st.plotly_chart(
        audit_score_chart(audit["scores"], audit["threshold"]),
        key="audit-scores",
        config=NO_TOOLBAR,
    )
    st.caption(
        "Each criterion earns its weight (20 points) for Pass, half for Warn, none for Fail or "
        "Blocked; a task's score is the mean of its raters'. Admitted: approved by the gate "
        "(score at the threshold or more, no criterion Blocked for most raters, no failed "
        "machine check)."
    )


def rating_scale(round_name: str) -> tuple[float, float]:
    """The scale of a round's rubric, from its lowest point to its highest."""
    with session_scope() as session:
        _, rubric = current_gate(session=session, round_name=round_name)
    return min(d.scale[0] for d in rubric.dimensions), max(d.scale[1] for d in rubric.dimensions)


def _groups(figures: dict, scale: tuple[float, float]) -> None:
    measure = "audit_score" if figures["audit"] else "realism"
    label = "mean audit score" if figures["audit"] else f"mean {figures['item_label'].lower()}"
    tabs = st.tabs(list(GROUPINGS.values()))
    for tab, (column, title) in zip(tabs, GROUPINGS.items(), strict=True):
        rows = pd.DataFrame(figures["breakdowns"][column])
        shown_empty = [c for c in ("realism", "audit_score") if c in rows and rows[c].isna().all()]
        rows = rows.drop(columns=shown_empty)
        with tab:
            if rows.empty:
                st.caption("The round has no tasks.")
                continue
            if measure in rows:
                draw(
                    group_chart(
                        rows, measure, label, title, (0, 100) if figures["audit"] else scale
                    ),
                    key=f"by-{column}",
                    empty=f"No rated task in any {title.lower()} yet.",
                )
            show_table(
                rows,
                {
                    "group": title,
                    "tasks": "Tasks",
                    "rated": "Rated",
                    "realism": f"Mean {figures['item_label'].lower()}",
                    "audit_score": "Mean audit score",
                    "alpha": "Alpha",
                    "ci_low": "95% low",
                    "ci_high": "95% high",
                    "approved": "Approved",
                },
            )
    st.caption(
        f"Realism: the mean over rated tasks of the median {figures['item_label'].lower()}; "
        "alpha among the group's tasks, with a 95% bootstrap interval. If ratings depend on the "
        "simulator backbone or the user type, the simulated actors, not the tasks, are judged."
    )


CONFIRMING = "proposal-confirming"  # the proposal whose acceptance is being confirmed


def _proposals(user, round_name: str, count: int) -> None:
    shown = st.expander(
        f"Proposed resolutions to decide ({count})", key="open-proposals", on_change="rerun"
    )
    if not shown.open:
        return
    with session_scope() as session:
        review_round = find_round(session, round_name)
        waiting = proposals_frame(session=session, round_id=review_round.id, status="proposed")
    with shown:
        if waiting.empty:
            st.caption("No expert has proposed another acceptable end state.")
        for row in waiting.itertuples():
            st.markdown(
                f"**{literal(row.task)} v{row.version}** · {literal(row.expert)}: "
                f"{literal(row.description)}"
            )
            if st.session_state.get(CONFIRMING) == row.id:
                _confirm_acceptance(user, int(row.id))
                continue
            left, right, _ = st.columns([1, 1, 4])
            if left.button("Accept…", key=f"proposal-{row.id}-Accept"):
                st.session_state[CONFIRMING] = int(row.id)  # what it does, told before it is done
                st.rerun()
            if right.button("Dismiss", key=f"proposal-{row.id}-Dismiss") and (
                perform(decide_proposal, actor=user, proposal_id=int(row.id), accept=False)
                is not FAILED
            ):
                announce("Proposal dismissed.")
                st.rerun()


def _outcome_text(outcome) -> str:
    new, old = f"version {outcome.new_version}", f"version {outcome.version}"
    made = (
        f"Accepting makes {new} of {literal(outcome.task)}: {old} with this end state among "
        "its other acceptable ones. "
    )
    if outcome.rounds:
        where = ", ".join(literal(name) for name in outcome.rounds)
        return made + (
            f"{new.capitalize()} takes the place of {old} in review in {where}: experts rate "
            f"it anew there; the ratings and decision of {old} stay with {old}."
        )
    return made + (
        f"{new.capitalize()} is a **draft outside every round**: no expert rates it until a "
        "round is opened over it (Rounds), and no export takes it before it is approved."
    )


def _confirm_acceptance(user, proposal_id: int) -> None:
    with session_scope() as session:
        outcome = acceptance_outcome(session=session, actor=user, proposal_id=proposal_id)
    st.warning(_outcome_text(outcome))
    left, right, _ = st.columns([2, 1, 3])
    if left.button(
        f"Accept: make version {outcome.new_version}",
        type="primary",
        key=f"proposal-{proposal_id}-confirm",
    ):
        st.session_state.pop(CONFIRMING, None)
        if perform(decide_proposal, actor=user, proposal_id=proposal_id, accept=True) is not FAILED:
            where = (
                "in review in " + ", ".join(literal(name) for name in outcome.rounds)
                if outcome.rounds
                else "a draft outside every round"
            )
            announce(f"Accepted: {literal(outcome.task)} v{outcome.new_version}, {where}.")
            st.rerun()
    if right.button("Cancel", key=f"proposal-{proposal_id}-cancel"):
        st.session_state.pop(CONFIRMING, None)
        st.rerun()


def _feedback(user, round_name: str, waiting: int) -> None:
    import json

    with st.expander(f"Feedback to authors ({waiting} tasks need revision)"):
        st.caption(
            "Per task that needs revision: the gate's reasons, failing criteria, comments and "
            "turn notes (without the experts' names), failed machine checks and proposed "
            "resolutions. A new version of the task goes back into this round by itself. Also "
            "`itsmreview round feedback ROUND OUT`."
        )
        if not waiting:
            return
        if st.button("Prepare the feedback files", key="feedback-prepare"):
            with session_scope() as session:
                items = feedback(session=session, actor=user, round_name=round_name)
            st.session_state["feedback-files"] = (
                "".join(json.dumps(i, ensure_ascii=False, default=str) + "\n" for i in items),
                feedback_markdown(items),
            )
        files = st.session_state.get("feedback-files")
        if files:
            left, right = st.columns(2)
            left.download_button("feedback.jsonl", files[0], "feedback.jsonl", "application/jsonl")
            right.download_button("feedback.md", files[1], "feedback.md", "text/markdown")


def authoring_section(user, round_name: str) -> None:
    st.subheader("Benchmark authoring")
    shown = in_background(round_authoring)(user, round_name=round_name)
    background_note(shown, "The authoring figures")
    figures = shown.value
    if figures is None:
        return
    tiles = st.columns(4)
    checks = figures["checks"]
    tiles[0].metric("Machine checks", f"{sum(checks.values()):,}")
    tiles[1].metric("Failing checks", f"{checks.get('fail', 0) + checks.get('error', 0):,}")
    tiles[2].metric("Repair iterations", f"{figures['repairs']:,}")
    tiles[3].metric("Proposals waiting", f"{figures['proposals'].get('proposed', 0):,}")
    if figures["audit"]:
        _audit(figures["audit"])
    # drawn when opened: a page view costs the tiles only
    groups = st.expander(
        f"{figures['item_label']} and agreement by difficulty, simulator backbone and user type",
        key="open-authoring-groups",
        on_change="rerun",
    )
    if groups.open:
        with groups:
            _groups(figures, rating_scale(round_name))
    _proposals(user, round_name, figures["proposals"].get("proposed", 0))
    _feedback(user, round_name, figures["needs_revision"])
