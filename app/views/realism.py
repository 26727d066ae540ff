"""Page: simulator realism, a simulator's mapped transcripts against the log they imitate."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.errors import ItsmReviewError
from itsmreview.realism.blind_tests import blind_reports, close_blind_test, create_blind_test
from itsmreview.realism.service import (
    mapped_sequences,
    role_values,
    simulator_report,
    simulators,
    transcript_messages,
)
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.cache import cached
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal
from itsmreview.ui.transcript import render_transcript
from itsmreview.ui.words import MISSING

LABELS = {
    "ping_pong_rate": "Ping-pong rate",
    "reassignments_per_case": "Reassignments per case",
    "wait_user_rate": "Wait-user rate",
    "wait_user_per_case": "Wait-user count per case",
    "cancel_rate": "Cancel rate",
    "reopen_rate": "Reopen rate",
    "no_reply_closure_rate": "Closed with no reply",
    "case_length": "Case length (events)",
    "fitness": "Fitness to the log's model",
}
VERDICT_COLOURS = {"inside": "background-color: #d8f0d8", "beyond": "background-color: #f6d2d2"}

user = require(Role.lead)
st.title("Simulator realism")
st.write(
    "How each simulator's conversations behave against the real cases of the log they "
    "imitate: every figure with its 95% interval, and the **noise floor**, the same figure "
    "between as many random real cases and the rest. Green: the gap lies inside the floor; "
    "red: the simulator departs from the log more than the log departs from itself."
)
found = cached(simulators)(user)
if not found:
    st.info(
        "No simulator is mapped yet. Map the transcripts of the task set to the log's events "
        "with a mapping spec: `itsmreview realism map --spec demo-itsm` (docs/realism.md)."
    )
    st.stop()

choices = {f"{row['simulator']} · {row['spec']} v{row['spec_version']}": row for row in found}
picked = choices[st.selectbox("Simulator and mapping spec", list(choices), key="realism-sim")]
ALL = "All personas"
WHOLE = "Every real case"
try:
    report = cached(simulator_report)(user, simulator=picked["simulator"], spec=picked["spec"])
    left, right = st.columns(2)
    persona = left.selectbox(
        "Transcripts of the tasks of", [ALL, *report["personas"]], key="realism-persona"
    )
    values = cached(role_values)(user, log=report["log"])
    choices = {WHOLE: None} | {
        f"{attribute} = {value} ({cases:,} cases)": (attribute, value)
        for attribute, found in values.items()
        for value, cases in found
        if cases >= 2
    }
    role = choices[
        right.selectbox(
            "Real cases in which this role of the log takes part",
            list(choices),
            key="realism-role",
            help="A team or level of the log: an L2 persona beside the log's L2 cases.",
        )
    ]
    if persona != ALL or role is not None:
        report = cached(simulator_report)(
            user,
            simulator=picked["simulator"],
            spec=picked["spec"],
            persona=None if persona == ALL else persona,
            role=role,
        )
except (ItsmReviewError, ValueError) as exc:
    st.error(literal(str(exc)))
    st.stop()


def _number(kind: str, value: float) -> str:
    return f"{value:.1%}" if kind == "rate" else f"{value:.2f}"


def _interval(kind: str, pair: list[float]) -> str:
    return f"{_number(kind, pair[0])} to {_number(kind, pair[1])}"


rows = []
for key, label in LABELS.items():
    if key not in report["metrics"]:
        continue
    item = report["metrics"][key]
    if not item["available"]:
        rows.append({"Metric": label, "Verdict": "n/a", "Why not": item["reason"]})
        continue
    kind = item["kind"]
    rows.append(
        {
            "Metric": label,
            "Real": _number(kind, item["real"]["value"]),
            "Real 95%": _interval(kind, item["real"]["interval"]),
            "Simulated": _number(kind, item["simulated"]["value"]),
            "Simulated 95%": _interval(kind, item["simulated"]["interval"]),
            "Gap": f"{item['gap']:+.1%}" if kind == "rate" else f"{item['gap']:+.2f}",
            "Gap 95%": _interval(kind, item["gap_interval"]),
            "Noise floor": _number(kind, item["noise_floor"]),
            "Verdict": item["verdict"],
        }
    )
for key, label in (
    ("activity_distribution", "Activity distribution (JSD)"),
    ("directly_follows", "Directly-follows distribution (JSD)"),
):
    item = report[key]
    rows.append(
        {
            "Metric": label,
            "Gap": f"{item['divergence']:.3f}",
            "Noise floor": f"{item['noise_floor']:.3f}",
            "Verdict": item["verdict"],
        }
    )
table = pd.DataFrame(rows).fillna("")
scope = report["real_scope"]
real = (
    f"the {report['real_cases']:,} real cases of the {scope['matched_variants']:,} variant(s) "
    "the tasks declare"
    if scope["kind"] == "declared variants"
    else f"all {report['real_cases']:,} real cases ({scope['reason']})"
)
if report["role"]:
    real += (
        f"; of the {scope['role_cases']:,} cases in which {report['role']['attribute']} = "
        f"{report['role']['value']} takes part"
    )
beyond = int((table["Verdict"] == "beyond").sum())
st.subheader(
    f"{beyond} of {int(table['Verdict'].isin(['inside', 'beyond']).sum())} figures beyond the floor"
)
st.caption(
    literal(
        f"{report['simulated_cases']:,} of {report['transcripts']:,} transcripts with events, "
        f"against {report['log']} v{report['log_version']}: {real}. Floor: "
        f"{report['floor_sample']:,} random real cases against the rest."
    )
)
st.dataframe(
    table.style.map(lambda v: VERDICT_COLOURS.get(v, ""), subset=["Verdict"]),
    hide_index=True,
    placeholder=MISSING,
)

st.subheader("Where the behaviour differs")
kind = st.radio(
    "Distribution",
    ["Activities", "Directly-follows pairs"],
    horizontal=True,
    key="realism-distribution",
)
item = report["activity_distribution" if kind == "Activities" else "directly_follows"]
keys = list(item["real"])
figure = go.Figure(
    [
        go.Bar(name="Real cases", y=keys, x=[item["real"][k] for k in keys], orientation="h"),
        go.Bar(name="Simulated", y=keys, x=[item["simulated"][k] for k in keys], orientation="h"),
    ]
)
figure.update_layout(
    barmode="group",
    height=max(320, 22 * len(keys) + 120),
    xaxis_tickformat=".0%",
    xaxis_title="share of events" if kind == "Activities" else "share of pairs",
    yaxis={"autorange": "reversed"},
    margin={"l": 10, "r": 10, "t": 30, "b": 10},
    legend={"orientation": "h"},
)
st.plotly_chart(figure)
if item["only_simulated"]:
    st.caption(literal("Never in the log: " + ", ".join(item["only_simulated"])))

st.subheader("Mapped transcripts")
st.caption(
    literal(
        f"Spec {report['spec']['name']} v{report['spec']['version']}: "
        f"{report['mapped_share']:.0%} of {report['units']:,} turns matched a rule."
    )
)
sequences = cached(mapped_sequences)(
    user, simulator=picked["simulator"], spec=picked["spec"], limit=200
)
names = [f"{s['task']} · {s['transcript']} ({len(s['events'])} events)" for s in sequences]
index = st.selectbox(
    "Transcript", range(len(names)), format_func=names.__getitem__, key="realism-transcript"
)
chosen = sequences[index]
with session_scope() as session:
    messages = transcript_messages(
        session=session, actor=user, transcript_id=chosen["transcript_id"]
    )
left, right = st.columns(2)
with left:
    st.markdown("**Transcript**")
    render_transcript(messages, key=f"realism-t-{chosen['transcript_id']}")
with right:
    st.markdown("**Events the spec made of it**")
    if chosen["events"]:
        events = pd.DataFrame(chosen["events"])[["turn", "activity", "group", "rule"]]
        show_table(events, {"group": "Team", "rule": "Rule"})
    else:
        st.info("No rule made an event of this transcript.")
    if chosen["unmapped"]:
        turns = ", ".join(str(turn) for turn, _ in chosen["unmapped"])
        st.caption(f"Turns no rule matched: {turns}")

st.subheader("Blind test by experts")
st.caption(
    "Experts see shuffled fragments, windows of real cases and simulated cases of the same "
    "length, teams renamed, no labels, and say which are simulated. d' near 0 and a large p: "
    "they cannot tell; d' of 1 or more: they can."
)
tests = cached(blind_reports)(user, simulator=picked["simulator"])
if tests:
    rows = []
    for test in tests:
        overall = test["overall"]
        interval = overall["d_prime_interval"]
        rows.append(
            {
                "Test": test["name"],
                "State": test["state"],
                "Fragments": test["fragments"],
                "Experts": test["experts"],
                "Answers": overall["answers"],
                "Accuracy": "-" if overall["accuracy"] is None else f"{overall['accuracy']:.0%}",
                "d'": "-" if overall["d_prime"] is None else f"{overall['d_prime']:.2f}",
                "d' 95%": "-" if interval is None else f"{interval[0]:.2f} to {interval[1]:.2f}",
                "p (vs chance)": "-" if overall["p_value"] is None else f"{overall['p_value']:.3f}",
            }
        )
    show_table(pd.DataFrame(rows))
    still_open = [t["name"] for t in tests if t["state"] == "open"]
    if still_open:
        closing = st.selectbox("Open test", still_open, key="realism-blind-close")
        clicked = st.button("Close it and record the result", key="realism-blind-close-button")
        if clicked and perform(close_blind_test, actor=user, name=closing) is not FAILED:
            st.toast(literal(f"{closing} closed; its result is in the ledger"))
            st.rerun()
with st.form("realism-blind-new"):
    test_name = st.text_input(
        "Name of a new blind test", value=f"{picked['simulator']} blind {len(tests) + 1}"
    )
    size = st.number_input("Fragments (half real, half simulated)", 4, 400, 40, step=2)
    if st.form_submit_button("Open a blind test"):
        created = perform(
            create_blind_test,
            actor=user,
            name=test_name,
            simulator=picked["simulator"],
            spec=picked["spec"],
            fragments=int(size),
        )
        if created is not FAILED:
            st.toast(literal(f"{test_name} is open: experts find it on their Blind test page"))
            st.rerun()
