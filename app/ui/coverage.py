"""Charts and tables of the Coverage page."""

import math

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st
from itsmreview.coverage.overview import LogOverview
from itsmreview.ui.charts import NO_TOOLBAR
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal

COVERED, UNCOVERED = "#2e7d32", "#9e9e9e"

COLUMNS = {
    "rank": "Rank",
    "case_count": "Cases",
    "share": "Share of cases",
    "covered": "Covered",
    "length": "Steps",
    "sequence": "Sequence",
    "weight": "Weight",
    "source": "From",
    "target": "To",
    "count": "Times",
    "attribute": "Attribute",
    "value": "Value",
    "event_count": "Events",
    "activity": "Activity",
    "task": "Task",
    "distance": "Edit distance",
}
WEIGHT_AS_PERCENT = {"Weight": st.column_config.NumberColumn(format="percent")}


def pareto(variants: pd.DataFrame, top: int = 100) -> go.Figure:
    head = variants.head(top)
    figure = go.Figure()
    figure.add_bar(
        x=head["rank"],
        y=head["case_count"],
        name="cases",
        marker_color=[COVERED if c else UNCOVERED for c in head["covered"]],
        hovertext=[" → ".join(s) for s in head["sequence"]],
    )
    figure.add_scatter(
        x=head["rank"],
        y=head["cumulative_share"],
        name="cumulative share",
        yaxis="y2",
        mode="lines",
        line_color="#1565c0",
    )
    figure.update_layout(
        height=360,
        margin={"t": 20, "b": 10},
        xaxis_title="variant rank",
        yaxis_title="cases",
        showlegend=False,
        yaxis2={
            "overlaying": "y",
            "side": "right",
            "range": [0, 1],
            "tickformat": ".0%",
            "dtick": 0.2,
        },
    )
    return figure


def gap_tables(view: LogOverview) -> None:
    gaps = view.report.gaps
    st.subheader("Most frequent uncovered variants")
    variants = pd.DataFrame(gaps["variants"])
    if not variants.empty:
        variants["sequence"] = variants["sequence"].map(" → ".join)
    show_table(variants, COLUMNS, column_config=WEIGHT_AS_PERCENT)
    left, right = st.columns(2)
    with left:
        st.subheader("Uncovered directly-follows pairs")
        show_table(pd.DataFrame(gaps["df_pairs"]), COLUMNS, column_config=WEIGHT_AS_PERCENT)
    with right:
        st.subheader("Uncovered role values")
        show_table(pd.DataFrame(gaps["role_values"]), COLUMNS, column_config=WEIGHT_AS_PERCENT)
    if view.report.absent_sequences:
        st.subheader("Declared sequences that do not occur in the log")
        for absent in view.report.absent_sequences:
            st.markdown(
                f"**{literal(', '.join(absent.task_ids))}**: "
                + literal(" → ".join(absent.sequence))
            )
            nearest = pd.DataFrame(absent.nearest)
            nearest["sequence"] = nearest["sequence"].map(" → ".join)
            show_table(nearest, COLUMNS)
    if view.unresolved_case_ids:
        st.subheader("Declared case ids not in the log")
        show_table(
            pd.DataFrame(
                [{"task": t, "case ids": ", ".join(c)} for t, c in view.unresolved_case_ids.items()]
            ),
            {**COLUMNS, "case ids": "Case ids"},
        )


def coverage_bars(shares: dict[str, float]) -> go.Figure:
    """One horizontal bar per name: its coverage, 0-100%."""
    frame = pd.DataFrame({"name": list(shares), "coverage": list(shares.values())})
    figure = px.bar(frame, x="coverage", y="name", orientation="h", range_x=[0, 1])
    figure.update_layout(
        height=80 + 36 * len(frame),
        margin={"t": 10, "b": 10},
        xaxis_tickformat=".0%",
        yaxis_title="",
    )
    return figure


def role_bars(coverage: dict[str, float], values: pd.DataFrame, gaps: list[dict]) -> None:
    if not coverage:
        st.info("The log has no role attributes; import it with --role columns.")
        return
    st.plotly_chart(coverage_bars(coverage), key="role-coverage", config=NO_TOOLBAR)
    st.caption("Share of events with a value for the attribute whose value a task declares.")
    show_table(values, COLUMNS)


BENCHMARK_FIGURES = {
    "variant_coverage": "Variant coverage",
    "variant_coverage_collapsed": "Collapsed variants",
    "df_coverage": "Directly-follows",
    "activity_coverage": "Activities",
    "team_coverage": "Teams",
}


