"""Plotly figures of the dashboard."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go

RELIABLE, TENTATIVE = 0.800, 0.667


def alpha_chart(frame: pd.DataFrame) -> go.Figure:
    defined = frame[frame["alpha"].notna()]
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
        hovertemplate="%{y}: %{x:.3f}<extra></extra>",
    )
    for value, label, side in ((TENTATIVE, "0.667", "left"), (RELIABLE, "0.800", "right")):
        figure.add_vline(
            x=value,
            line_dash="dash",
            line_color="#9e9e9e",
            annotation_text=label,
            annotation_position=f"bottom {side}",
        )
    lowest = defined["ci_low"].fillna(defined["alpha"]).min() if len(defined) else 0.0
    figure.update_layout(
        height=100 + 30 * len(defined),
        margin={"t": 40, "b": 10},
        xaxis={"title": "Krippendorff's alpha", "range": [min(-0.2, lowest - 0.05), 1.03]},
        yaxis={"autorange": "reversed", "title": ""},
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
