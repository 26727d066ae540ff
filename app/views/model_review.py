"""Page: model review, a Claude model rating a round beside the experts, and how far it agrees."""

import json

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.errors import ItsmReviewError
from itsmreview.review.assist import client as model_client
from itsmreview.review.assist.hints import (
    draft_gap_hints,
    estimated_hint_tokens,
    hints_markdown,
    plan_gap_hints,
)
from itsmreview.review.assist.models import ModelRunStatus
from itsmreview.review.assist.prompts import HINTS_PROMPT, RATE_PROMPT, prompt_text
from itsmreview.review.assist.rater import (
    cancel_model_review,
    is_stale,
    model_runs,
    plan_model_review,
    review_rounds,
    start_model_review,
)
from itsmreview.settings import get_settings
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.cache import cached
from itsmreview.ui.logs import logs_or_stop
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal
from itsmreview.worker import start_model_review_run

user = require(Role.lead)
settings = get_settings()
st.title("Model review")
st.write(
    "A model rates the round's tasks on the round's rubric from the material an expert sees, "
    "as a rater of its own: its ratings never count among a task's human ratings, in the human "
    "alpha or in the gate. The Dashboard then compares it with the experts, per rubric item."
)
keyed = model_client.configured(settings)
if not keyed:
    st.info(literal(model_client.HOW_TO_ENABLE))
with session_scope() as session:
    rounds = review_rounds(session=session, actor=user)
if not rounds:
    st.info("No review round yet. `itsmreview demo` creates one.")
    st.stop()


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


left, middle, right = st.columns(3)
round_name = left.selectbox("Round", rounds, key="model-round")
model = middle.text_input("Model", value=settings.model, key="model-name").strip()
limit = right.number_input(
    "Tasks at most (0: all)", min_value=0, value=0, step=10, key="model-limit"
)
try:  # the same until a rating, decision or import appends to the ledger
    plan = cached(plan_model_review)(
        user, round_name=round_name, model=model or None, limit=int(limit) or None
    )
except ItsmReviewError as exc:
    st.error(literal(str(exc)))
    st.stop()
tiles = st.columns(4)
tiles[0].metric("Tasks to rate", f"{len(plan.to_rate):,}")
tiles[1].metric("Rated before", f"{plan.already_rated:,}", help="by this model and prompt")
tiles[2].metric(
    "Estimated tokens",
    f"{plan.estimated_input_tokens + plan.estimated_output_tokens:,}",
    help=f"{plan.estimated_input_tokens:,} input, {plan.estimated_output_tokens:,} output, "
    "estimated from the material of the first tasks",
)
tiles[3].metric(
    "Estimated cost",
    _money(plan.estimated_cost_usd),
    help="at the listed price of the model"
    if plan.price
    else "no listed price: set ITSMREVIEW_MODEL_PRICE_INPUT and ITSMREVIEW_MODEL_PRICE_OUTPUT",
)
with st.expander("What will be sent"):
    st.caption(
        f"To {literal(model_client.endpoint())}, one request per task: the prompt, the rating "
        "tool generated from the rubric (the only tool, forced), and the task's material: "
        "instruction, environment, ground truth, verifier, transcripts and the source "
        "variants' statistics. No rating of any expert is sent."
    )
    st.text(prompt_text(RATE_PROMPT))
    if plan.sample_request:
        st.code(json.dumps(plan.sample_request["tools"][0], indent=2), language="json")
        st.text(plan.sample_request["messages"][0]["content"])
start = st.button(
    f"Start the model review of {len(plan.to_rate):,} task(s)",
    type="primary",
    disabled=not keyed or not plan.to_rate,
    help=None if keyed else "Needs ANTHROPIC_API_KEY",
)
if start:
    run = perform(
        start_model_review,
        actor=user,
        round_name=round_name,
        model=model or None,
        limit=int(limit) or None,
    )
    if run is not FAILED:
        start_model_review_run(run.id)  # a worker's job, or a thread of this server
        announce(f"Model review {run.id} started.")
        st.rerun()

st.subheader("Model reviews of this round")


def _alive(runs: list[dict]) -> bool:
    return any(r["run"].status == ModelRunStatus.running and not is_stale(r["run"]) for r in runs)


