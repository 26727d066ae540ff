"""Page: coverage of a log (variants, pairs, activities, roles, outcomes) by the tasks; gaps."""

import pandas as pd
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.catalog.task_list import personas_and_tracks
from itsmreview.coverage.across_logs import benchmark_coverage
from itsmreview.coverage.overview import log_overview
from itsmreview.db import session_scope
from itsmreview.ui.auth import require
from itsmreview.ui.cache import background_note, in_background
from itsmreview.ui.charts import NO_TOOLBAR
from itsmreview.ui.coverage import (
    BENCHMARK_FIGURES,
    COLUMNS,
    benchmark_heatmap,
    df_map,
    gap_tables,
    outcome_bars,
    pareto,
    role_bars,
)
from itsmreview.ui.links import tasks_link
from itsmreview.ui.logs import logs_or_stop
from itsmreview.ui.tables import show_table

user = require(Role.lead)
st.title("Coverage")
names = logs_or_stop("No event log imported yet: `itsmreview log import PATH --preset bpi2013`.")
ALL = "(all)"
with session_scope() as session:
    personas, tracks = personas_and_tracks(session=session)
left, middle, right, last = st.columns([2, 1.2, 1.2, 1.4])
name = left.selectbox("Event log", names)
persona = middle.selectbox("Persona", [ALL, *personas], key="coverage-persona")
track = right.selectbox("Track", [ALL, *tracks], key="coverage-track")
task_filter = last.segmented_control("Tasks", ["all", "rated", "approved"], default="all")
with session_scope() as session:
    view = log_overview(
        session=session,
        actor=user,
        name=name,
        task_filter=task_filter or "all",
        persona=None if persona == ALL else persona,
        track=None if track == ALL else track,
    )
if persona != ALL:
    tasks_link(f"Open the tasks of {persona}", persona=persona)
report, log = view.report, view.log
if report is None:
    st.info(
        f"Coverage of {log.name} by {task_filter or 'all'} tasks is being computed in the "
        "background (a large catalog takes a while); reload the page in a moment."
    )
    st.stop()
if not view.current:
    st.caption(
        f"Figures as of {view.computed_at:%Y-%m-%d %H:%M:%S} UTC; the catalog or its ratings "
        "have changed since and newer figures are being computed in the background."
    )
kpis = st.columns(5)
kpis[0].metric("Tasks", report.tasks)
kpis[1].metric(
    "Variant coverage",
    f"{report.variant_coverage:.1%}",
    help="Share of the log's cases whose variant a task declares.",
)
kpis[2].metric(
    "Collapsed variants",
    f"{report.variant_coverage_collapsed:.1%}",
    help="The same with consecutive repeats of an activity folded into one.",
)
kpis[3].metric(
    "Directly-follows",
    f"{report.df_coverage:.1%}",
    help="Share of DF occurrences whose pair occurs in a task's sequence.",
)
kpis[4].metric(
    "Activities",
    f"{report.activity_coverage:.1%}",
    help="Share of events whose activity occurs in a task's sequence.",
)
reach = report.gaps["greedy_tasks_to_reach"]
st.caption(
    f"{log.n_cases:,} cases, {log.n_events:,} events, {log.n_variants:,} variants. "
    "More tasks needed, each covering the next most frequent uncovered variant: "
    + ", ".join(f"{k}: {'unreachable' if v is None else v}" for k, v in reach.items())
    + (
        f". Task mix vs. log mix (Jensen-Shannon, collapsed variants): "
        f"{report.js_divergence:.2f} bits"
        if report.js_divergence is not None
        else ""
    )
)
names = ["Variants", "Gaps", "Roles", "Directly-follows map", "Activities"]
# only the open tab is drawn (a tab change reruns the page): the map and tables of the others
# cost more than the whole of the rest of the page
tabs = st.tabs(
    [*names, "Outcomes"] if report.outcomes else names, key="coverage-tab", on_change="rerun"
)
if tabs[0].open:
    with tabs[0]:
        st.plotly_chart(pareto(view.variants), key="pareto", config=NO_TOOLBAR)
        st.caption(
            "Green bars: variants a task declares; the line is the cumulative share of cases."
        )
        table = view.variants.head(500).assign(sequence=lambda f: f["sequence"].map(" → ".join))
        show_table(
            table[["rank", "case_count", "share", "covered", "length", "sequence"]],
            COLUMNS,
            column_config={"Share of cases": st.column_config.NumberColumn(format="percent")},
        )
if tabs[1].open:
    with tabs[1]:
        gap_tables(view)
if tabs[2].open:
    with tabs[2]:
        role_bars(report.role_coverage, view.role_values, report.gaps["role_values"])
if tabs[3].open:
    with tabs[3]:
        st.graphviz_chart(df_map(view.df_pairs))
        st.caption("Green edges occur in a task's sequence; edge width grows with frequency.")
if tabs[4].open:
    with tabs[4]:
        show_table(view.activities, COLUMNS)
if report.outcomes and tabs[5].open:
    with tabs[5]:
        outcome_bars(report.outcomes)

# over every log and persona: computed only once the section is open
across = st.expander(
    "Across logs and personas (the whole benchmark)", key="open-across", on_change="rerun"
)
if across.open:
    with across:
        weight = st.radio(
            "Logs weigh in the benchmark total",
            ["events", "equal"],
            horizontal=True,
            format_func={"events": "by their events", "equal": "equally"}.get,
            key="across-weight",
        )
        shown = in_background(benchmark_coverage)(
            user,
            weight=weight,
            task_filter=task_filter or "all",
            track=None if track == ALL else track,
        )
        background_note(shown, "Coverage across logs")
        if shown.value is not None:
            chosen = st.selectbox(
                "Figure",
                list(BENCHMARK_FIGURES),
                format_func=BENCHMARK_FIGURES.get,
                key="across-figure",
            )
            st.plotly_chart(benchmark_heatmap(shown.value, chosen), key="across", config=NO_TOOLBAR)
            st.caption(
                "Variant coverage of each persona's tasks on each log, and the benchmark's "
                "weighted total (or the figure chosen above); the number in brackets counts the "
                "tasks. Pale cells are the personas thin on a log; a blank one, a log without "
                "that figure (teams: no team mapping)."
            )
            outcomes = shown.value["total"].get("outcomes") or {}
            if outcomes:
                show_table(
                    pd.DataFrame(
                        [
                            {
                                "outcome": o,
                                **{
                                    n: shown.value["logs"][n]["outcomes"].get(o)
                                    for n in shown.value["logs"]
                                },
                                "benchmark": v,
                            }
                            for o, v in outcomes.items()
                        ]
                    ),
                    {"outcome": "Outcome coverage", "benchmark": "Benchmark"},
                )
