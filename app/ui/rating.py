"""The rubric form and the expert's other inputs on the rating page (turn notes, proposals,
findings), and a task's provenance card."""

import streamlit as st
from itsmreview.review.ratings.expert_view import AssignmentView
from itsmreview.sequences import declared_sequences
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import text_table
from itsmreview.ui.text import literal

PROVENANCE_COLUMNS = {
    "field": "Field",
    "source": "Source",
    "reference": "Reference",
    "url": "Address",
    "doi": "DOI",
    "recorded": "Recorded",
    "by": "By",
}


def provenance_card(external_id: str) -> None:
    """Where each field of the task came from (logs, external practice, experts)."""
    from itsmreview.ledger.evidence.service import provenance_card as card_of
    from itsmreview.ui.auth import current_user
    from itsmreview.ui.cache import cached

    # cached per database state: the expert's page reruns on every click, and the card reads
    # the ledger
    card = cached(card_of)(current_user(), external_id=external_id)
    with st.expander(f"Provenance ({len(card)} recorded sources)"):
        if card.empty:
            st.caption("No source recorded for this task.")
            return
        text_table(card.drop(columns=["about"]), PROVENANCE_COLUMNS)


SUBMIT_LABEL = "Submit rating"
DRAFT_LABEL = "Keep draft"
RUBRIC_CONTAINER = "rubric"
NOT_APPLICABLE = "n/a"  # an optional item's last choice: it asks for a reason, not a score
NOT_APPLICABLE_LABEL = "Not applicable"


def _answers(view: AssignmentView, key: str) -> dict:
    state = st.session_state
    chosen = {d.key: state.get(f"{key}-{d.key}") for d in view.rubric.dimensions}
    return {
        "scores": {k: None if v == NOT_APPLICABLE else v for k, v in chosen.items()},
        "verdict": state.get(f"{key}-verdict"),
        "flags": state.get(f"{key}-flags") or [],
        "comment": state.get(f"{key}-comment") or "",
        "confidence": state.get(f"{key}-confidence"),
        "not_applicable": {
            k: state.get(f"{key}-{k}-why") or "" for k, v in chosen.items() if v == NOT_APPLICABLE
        },
    }


def _not_applicable_reason(dimension, key: str, reason: str | None) -> None:
    """The reason field of an optional item marked not applicable: drawn once the mark is
    chosen (the form's draft, kept a moment after the change, or a refused submit reruns it)
    or kept in the draft."""
    if st.session_state.get(key) != NOT_APPLICABLE:  # the item's choice, drawn just above
        return
    st.text_input(
        f"{dimension.label}: why it does not apply to this task",
        reason or "",
        key=f"{key}-why",
        placeholder="e.g. no simulated colleague takes part in this task",
    )


def _anchors(anchors: dict[int, str]) -> str:
    return " · ".join(f"{value} {literal(text)}" for value, text in sorted(anchors.items()))


def _scale(label: str, options: list, current, *, key: str, help: str | None = None, names=None):
    st.radio(
        label,
        options,
        index=options.index(current) if current in options else None,
        horizontal=True,
        help=help,
        key=key,
        format_func=(lambda v: names.get(v, str(v))) if names else str,
    )


def _rubric_item(dimension, key: str, current, marks: dict, *, has_variant: bool) -> None:
    """One rubric item of the form: its scale (an optional item's last choice is Not
    applicable, with the reason asked below it), or why it does not apply to the task."""
    if not dimension.applies(has_source_variant=has_variant):
        st.markdown(f"**{literal(dimension.label)}**")
        st.caption(
            f"Does not apply: {dimension.not_applicable_because()}. Left empty; "
            "it counts in no agreement figure and no decision."
        )
        return
    low, high = dimension.scale
    # a nominal scale with a name per point (Pass, Warn, Fail, Blocked) shows the
    # names, best first: keys 1-4 choose them in that order
    named = dimension.level == "nominal" and set(dimension.anchors) == set(range(low, high + 1))
    points = list(range(low, high + 1))[:: -1 if named else 1]
    names = dimension.anchors if named else {}
    if not dimension.required:
        points, names = [*points, NOT_APPLICABLE], {**names, NOT_APPLICABLE: NOT_APPLICABLE_LABEL}
    if dimension.key in marks:
        current = NOT_APPLICABLE
    _scale(
        dimension.label + ("" if dimension.required else " (optional)"),
        points,
        int(current) if isinstance(current, float | int) else current,
        key=key,
        help="\n\n".join(
            filter(None, [dimension.guidance, "" if named else _anchors(dimension.anchors)])
        ),
        names=names or None,
    )
    if dimension.anchors and not named:
        st.caption(_anchors(dimension.anchors))
    if not dimension.required:
        _not_applicable_reason(dimension, key, marks.get(dimension.key))


