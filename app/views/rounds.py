"""Page: review rounds (leads): open one over a filter of tasks, admit experts, move or
release assignments, close it. Every action is a service call with its ledger entry."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.catalog.task_list import declared_variants, filter_choices, task_filters
from itsmreview.db import session_scope
from itsmreview.review.rounds.assignment import close_round, release_assignment
from itsmreview.review.rounds.service import (
    MAX_NAMED_TASKS,
    admit_experts,
    expert_names,
    open_round,
    preview_round,
    reassign_to,
    round_assignments,
    round_member_names,
    rounds_overview,
)
from itsmreview.review.rubrics.service import PRESETS, load_rubric
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.cache import cached
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import readable
from itsmreview.ui.text import literal
from itsmreview.ui.words import MISSING

user = require(Role.lead)
SHOWN_ASSIGNMENTS = 200


st.title("Review rounds")
rounds = cached(rounds_overview)(user)  # per state of the ledger: each change writes to it
with session_scope() as session:
    experts = expert_names(session=session, actor=user)
    choices = filter_choices(session=session, actor=user)
    variants = declared_variants(session=session, actor=user)


if rounds.empty:
    st.info("No review round yet: open the first one under New round.")
else:
    shown = rounds.assign(
        rubric=rounds.rubric + " v" + rounds.rubric_version.astype(str),
        members=rounds.members.map(lambda n: f"{n} admitted" if n else "every expert"),
        rated=[f"{s} of {a}" for s, a in zip(rounds.submitted, rounds.assigned, strict=True)],
    )[["name", "status", "k", "rubric", "tasks", "members", "rated", "created_at", "closed_at"]]
    st.dataframe(
        readable(
            shown,
            {
                "name": "Round",
                "status": "Status",
                "k": "Experts per task",
                "rubric": "Rubric",
                "tasks": "Tasks",
                "members": "Experts",
                "rated": "Ratings in",
                "created_at": "Opened (UTC)",
                "closed_at": "Closed (UTC)",
            },
        ),
        hide_index=True,
        placeholder=MISSING,
    )

new_tab, manage_tab = st.tabs(["New round", "Manage a round"])

with new_tab:
    generation = st.session_state.setdefault("rounds-form", 0)  # a new form after each round

    def key(name: str) -> str:
        return f"rounds-{name}-{generation}"

    st.caption("Choose the tasks: every filter left empty takes every task.")
    row = st.columns(4)
    statuses = row[0].multiselect(
        "Status",
        choices["status"],
        default=["draft"] if "draft" in choices["status"] else [],
        key=key("status"),
        help="draft: never in a review round",
    )
    personas = row[1].multiselect("Persona", choices["persona"], key=key("persona"))
    tracks = row[2].multiselect("Track", choices["track"], key=key("track"))
    variant = row[3].selectbox(
        "Source variant",
        [None, *variants],
        format_func=lambda v: "any" if v is None else variants[v],
        key=key("variant"),
    )
    row = st.columns(4)
    text = row[0].text_input("Id or title contains", key=key("text"))
    difficulties = row[1].multiselect("Difficulty", choices["difficulty"], key=key("difficulty"))
    user_types = row[2].multiselect(
        "Simulated user type", choices["user_type"], key=key("user_type")
    )
    picked = row[3].text_area(
        "Only these task ids",
        key=key("ids"),
        height=68,
        help="One per line; empty: every task the filters select",
    )
    picked_ids = [line.strip() for line in picked.splitlines() if line.strip()]
    if len(picked_ids) > MAX_NAMED_TASKS:
        st.error(
            f"{len(picked_ids):,} task ids pasted; paste at most {MAX_NAMED_TASKS:,}, or "
            "choose the tasks by their status, persona, track or text."
        )
        st.stop()
    filters = task_filters(
        personas=personas,
        tracks=tracks,
        statuses=statuses,
        text=text,
        variant_key=variant,
        difficulties=difficulties,
        user_types=user_types,
        external_ids=picked_ids,
    )
    preview = cached(preview_round)(user, filters=filters)
    if preview.matching == 0:
        st.warning("No task matches these filters.")
    else:
        busy = (
            f" {preview.in_open_rounds} of them are in an open round already and would be "
            "rated in both."
            if preview.in_open_rounds
            else ""
        )
        st.markdown(
            f"**{preview.matching} task(s)** match; the round takes the newest version of "
            f"each.{busy}"
        )
        st.dataframe(
            readable(
                preview.rows[["id", "title", "persona", "track", "status", "version"]],
                {
                    "id": "Task",
                    "title": "Title",
                    "persona": "Persona",
                    "track": "Track",
                    "status": "Status",
                    "version": "Version",
                },
            ),
            hide_index=True,
            placeholder=MISSING,
        )
        if preview.matching > len(preview.rows):
            st.caption(f"The first {len(preview.rows)} of {preview.matching}.")
    row = st.columns([2, 1, 1])
    taken, number = set(rounds["name"]), len(rounds) + 1
    while f"Round {number}" in taken:
        number += 1
    name = row[0].text_input("Round name", value=f"Round {number}", key=key("name"), max_chars=128)
    k = row[1].number_input("Experts per task (k)", 1, 50, 3, key=key("k"))
    rubric = row[2].selectbox("Rubric", list(PRESETS), key=key("rubric"))
    members = st.multiselect(
        "Experts admitted",
        experts,
        key=key("members"),
        help="None chosen: every expert may claim the round's tasks",
    )
    with st.expander("Approval gate (defaults unless set)"):
        gate_row = st.columns(3)
        gate = {
            "k_min": gate_row[0].number_input(
                "Human ratings a task needs",
                1,
                50,
                value=None,
                key=key("k_min"),
                placeholder="k",
            ),
            "dimension_min": gate_row[1].number_input(
                "Median each gating dimension must reach",
                0.0,
                100.0,
                value=None,
                step=0.5,
                key=key("dimension_min"),
                placeholder="4",
            ),
            "alpha_min": gate_row[2].number_input(
                "Round alpha each gating dimension must reach",
                -1.0,
                1.0,
                value=None,
                step=0.05,
                key=key("alpha_min"),
                placeholder="0.667",
            ),
        }
    if st.button(
        f"Open round over {preview.matching} task(s)",
        type="primary",
        disabled=preview.matching == 0 or not name.strip(),
        key=key("open"),
    ):
        opened = perform(
            open_round,
            actor=user,
            name=name,
            rubric=load_rubric(rubric),
            filters=filters,
            k=int(k),
            members=members,
            gate={setting: value for setting, value in gate.items() if value is not None},
        )
        if opened is not FAILED:
            review_round, size = opened
            st.session_state["rounds-form"] = generation + 1
            st.session_state["rounds-chosen"] = review_round.name
            announce(f"Round {literal(review_round.name)} opened over {size} task(s).")
            st.rerun()

with manage_tab:
    if rounds.empty:
        st.caption("Open a round first.")
        st.stop()
    names = list(rounds["name"])
    if st.session_state.get("rounds-chosen") not in names:
        st.session_state["rounds-chosen"] = names[0]
    chosen = st.selectbox("Round", names, key="rounds-chosen")
    status = rounds.set_index("name").at[chosen, "status"]
    with session_scope() as session:
        current = round_member_names(session=session, actor=user, round_name=chosen)
        holding = round_assignments(
            session=session, actor=user, round_name=chosen, limit=SHOWN_ASSIGNMENTS + 1
        )

    st.subheader("Experts")
    admitted = st.multiselect(
        "Experts admitted to the round",
        sorted(set(experts) | set(current)),
        default=current,
        key=f"rounds-members-{chosen}",
        help="None chosen: every expert may claim the round's tasks. A removed expert's "
        "open reservations are released.",
    )
    if st.button("Save experts", disabled=set(admitted) == set(current)):
        saved = perform(admit_experts, actor=user, round_name=chosen, usernames=admitted)
        if saved is not FAILED:
            announce(
                f"{len(saved)} expert(s) admitted to {literal(chosen)}."
                if saved
                else f"Every expert may now claim tasks of {literal(chosen)}."
            )
            st.rerun()

    st.subheader("Open assignments")
    if holding.empty:
        st.caption("No reservation is open in this round.")
    else:
        st.dataframe(
            readable(
                holding.head(SHOWN_ASSIGNMENTS)[["assignment", "expert", "task", "reserved_until"]],
                {
                    "assignment": "Assignment",
                    "expert": "Expert",
                    "task": "Task",
                    "reserved_until": "Reserved until (UTC)",
                },
            ),
            hide_index=True,
            placeholder=MISSING,
        )
        if len(holding) > SHOWN_ASSIGNMENTS:
            holding = holding.head(SHOWN_ASSIGNMENTS)
            st.caption(f"The first {SHOWN_ASSIGNMENTS} by expert; the Dashboard lists them all.")
        labels = {
            int(r.assignment): f"#{r.assignment} · {r.expert} · {r.task}"
            for r in holding.itertuples()
        }
        row = st.columns([3, 2, 1, 1], vertical_alignment="bottom")
        picked_assignment = row[0].selectbox(
            "Assignment", list(labels), format_func=labels.get, key="rounds-assignment"
        )
        holder = holding.set_index("assignment").at[picked_assignment, "expert"]
        to = row[1].selectbox(
            "Hand it to", [e for e in experts if e != holder], key="rounds-reassign-to"
        )
        if row[2].button("Reassign", disabled=to is None):
            moved = perform(
                reassign_to, actor=user, assignment_id=int(picked_assignment), username=to
            )
            if moved is not FAILED:
                announce(f"Assignment {picked_assignment} handed to {literal(to)}.")
                st.rerun()
        if row[3].button("Release", help="Give the place back: another expert may claim it"):
            released = perform(release_assignment, actor=user, assignment_id=int(picked_assignment))
            if released is not FAILED:
                announce(f"Assignment {picked_assignment} released.")
                st.rerun()

    st.subheader("Close")
    if status != "open":
        st.caption(f"{literal(chosen)} is closed.")
    else:
        sure = st.checkbox(
            f"Close {literal(chosen)}: no more claims or ratings; open reservations are released",
            key=f"rounds-close-sure-{chosen}",
        )
        if st.button("Close round", disabled=not sure):
            closed = perform(close_round, actor=user, round_name=chosen)
            if closed is not FAILED:
                announce(f"Round {literal(chosen)} closed.")
                st.rerun()