with session_scope() as session:
    watching = _alive(model_runs(session=session, actor=user, round_name=round_name))


@st.fragment(run_every=2 if watching else None)  # refreshed while a review runs
def runs_panel() -> None:
    with session_scope() as session:
        runs = model_runs(session=session, actor=user, round_name=round_name)
    if watching and not _alive(runs):
        st.rerun()  # it ended: the whole page (its tiles) shows the outcome, then stays still
    if not runs:
        st.caption("None yet.")
        return
    for found in runs:
        run, failures = found["run"], found["failures"]
        stale = is_stale(run)
        state = "interrupted" if stale else str(run.status)
        done = run.rated + run.failed
        st.progress(
            min(done / run.planned, 1.0) if run.planned else 1.0,
            text=f"Review {run.id} · {literal(run.model)} · {state}: {run.rated:,} rated, "
            f"{run.failed:,} failed of {run.planned:,}; {run.input_tokens + run.output_tokens:,} "
            f"tokens, {_money(run.cost_usd)} (estimated {_money(run.estimated_cost_usd)})",
        )
        if run.error:
            st.caption(literal(run.error))
        alive = run.status == ModelRunStatus.running and not stale
        if alive and st.button("Cancel", key=f"cancel-{run.id}"):
            perform(cancel_model_review, actor=user, run_id=run.id)
            st.rerun(scope="fragment")
        if len(failures):
            with st.expander(f"Tasks without a rating in review {run.id} ({len(failures)})"):
                show_table(
                    failures,
                    {"task": "Task", "outcome": "Outcome", "reason": "Why", "created_at": "When"},
                )
    newest = runs[0]["run"]
    if plan.to_rate and (newest.status != ModelRunStatus.running or is_stale(newest)):
        st.caption("Start the review again to rate what is left: rated tasks are never resent.")


runs_panel()

st.subheader("Task hints for coverage gaps")
st.write(
    "For the most frequent variants of a log that no approved task covers, the model drafts "
    "what an author starts from: the scenario, personas and teams, the timing and friction "
    "the log shows, a task idea and its checks. Each hint is recorded in the ledger."
)
logs = logs_or_stop("No event log imported yet.", caption=True)
left, right = st.columns(2)
log_name = left.selectbox("Log", logs, key="hints-log")
top = right.number_input("Most frequent gaps", 1, 50, 5, key="hints-top")
try:
    gaps = cached(plan_gap_hints)(user, log_name=log_name, top=int(top))
except ItsmReviewError as exc:
    st.error(literal(str(exc)))
    st.stop()
tokens = estimated_hint_tokens(gaps)
st.caption(
    f"{len(gaps)} uncovered variant(s), about {tokens:,} input tokens, about "
    f"{_money(model_client.cost_of(model or settings.model, tokens, 400 * len(gaps)))}."
)
with st.expander("What will be sent"):
    st.text(prompt_text(HINTS_PROMPT))
    if gaps:
        st.text(gaps[0]["material"])
if st.button("Draft hints", disabled=not keyed or not gaps, key="hints-draft"):
    bar = st.progress(0.0, text="starting")
    hints = perform(
        draft_gap_hints,
        actor=user,
        log_name=log_name,
        top=int(top),
        model=model or None,
        progress=lambda stage, fraction: bar.progress(fraction, text=stage),
    )
    if hints is not FAILED:
        st.session_state["hints"] = hints
hints = st.session_state.get("hints") or []
if hints:
    jsonl = "".join(json.dumps(h.as_dict(), ensure_ascii=False) + "\n" for h in hints)
    left, right = st.columns(2)
    left.download_button("Download JSONL", jsonl, file_name="hints.jsonl")
    right.download_button("Download Markdown", hints_markdown(hints), file_name="hints.md")
    for found in hints:
        title = found.hint.get("title") if found.hint else f"no hint: {found.error}"
        with st.expander(f"#{found.rank} · {found.weight:.1%} of cases · {literal(title)}"):
            st.text(" -> ".join(found.sequence))
            for key, value in found.hint.items():
                st.caption(key.replace("_", " ").capitalize())
                st.text("\n".join(value) if isinstance(value, list) else value)
