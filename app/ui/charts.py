"""Plotly figures of the dashboard, drawn honestly on small data: every alpha with its
interval, groups too small to judge greyed, ratings on their scale, time in days, and a
sentence where there is nothing to draw."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

RELIABLE, TENTATIVE = 0.800, 0.667
NO_TOOLBAR = {"displayModeBar": False}  # a figure to read, not to edit
MIN_GROUP_TASKS = 5  # a group of fewer rated tasks says nothing about agreement or realism
TOO_FEW = "too few tasks"
RATING_SCALE = (1, 5)  # mean ratings are drawn on the rubric's scale, never from 0
SHORT_SPAN_DAYS = 31  # up to this span a time axis ticks once a day
DAY_MS = 86_400_000
BLUE, GREY = "#1565c0", "#bdbdbd"


def draw(figure: go.Figure | None, *, key: str, empty: str) -> None:
    """The figure, or one sentence (`empty`) where it would have nothing to draw."""
    if figure is None:
        st.info(empty)
    else:
        st.plotly_chart(figure, key=key, config=NO_TOOLBAR)


def interval_text(alpha: float, low: float, high: float) -> str:
    """An alpha with its 95% interval, to three places.

    >>> interval_text(0.82, -0.125, 1.0)
    'alpha 0.820 (-0.125 to 1.000)'
    >>> interval_text(0.5, float("nan"), float("nan"))
    'alpha 0.500 (no interval)'
    """
    if pd.isna(alpha):
        return "alpha undefined"
    if pd.isna(low) or pd.isna(high):
        return f"alpha {alpha:.3f} (no interval)"
    return f"alpha {alpha:.3f} ({low:.3f} to {high:.3f})"


def day_axis(days: pd.Series) -> dict:
    """A date axis that ticks once a day when the span is short (never at milliseconds)."""
    axis = {"type": "date", "tickformat": "%Y-%m-%d", "title": "day"}
    stamps = pd.to_datetime(days, utc=True)
    span = (stamps.max() - stamps.min()).days if len(stamps) else 0
    if span <= SHORT_SPAN_DAYS:
        axis["dtick"] = DAY_MS
        if span < 1:  # one day alone: half a day either side, not a millisecond range
            start = stamps.min()
            axis["range"] = [start - pd.Timedelta(hours=12), start + pd.Timedelta(hours=12)]
    return axis


def alpha_chart(frame: pd.DataFrame) -> go.Figure | None:
    """Alpha per rubric item with its 95% interval; None when no item has an alpha."""
    defined = frame[frame["alpha"].notna()]
    if defined.empty:
        return None
    figure = go.Figure()
    figure.add_scatter(
        x=defined["alpha"],
        y=defined["item"],
        mode="markers",
        marker={"size": 10},
        error_x={
            "type": "data",
            "symmetric": False,
            "array": (defined["ci_high"] - defined["alpha"]).fillna(0),
            "arrayminus": (defined["alpha"] - defined["ci_low"]).fillna(0),
        },
        customdata=np.column_stack([defined["ci_low"], defined["ci_high"]]),
        hovertemplate="%{y}: alpha %{x:.3f} (%{customdata[0]:.3f} to %{customdata[1]:.3f})"
        "<extra></extra>",
    )
    thresholds = ((TENTATIVE, "0.667", "right"), (RELIABLE, "0.800", "left"))
    lines = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": value,
            "x1": value,
            "y0": 0,
            "y1": 1,
            "line": {"dash": "dash", "color": "#9e9e9e"},
        }
        for value, _, _ in thresholds
    ]
    labels = [
        {
            "x": value,
            "xref": "x",
            "xanchor": anchor,
            "y": 0,
            "yref": "paper",
            "yanchor": "bottom",
            "text": label,
            "showarrow": False,
        }
        for value, label, anchor in thresholds
    ]
    lowest = defined["ci_low"].fillna(defined["alpha"]).min() if len(defined) else 0.0
    figure.update_layout(
        height=100 + 30 * len(defined),
        margin={"t": 40, "b": 10},
        xaxis={"title": "Krippendorff's alpha", "range": [min(-0.2, lowest - 0.05), 1.03]},
        yaxis={"autorange": "reversed", "title": ""},
        shapes=lines,  # drawn as layout shapes: add_vline costs ~10 ms a line
        annotations=labels,
    )
    return figure


def bias_heatmap(bias: pd.DataFrame) -> go.Figure:
    values = bias.to_numpy(dtype=float)
    defined = np.abs(values[np.isfinite(values)])
    limit = max(0.5, float(defined.max())) if defined.size else 0.5
    figure = go.Figure(
        go.Heatmap(
            z=values,
            x=list(bias.columns),
            y=list(bias.index),
            colorscale="RdBu",
            zmid=0,
            zmin=-limit,
            zmax=limit,
            hovertemplate="%{y} on %{x}: %{z:+.2f}<extra></extra>",
        )
    )
    figure.update_layout(height=120 + 30 * len(bias), margin={"t": 10, "b": 10})
    return figure


def alpha_over_time_chart(history: pd.DataFrame) -> go.Figure | None:
    """Alpha at the end of each day on the ratings so far, on a day axis; None when no day
    has an alpha."""
    if history.empty or history["alpha"].notna().sum() == 0:
        return None
    figure = go.Figure(
        go.Scatter(
            x=history["day"],
            y=history["alpha"],
            mode="lines+markers",
            customdata=history[["ratings"]],
            hovertemplate="%{x}: alpha %{y:.3f}, %{customdata[0]} ratings<extra></extra>",
        )
    )
    figure.update_layout(
        height=260,
        margin={"t": 10, "b": 10},
        xaxis=day_axis(history["day"]),
        yaxis={"title": "alpha", "range": [-1.03, 1.03]},
    )
    return figure


GROUP_COLOURS = ["#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a"]


def realism_chart(
    part: pd.DataFrame, comparison: str, scale: tuple[float, float] = RATING_SCALE
) -> go.Figure | None:
    """Mean rating per dimension on the rating scale, one horizontal bar per group; a group of
    fewer than MIN_GROUP_TASKS tasks greyed and named so. None when nothing was rated."""
    part = part[part["mean"].notna()]
    if part.empty:
        return None
    figure = go.Figure()
    for index, (group, rows) in enumerate(part.groupby("group", sort=True)):
        few = rows["tasks"].max() < MIN_GROUP_TASKS
        figure.add_bar(
            x=rows["mean"],
            y=rows["dimension"],
            orientation="h",
            name=f"{group} ({TOO_FEW})" if few else str(group),
            marker_color=GREY if few else GROUP_COLOURS[index % len(GROUP_COLOURS)],
            customdata=rows[["tasks", "ratings", "alpha"]],
            hovertemplate=(
                "%{y}: %{x:.2f} (%{customdata[0]} tasks, %{customdata[1]} ratings, "
                "alpha %{customdata[2]:.3f})<extra>%{fullData.name}</extra>"
            ),
        )
    figure.update_layout(
        barmode="group",
        height=100 + 28 * part["dimension"].nunique() * max(1, part["group"].nunique()),
        margin={"t": 30, "b": 10},
        title=f"by {comparison}",
        yaxis_title="",
        xaxis={"title": "mean rating", "range": list(scale)},
    )
    return figure


def progress_chart(progress: pd.DataFrame) -> go.Figure | None:
    """Submitted and open tasks per expert, stacked, experts grouped by round; None when no
    expert has an assignment."""
    if progress.empty:
        return None
    x = [progress["round"].tolist(), progress["expert"].tolist()]
    figure = go.Figure()
    for column, colour in (("submitted", "#2e7d32"), ("open", "#bdbdbd")):
        figure.add_bar(x=x, y=progress[column], name=column, marker_color=colour)
    figure.update_layout(
        barmode="stack", height=300, margin={"t": 10, "b": 10}, yaxis_title="tasks"
    )
    return figure


MODEL_SERIES = (
    ("humans", "Humans", "#1f77b4"),
    ("with_models", "Humans and model", "#9467bd"),
    ("model_vs_consensus", "Model vs human consensus", "#ff7f0e"),
)


def model_agreement_chart(frame: pd.DataFrame) -> go.Figure:
    """Per rubric item, three alphas with their 95% intervals: of the humans, of humans and
    the model together, and of the model against the human consensus."""
    figure = go.Figure()
    for offset, (column, label, colour) in zip((-0.22, 0.0, 0.22), MODEL_SERIES, strict=True):
        shown = frame[frame[column].notna()]
        positions = [list(frame["item"]).index(i) + offset for i in shown["item"]]
        figure.add_scatter(
            x=shown[column],
            y=positions,
            mode="markers",
            name=label,
            marker={"size": 9, "color": colour},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": (shown[f"{column}_high"] - shown[column]).fillna(0),
                "arrayminus": (shown[column] - shown[f"{column}_low"]).fillna(0),
            },
            customdata=shown["item"],
            hovertemplate="%{customdata}: %{x:.3f}<extra>" + label + "</extra>",
        )
    items = list(frame["item"])
    figure.update_layout(
        height=120 + 40 * len(items),
        margin={"t": 30, "b": 10},
        xaxis={"title": "Krippendorff's alpha", "range": [-0.5, 1.03]},
        yaxis={
            "tickmode": "array",
            "tickvals": list(range(len(items))),
            "ticktext": items,
            "autorange": "reversed",
            "title": "",
        },
        legend={"orientation": "h", "y": 1.08},
    )
    return figure


def audit_score_chart(scores: list[float], threshold: float) -> go.Figure:
    """How the round's audit scores are distributed, with the admission threshold."""
    figure = go.Figure()
    figure.add_histogram(
        x=scores,
        xbins={"start": 0, "end": 100.001, "size": 5},
        marker_color="#1565c0",
        hovertemplate="score %{x}: %{y} tasks<extra></extra>",
    )
    figure.add_vline(
        x=threshold,
        line_dash="dash",
        line_color="#c62828",
        annotation_text=f"admitted at {threshold:g}",
        annotation_position="top left",
    )
    figure.update_layout(
        height=260,
        margin={"t": 30, "b": 10},
        xaxis={"title": "audit score (0-100)", "range": [0, 101]},
        yaxis_title="tasks",
        bargap=0.05,
    )
    return figure