def benchmark_heatmap(result: dict, figure_key: str = "variant_coverage") -> go.Figure:
    """Persona x log coverage of one figure (with the benchmark total as the last column);
    a blank cell: the log has no such figure (no team mapping)."""
    names = list(result["logs"])
    rows = {"All tasks": {"logs": result["logs"], "total": result["total"]}}
    rows.update(result["personas"])
    columns = [*names, "Benchmark"]
    values, texts = [], []
    for found in rows.values():
        line = [found["logs"][n][figure_key] for n in names]
        line.append(found["total"][figure_key])
        counts = [found["logs"][n]["tasks"] for n in names] + [found["total"]["tasks"]]
        values.append([float("nan") if v is None else v for v in line])
        texts.append(
            ["-" if v is None else f"{v:.0%} ({c})" for v, c in zip(line, counts, strict=True)]
        )
    figure = go.Figure(
        go.Heatmap(
            z=values,
            x=columns,
            y=list(rows),
            text=texts,
            texttemplate="%{text}",
            zmin=0,
            zmax=1,
            colorscale="Greens",
            colorbar={"title": BENCHMARK_FIGURES[figure_key].lower(), "tickformat": ".0%"},
            hovertemplate="%{y} on %{x}: %{text}<extra></extra>",
        )
    )
    figure.update_layout(
        height=120 + 34 * len(rows),
        margin={"t": 10, "b": 10},
        yaxis={"autorange": "reversed", "type": "category"},
        xaxis={"type": "category"},
    )
    return figure


OUTCOME_BARS = 15  # values shown per outcome; the rest are in the table


def outcome_bars(outcomes: dict[str, dict]) -> None:
    """Per outcome of the log's cases: its coverage, then its most frequent values as bars,
    those the tasks cover in green, and the uncovered ones by weight."""
    shares = {name: found["coverage"] for name, found in outcomes.items()}
    st.plotly_chart(coverage_bars(shares), key="outcome-coverage", config=NO_TOOLBAR)
    st.caption(
        "Share of the cases with a value whose value a task covers: through the cases the "
        "task declares (`case_ids`) or the outcomes it names (`outcomes`)."
    )
    name = st.selectbox("Outcome", list(outcomes), key="outcome-shown")
    found = outcomes[name]
    values = pd.DataFrame(
        [
            {"value": v, "cases": n, "covered": v in set(found["covered_values"])}
            for v, n in found["value_cases"].items()
        ]
    ).sort_values("cases", ascending=False)
    shown = values.head(OUTCOME_BARS)
    bars = go.Figure(
        go.Bar(
            x=shown["cases"],
            y=shown["value"].astype(str),
            orientation="h",
            marker_color=["#2e7d32" if c else "#bdbdbd" for c in shown["covered"]],
            hovertemplate="%{y}: %{x:,} cases<extra></extra>",
        )
    )
    bars.update_layout(
        height=80 + 26 * len(shown),
        margin={"t": 10, "b": 10},
        yaxis={"autorange": "reversed", "title": "", "type": "category"},
        xaxis_title="cases",
    )
    st.plotly_chart(bars, key=f"outcome-{name}", config=NO_TOOLBAR)
    gaps = pd.DataFrame(found["gaps"])
    if gaps.empty:
        st.success("Every value of this outcome is covered.")
    else:
        st.caption("Uncovered values, most frequent first: the outcomes to write tasks for.")
        show_table(
            gaps,
            {"value": "Value", "cases": "Cases", "weight": "Share of cases"},
            column_config={"Share of cases": st.column_config.NumberColumn(format="percent")},
        )


def df_map(pairs: pd.DataFrame, top: int = 60) -> str:
    """Graphviz DOT of the most frequent DF pairs, covered edges green."""
    head = pairs.head(top)
    peak = max(int(head["count"].max()), 1) if len(head) else 1

    def quote(text: str) -> str:
        return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph df {", "rankdir=LR;", 'node [shape=box, style="rounded", fontsize=10];']
    for row in head.itertuples():
        width = 0.5 + 4 * math.sqrt(row.count / peak)
        colour = COVERED if row.covered else UNCOVERED
        lines.append(
            f"{quote(row.source)} -> {quote(row.target)} [label={row.count}, "
            f'penwidth={width:.2f}, color="{colour}", fontsize=9];'
        )
    lines.append("}")
    return "\n".join(lines)
