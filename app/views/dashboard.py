"""Page: a round's dashboard for leads: statuses, agreement, adjudication, gate, expert progress."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.review.dashboard.service import dashboard
from itsmreview.review.gate.item_agreement import alpha_over_time
from itsmreview.review.gate.service import current_gate, set_gate
from itsmreview.review.repair.adjudication import adjudicate, disputed_ratings
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.authoring import authoring_section, rating_scale
from itsmreview.ui.cache import background_note, in_background
from itsmreview.ui.charts import (
    NO_TOOLBAR,
    alpha_chart,
    alpha_over_time_chart,
    bias_heatmap,
    draw,
    model_agreement_chart,
    progress_chart,
    realism_chart,
)
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import readable, show_table, text_table
from itsmreview.ui.text import literal
from itsmreview.ui.words import MISSING, prose, words

QUEUE_PAGE = 25  # tasks of the adjudication queue per page
DECIDED = "adjudicate-decided"  # set once a decision is recorded: the next run starts blank

user = require(Role.lead)
st.title("Dashboard")
with session_scope() as session:
    data = dashboard(
        session=session,
        actor=user,
        round_name=st.session_state.get("round"),
        queue_search=st.session_state.get("queue-search", ""),
        queue_page=int(st.session_state.get("queue-page", 1)) - 1,
        per_page=QUEUE_PAGE,
    )
if not data.rounds:
    st.info("No review round yet. `itsmreview demo` creates one.")
    st.stop()
if len(data.rounds) > 1:
    names = [r["name"] for r in data.rounds]
    st.selectbox("Round", names, index=names.index(data.round_name), key="round")
status = data.task_status
columns = st.columns(len(status) or 1)
for column, (label, value) in zip(columns, sorted(status.items()), strict=False):
    column.metric(words(label), value)
if not status:
    st.caption("The status counts of this round are being computed; reload in a moment.")
elif data.status_computed_at is not None:
    st.caption(
        f"Statuses as counted at {data.status_computed_at:%Y-%m-%d %H:%M:%S} UTC; decisions "
        "since are being counted in the background."
    )
if data.gate_waiting:
    st.caption(
        f"{data.gate_waiting:,} rating(s) submitted since "
        f"{data.gate_waiting_since:%H:%M:%S} UTC are still on their way to the gate: their "
        "tasks' statuses follow in a moment. If this stays, no gate worker runs: "
        "`itsmreview round apply-queued` applies them."
    )

st.subheader(f"Agreement in {literal(data.round_name)}")
frame = data.agreement_frame()
if data.agreement_computed_at is None:
    st.info(
        "Agreement of this round is being computed in the background (a large round takes "
        "a while); reload the page in a moment."
    )
elif not data.agreement_current:
    st.caption(
        f"Figures of the ratings as of {data.agreement_computed_at:%Y-%m-%d %H:%M:%S} UTC; "
        "ratings have come in since and the figures are being recomputed in the background."
    )
if data.agreement_computed_at is not None:
    draw(
        alpha_chart(frame),
        key="alpha-chart",
        empty="No rubric item has an alpha yet: it needs two ratings of one task that vary.",
    )
st.caption(
    "Krippendorff's alpha of human ratings with 95% bootstrap intervals (1,000 resamples "
    "of tasks). Reliable: 0.800; tentative conclusions: 0.667."
)
undefined = frame[frame["alpha"].isna()]
if len(undefined):
    st.caption(
        "Undefined: " + "; ".join(f"{r.item} ({r.undefined})" for r in undefined.itertuples())
    )
# a data grid costs a run 20-40 ms: those of closed expanders are drawn once opened
table = st.expander(
    "Agreement table (with Gwet's AC2 for skewed ratings)", key="open-agreement", on_change="rerun"
)
if table.open:
    table.dataframe(
        readable(
            frame.drop(columns=["key"]),
            {
                "item": "Item",
                "alpha": "Alpha",
                "ci_low": "95% low",
                "ci_high": "95% high",
                "units": "Tasks",
                "level": "Level",
                "gwet": "Gwet's AC2",
                "undefined": "Undefined because",
            },
        ),
        hide_index=True,
        placeholder=MISSING,
    )
models = data.model_frame()
if not models.empty:
    st.subheader("Humans and model raters")
    raters = sorted(models["model"].unique())
    rater = st.selectbox("Model rater", raters, key="model-rater") if len(raters) > 1 else raters[0]
    shown_models = models[models["model"] == rater]
    st.plotly_chart(model_agreement_chart(shown_models), key="model-chart", config=NO_TOOLBAR)
    st.caption(
        f"{literal(rater)}: alpha of the human ratings, of humans and the model together, and "
        "of the model against the human consensus (median; mode for the verdict and flags), "
        "with 95% bootstrap intervals. Where the model's alpha against the consensus reaches "
        "the humans' own, its judgement could stand in for an expert's on that item. Model "
        "ratings never count among a task's human ratings, in the human alpha or in the gate."
    )
    with st.expander("Model agreement table"):
        show_table(
            shown_models.drop(columns=["key", "model"]),
            {
                "item": "Item",
                "humans": "Humans",
                "humans_low": "Humans 95% low",
                "humans_high": "Humans 95% high",
                "with_models": "With model",
                "with_models_low": "With model 95% low",
                "with_models_high": "With model 95% high",
                "model_vs_consensus": "Model vs consensus",
                "model_vs_consensus_low": "Model 95% low",
                "model_vs_consensus_high": "Model 95% high",
                "tasks": "Tasks both rated",
            },
        )
# the figures below read the whole round: computed only once their expander is open
over_time = st.expander("Alpha over time", key="open-over-time", on_change="rerun")
if over_time.open and not data.agreement:
    over_time.caption("No agreement figures yet.")
elif over_time.open:
    with over_time:
        items = {a.item: a.label for a in data.agreement}
        chosen_item = st.selectbox("Item", list(items), format_func=items.get, key="over-time")
        history = in_background(alpha_over_time)(user, item=chosen_item, round_name=data.round_name)
        background_note(history, "Alpha over time")
        if history.value is not None:
            draw(
                alpha_over_time_chart(history.value),
                key="alpha-over-time",
                empty="No day has ratings of this item that give an alpha yet.",
            )
realism = st.expander("Realism by provenance and coverage", key="open-realism", on_change="rerun")
if realism.open:
    with realism:
        from itsmreview.ledger.evidence.service import realism_by_provenance

        shown = in_background(realism_by_provenance)(user, round_name=data.round_name)
        background_note(shown, "Realism by provenance")
        split = shown.value
        if split is None:
            pass
        elif split.empty:
            st.caption("No ratings in this round yet.")
        else:
            st.caption(
                "Mean human rating per dimension of tasks whose instruction, environment and "
                "verifier came mostly from the logs against the rest, and of tasks on the log's "
                "ten most frequent variants against rarer ones. If log-derived tasks rated worse, "
                "the benchmark's claim would not hold."
            )
            scale = rating_scale(data.round_name)
            for comparison in ("provenance", "coverage"):
                part = split[split["comparison"] == comparison]
                draw(
                    realism_chart(part, comparison, scale),
                    key=f"realism-{comparison}",
                    empty=f"No rated task to compare by {comparison} yet.",
                )
            show_table(split)
bias = data.bias_frame()
if not bias.empty:
    st.subheader("Rater bias")
    st.plotly_chart(bias_heatmap(bias), key="bias-heatmap", config=NO_TOOLBAR)
    st.caption(
        "Mean difference between an expert's rating and the other experts' mean on the "
        "same task. Red: stricter, blue: more lenient."
    )

authoring_section(user, data.round_name)

st.subheader("Disagreements to adjudicate")
queue = data.queue
if queue is None:
    st.info(
        "The adjudication queue of this round is being built from its tasks (once per "
        "round); reload the page in a moment."
    )
elif queue.total == 0:
    st.success("No task waits for adjudication.")
else:
    st.caption(
        f"{queue.total:,} task(s) wait for a lead, as the gate decided them"
        + (
            f" (the last came in at {queue.changed_at:%Y-%m-%d %H:%M:%S} UTC)"
            if queue.changed_at
            else ""
        )
        + (
            f"; {data.gate_waiting:,} rating(s) the gate has not applied yet may add or "
            "remove some."
            if data.gate_waiting
            else "."
        )
    )

    def _first_page() -> None:
        st.session_state["queue-page"] = 1

    search_column, page_column = st.columns([3, 1])
    search_column.text_input(
        "Find a task (id, title or reason)", key="queue-search", on_change=_first_page
    )
    pages = max(1, -(-queue.matching // QUEUE_PAGE))
    if st.session_state.get("queue-page", 1) > pages:  # the queue shrank since
        st.session_state["queue-page"] = pages
    page_column.number_input(
        f"Page (of {pages:,})", min_value=1, max_value=pages, step=1, key="queue-page"
    )
    shown = data.disagreements
    if shown.empty:
        st.caption("No waiting task matches the search.")
    else:
        text_table(  # a page of 25 rows as text: no data grid to load and draw
            shown[["external_id", "title", "reasons"]],
            {"external_id": "Task", "title": "Title", "reasons": "Why a lead decides"},
            reasons=prose,
        )
    if st.session_state.pop(DECIDED, False):
        # a decision was recorded: the box is drawn empty (its key popped instead, the browser
        # kept showing the decided task)
        st.session_state["adjudicate-task"] = None
    choice = st.selectbox(
        "Task",
        shown["task_version_id"].tolist(),
        format_func=dict(
            zip(
                shown["task_version_id"],
                shown["external_id"] + " " + shown["title"],
                strict=True,
            )
        ).get,
        index=None,
        placeholder="Choose the task you decide (from this page)",
        key="adjudicate-task",
    )
    if choice is not None:  # what the experts said, beside the decision
        with session_scope() as session:
            said = disputed_ratings(
                session=session,
                actor=user,
                task_version_id=int(choice),
                round_name=data.round_name,
            )
        st.caption(f"The task's {len(said)} current rating(s):")
        text_table(
            said,
            {c: c.capitalize() for c in ("expert", "verdict", "flags", "confidence", "comment")},
            flags=lambda flags: ", ".join(words(f) for f in flags),
        )
    # the form and its widgets belong to the chosen task: another task starts blank, never
    # with the decision or reason typed for the last one
    form = f"adjudicate-{choice if choice is not None else 'none'}"
    with st.form(form):
        decision = st.radio(
            "Decision",
            ["accept", "revise", "reject"],
            horizontal=True,
            index=None,
            key=f"{form}-decision",
        )
        reason = st.text_area("Reason (kept in the ledger)", key=f"{form}-reason")
        submitted = st.form_submit_button("Record decision", type="primary")
    if submitted and (choice is None or decision is None):
        st.error("Choose the task and your decision; nothing was recorded.")
    elif submitted:
        result = perform(
            adjudicate,
            actor=user,
            task_version_id=int(choice),
            decision=decision,
            reason=reason,
            round_name=data.round_name,
        )
        if result is not FAILED:
            for key in (f"{form}-decision", f"{form}-reason"):
                st.session_state.pop(key, None)  # recorded: the form starts blank
            st.session_state[DECIDED] = True  # and no task is chosen
            announce(f"Recorded: task is now {words(result.status).lower()}.")
            st.rerun()

with st.expander(f"Approval gate of {literal(data.round_name)}"):
    with session_scope() as session:
        gate, rubric = current_gate(session=session, round_name=data.round_name)
    agreement_now = frame.set_index("key")
    gating_now = [d for d in gate.gating_dimensions if d in agreement_now.index]
    if gating_now:
        st.caption(
            "The round's alpha on the gating dimensions now, with the lower bound of its 95% "
            f"interval; the gate asks for {gate.alpha_min:.3f}."
        )
        show_table(
            agreement_now.loc[gating_now, ["item", "alpha", "ci_low", "ci_high"]].assign(
                reaches=lambda f: f["alpha"] >= gate.alpha_min
            ),
            {"item": "Item"},
        )
    with st.form("gate"):
        left, right = st.columns(2)
        k_min = left.number_input("Human ratings a task needs", 1, value=gate.k_min)
        low, high = (
            min(d.scale[0] for d in rubric.dimensions),
            max(d.scale[1] for d in rubric.dimensions),
        )
        dimension_min = right.number_input(
            "Median each gating dimension must reach",
            float(low),
            float(high),
            # an audit round decides by its score; its scale may end below the default 4
            value=min(max(float(gate.dimension_min), float(low)), float(high)),
            step=0.5,
        )
        alpha_min = left.number_input(
            "Round alpha each gating dimension must reach",
            -1.0,
            1.0,
            value=float(gate.alpha_min),
            step=0.001,
            format="%.3f",
        )
        spread = right.number_input(
            "Rating spread that sends a task to a lead", 0.5, value=float(gate.disagreement_range)
        )
        labels = {d.key: d.label for d in rubric.dimensions}
        gating = st.multiselect(
            "Gating dimensions", list(labels), list(gate.gating_dimensions), format_func=labels.get
        )
        flag_labels = {f.key: f.label for f in rubric.flags}
        blocking = st.multiselect(
            "Blocking flags",
            list(flag_labels),
            list(gate.blocking_flags),
            format_func=flag_labels.get,
        )
        audit_mode, threshold = gate.mode, gate.threshold
        if rubric.scoring is not None:
            modes = {"audit-100": "100-point audit score", "median": "Rubric medians"}
            audit_mode = left.selectbox(
                "Decide by", list(modes), list(modes).index(gate.mode), format_func=modes.get
            )
            threshold = right.number_input(
                "Audit score a task needs (0-100)", 0.0, 100.0, float(gate.threshold), step=5.0
            )
        changed = st.form_submit_button("Apply to every task of the round")
    if changed:
        applied = perform(
            set_gate,
            actor=user,
            round_name=data.round_name,
            changes={
                "k_min": int(k_min),
                "dimension_min": dimension_min,
                "alpha_min": alpha_min,
                "disagreement_range": spread,
                "gating_dimensions": gating,
                "blocking_flags": blocking,
                **(
                    {"mode": audit_mode, "threshold": threshold}
                    if rubric.scoring is not None
                    else {}
                ),
            },
        )
        if applied is not FAILED:
            _, decisions = applied
            approved = sum(d.status == "approved" for d in decisions.values())
            announce(f"Gate applied: {approved} of {len(decisions)} tasks approved.")
            st.rerun()

st.subheader("Progress per expert")
open_list = st.expander(
    f"Open assignments ({len(data.open_assignments)})", key="open-assignments", on_change="rerun"
)
if open_list.open:
    open_list.caption("Reassign one with `itsmreview round reassign ASSIGNMENT --to EXPERT`.")
    open_list.dataframe(
        readable(
            data.open_assignments,
            {
                "assignment": "Assignment",
                "round": "Round",
                "expert": "Expert",
                "task": "Task",
                "reserved_until": "Reserved until",
            },
        ),
        hide_index=True,
        placeholder=MISSING,
    )
if data.progress_computed_at is not None:
    st.caption(
        f"Counted at {data.progress_computed_at:%Y-%m-%d %H:%M:%S} UTC; claims and submits "
        "since are being counted in the background."
    )
if data.progress.empty:
    st.caption("No assignment yet (or the counts of a large round are being made).")
else:
    progress = data.progress.assign(open=lambda f: f.assigned - f.submitted)
    st.plotly_chart(progress_chart(progress), key="progress", config=NO_TOOLBAR)