def rating_form(view: AssignmentView) -> tuple[str | None, dict]:
    """The rubric as one form: choosing a point reruns nothing. Returns ("submit", answers),
    ("draft", answers) or (None, {})."""
    from itsmreview.ui.keys import SHORTCUTS

    rubric = view.rubric
    saved = view.draft or view.own_rating
    values = (view.draft_scores if view.draft is not None else view.own_scores) or {}
    marks = (saved.not_applicable if saved is not None else None) or {}
    st.subheader("Your rating")
    if view.draft is not None:
        st.caption("Draft kept: only you see it until you submit.")
    elif view.own_rating is not None:
        st.caption(
            f"Submitted (revision {view.own_rating.revision}); changing it and "
            "submitting again creates a new revision."
        )
    key = f"a{view.assignment.id}"
    with st.container(key=RUBRIC_CONTAINER), st.form(f"{key}-form", border=False):
        st.caption(SHORTCUTS)
        has_variant = bool(declared_sequences(view.version.source))  # as submit reads it
        for dimension in rubric.dimensions:
            _rubric_item(
                dimension,
                f"{key}-{dimension.key}",
                values.get(dimension.key),
                marks,
                has_variant=has_variant,
            )
        _scale(
            "Overall verdict",
            rubric.verdicts,
            saved.verdict if saved and saved.verdict else None,
            key=f"{key}-verdict",
        )
        low, high = rubric.confidence.scale
        _scale(
            rubric.confidence.label,
            list(range(low, high + 1)),
            saved.confidence if saved else None,
            key=f"{key}-confidence",
        )
        st.multiselect(
            "Flags",
            [f.key for f in rubric.flags],
            default=saved.flags if saved else [],
            format_func={f.key: f.label for f in rubric.flags}.get,
            key=f"{key}-flags",
        )
        st.text_area("Comment", saved.comment if saved else "", key=f"{key}-comment")
        submit, draft = st.columns([1, 1])
        submitted = submit.form_submit_button(SUBMIT_LABEL, type="primary", key=f"{key}-submit")
        kept = draft.form_submit_button(DRAFT_LABEL, key=f"{key}-draft")
    if not (submitted or kept):
        return None, {}
    answers = _answers(view, key)
    if submitted and answers["verdict"] is None:
        st.error("Choose an overall verdict.")
        return None, {}
    return ("submit" if submitted else "draft"), answers


def turn_note_form(view: AssignmentView, transcript, user) -> None:
    """Flag or comment one turn of a transcript; the expert's notes are listed below."""
    from itsmreview.db import session_scope
    from itsmreview.review.ratings.expert_view import turn_notes_of_assignment
    from itsmreview.review.ratings.service import add_turn_note

    key = f"note-{view.assignment.id}-{transcript.id}"
    with st.form(key, clear_on_submit=True):
        cols = st.columns([1, 2, 4])
        turn = cols[0].number_input("Turn", 1, max(transcript.n_turns, 1), 1, key=f"{key}-turn")
        flag = cols[1].selectbox(
            "Flag",
            [None, *[f.key for f in view.rubric.flags]],
            format_func=lambda k: (
                "(none)" if k is None else {f.key: f.label for f in view.rubric.flags}[k]
            ),
            key=f"{key}-flag",
        )
        comment = cols[2].text_input("Comment on this turn", key=f"{key}-comment")
        sent = st.form_submit_button("Add note")
    if sent:
        perform(
            add_turn_note,
            actor=user,
            assignment_id=view.assignment.id,
            transcript_id=transcript.id,
            turn=int(turn),
            flag=flag,
            comment=comment,
        )
    with session_scope() as session:
        notes = turn_notes_of_assignment(session=session, assignment_id=view.assignment.id)
    notes = notes[notes["transcript"] == transcript.external_id]
    if len(notes):
        text_table(
            notes[["turn", "flag", "comment"]], {"turn": "Turn", "flag": "Flag", "comment": "Note"}
        )