def group_chart(
    rows: pd.DataFrame,
    measure: str,
    label: str,
    grouping: str,
    scale: tuple[float, float] = RATING_SCALE,
) -> go.Figure | None:
    """Mean realism (or audit score) per group on its `scale`, each group's alpha written with
    its interval; a group of fewer than MIN_GROUP_TASKS rated tasks greyed and labelled "too few
    tasks" instead. None when no group has the measure."""
    rows = rows[rows[measure].notna()]
    if rows.empty:
        return None
    few = rows["rated"] < MIN_GROUP_TASKS
    text = [
        TOO_FEW if small else interval_text(r.alpha, r.ci_low, r.ci_high)
        for small, r in zip(few, rows.itertuples(), strict=True)
    ]
    figure = go.Figure()
    figure.add_bar(
        x=rows[measure],
        y=rows["group"],
        orientation="h",
        marker_color=[GREY if small else BLUE for small in few],
        text=text,
        textposition="auto",
        customdata=rows[["tasks", "rated"]],
        hovertemplate=(
            "%{y}: %{x:.2f} over %{customdata[1]} of %{customdata[0]} tasks rated; "
            "%{text}<extra></extra>"
        ),
    )
    figure.update_layout(
        height=90 + 32 * len(rows),
        margin={"t": 30, "b": 10},
        title=f"by {grouping.lower()}",
        xaxis={"title": label, "range": list(scale)},
        yaxis={"autorange": "reversed", "title": ""},
    )
    return figure