def proposal_form(view: AssignmentView, user) -> None:
    """Propose another acceptable end state of the task; the expert's proposals are listed."""
    from itsmreview.review.repair.service import propose_resolution

    mine = view.proposals
    title = "Another acceptable resolution?" + (f" ({len(mine)} proposed)" if mine else "")
    with st.expander(title):
        st.caption(
            "If a practitioner could end this task in another way that is also right, "
            "describe that end state; a lead can add it to the task's next version."
        )
        with st.form(f"proposal-{view.assignment.id}", clear_on_submit=True, border=False):
            text = st.text_area(
                "Other acceptable end state",
                key=f"proposal-{view.assignment.id}-text",
                placeholder="e.g. Closing INC_003 as a duplicate of INC_001 is also correct",
            )
            sent = st.form_submit_button("Propose")
        if sent and (
            perform(
                propose_resolution,
                actor=user,
                assignment_id=view.assignment.id,
                description=text,
            )
            is not FAILED
        ):
            announce("Proposal sent to the leads.")
            st.rerun()
        for proposal in mine:
            st.markdown(f"- *{proposal.status}*: {literal(proposal.description)}")


def finding_form(view: AssignmentView, user) -> None:
    """Report what is wrong with the task, in the taxonomy, pointing at the evidence."""
    from itsmreview.review.ratings.findings import SEVERITIES, TASK_FIELDS, TAXONOMY, add_finding

    with st.expander("Report a finding"):
        st.caption(
            "Something wrong with the task itself (its instructions, its expected end state, "
            "its simulated actors)? Name the kind, how serious, and where it shows; the "
            "panel decides whether it stands, and exports carry it."
        )
        places: dict[str, dict] = {
            f"the task's {name}": {"kind": "task_field", "field": name} for name in TASK_FIELDS
        }
        longest = max((len(s) for s in view.source_sequences), default=0)
        places |= {
            f"step {n} of the source variant": {"kind": "variant_step", "step": n}
            for n in range(1, longest + 1)
        }
        for transcript in view.transcripts:
            places |= {
                f"turn {n} of {transcript.external_id}": {
                    "kind": "transcript_turn",
                    "transcript": transcript.external_id,
                    "turn": n,
                }
                for n in range(1, transcript.n_turns + 1)
            }
        key = f"finding-{view.assignment.id}"
        with st.form(key, clear_on_submit=True, border=False):
            category = st.selectbox(
                "Kind", list(TAXONOMY), format_func=lambda k: TAXONOMY[k][0], key=f"{key}-kind"
            )
            severity = st.radio("Severity", SEVERITIES, horizontal=True, key=f"{key}-severity")
            where = st.multiselect("Where it shows", list(places), key=f"{key}-where")
            text = st.text_area("What is wrong", key=f"{key}-text")
            sent = st.form_submit_button("Report the finding")
        if sent and (
            perform(
                add_finding,
                actor=user,
                category=category,
                severity=severity,
                description=text,
                anchors=[places[w] for w in where],
                task_version_id=view.version.id,
            )
            is not FAILED
        ):
            announce("Finding reported; the panel decides whether it stands.")
            st.rerun()


def findings_panel(view: AssignmentView, user) -> None:
    """The open findings others reported on this task, each with the expert's vote: it
    stands, or it does not (with a reason). Enough agreeing votes settle it."""
    from itsmreview.db import session_scope
    from itsmreview.review.ratings.findings import (
        TAXONOMY,
        anchor_text,
        findings_to_vote,
        vote_on_finding,
    )

    with session_scope() as session:
        found = findings_to_vote(session=session, actor=user, task_version_id=view.version.id)
    if not found:
        return
    with st.expander(f"Findings to judge ({len(found)})", expanded=True):
        st.caption(
            "Other experts found these wrong with the task. Does each stand? Three or more "
            "votes of which three quarters agree settle it; a lead decides a split panel."
        )
        for finding in found:
            label = TAXONOMY.get(finding["category"], (finding["category"],))[0]
            where = "; ".join(anchor_text(a) for a in finding["anchors"])
            st.markdown(
                f"**{literal(label)}** ({finding['severity']}): "
                f"{literal(finding['description'])}  \n*Where:* {literal(where)}"
            )
            key = f"vote-{finding['id']}"
            reason = st.text_input("Why it does not stand (needed against)", key=f"{key}-why")
            left, right = st.columns(2)
            verdict = None
            if left.button("It stands", key=f"{key}-yes"):
                verdict = True
            if right.button("It does not stand", key=f"{key}-no"):
                verdict = False
            if verdict is not None:
                voted = perform(
                    vote_on_finding,
                    actor=user,
                    finding_id=finding["id"],
                    stands=verdict,
                    reason=reason,
                )
                if voted is not FAILED:
                    settled = voted["state"]
                    announce(
                        "Vote recorded."
                        + ("" if settled == "open" else f" The panel has {settled} the finding.")
                    )
                    st.rerun()
