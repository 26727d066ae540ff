"""The variant explorer panel: used on the Variant explorer page and next to each task."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from itsmreview.coverage.explorer import VariantDetail, source_details
from itsmreview.coverage.service import latest_log
from itsmreview.db import session_scope
from itsmreview.settings import get_settings
from itsmreview.ui.charts import NO_TOOLBAR
from itsmreview.ui.tables import text_table
from itsmreview.ui.text import literal
from itsmreview.ui.words import MISSING

# variant details read parquet files; a page rerun (every answer on the rating page is one)
# must not read them again. The key holds the log's newest version, so a new import shows at once.
DETAIL_TTL_SECONDS = 3600


@st.cache_data(ttl=DETAIL_TTL_SECONDS, show_spinner=False, max_entries=256)
def _cached_details(
    database_url: str,
    log_name: str | None,
    log_id: int | None,
    sequences: tuple[tuple[str, ...], ...],
) -> list[VariantDetail]:
    with session_scope() as session:
        return source_details(
            session=session, log_name=log_name, sequences=[list(s) for s in sequences]
        )


def variant_details(log_name: str | None, sequences: list[list[str]]) -> list[VariantDetail]:
    """Details of the declared sequences, cached per database, log version and sequences."""
    log_id = None
    if log_name:
        with session_scope() as session:
            log = latest_log(session=session, name=log_name)
            log_id = log.id if log else None
    return _cached_details(
        get_settings().resolved_database_url(),
        log_name,
        log_id,
        tuple(tuple(s) for s in sequences),
    )


ROLE_COLUMNS = {"attribute": "Attribute", "value": "Value", "events": "Events", "share": "Share"}


def _steps(sequence: list[str]) -> None:
    text_table(pd.DataFrame({"Step": range(1, len(sequence) + 1), "Activity": sequence}))


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds < 72 * 3600 else f"{seconds / 86400:,.1f} d"


def render_variant(detail: VariantDetail, *, key: str, compact: bool = False) -> None:
    if not detail.found:
        st.warning(literal(f"No case of log {detail.log_name!r} follows this sequence."))
        _steps(detail.sequence)
        return
    cols = st.columns(3)
    cols[0].metric("Rank", f"#{detail.rank}", help=f"of {detail.n_variants:,} variants")
    cols[1].metric("Cases", f"{detail.case_count:,}")
    cols[2].metric("Median duration", _hours(detail.durations_s["median"]))
    st.caption(
        f"Variant #{detail.rank} of {detail.n_variants:,}: {detail.share:.1%} of the cases "
        f"of {detail.log_name!r} follow it; "
        f"durations from {_hours(detail.durations_s['p10'])} (10th "
        f"percentile) to {_hours(detail.durations_s['p90'])} (90th)."
    )
    _steps(detail.sequence)
    if not detail.roles.empty:
        with st.expander(f"Roles (events of {detail.role_cases:,} cases)", expanded=not compact):
            roles = detail.roles.copy()
            roles["share"] = roles["events"] / roles.groupby("attribute")["events"].transform("sum")
            roles = roles.sort_values(["attribute", "events"], ascending=[True, False])
            roles = roles.groupby("attribute", sort=True).head(5)
            text_table(roles, ROLE_COLUMNS, events="{:,}".format, share="{:.0%}".format)
    if not detail.examples.empty:
        # drawn once opened: beside a task the chart would load the plotting library with
        # every task the expert opens
        examples = st.expander(
            "Real example cases",
            expanded=not compact,
            key=f"{key}-examples-open",
            on_change="rerun",
        )
        if examples.open:
            with examples:
                st.plotly_chart(
                    case_timeline(detail.examples), key=f"{key}-timeline", config=NO_TOOLBAR
                )
                st.caption("Hours since each case's first event; hover a point for its details.")
                st.dataframe(
                    detail.examples, hide_index=True, key=f"{key}-examples", placeholder=MISSING
                )


def case_timeline(examples: pd.DataFrame) -> go.Figure:
    frame = examples.copy()
    start = frame.groupby("case_id")["timestamp"].transform("min")
    frame["hours"] = (frame["timestamp"] - start).dt.total_seconds() / 3600
    figure = go.Figure()
    for case_id, rows in frame.groupby("case_id", sort=False):
        figure.add_scatter(
            x=rows["hours"],
            y=[case_id] * len(rows),
            mode="lines",
            line={"color": "#bdbdbd", "width": 2},
            showlegend=False,
            hoverinfo="skip",
        )
    for activity, rows in frame.groupby("activity", sort=False):
        figure.add_scatter(
            x=rows["hours"],
            y=rows["case_id"],
            mode="markers",
            name=str(activity),
            marker={"size": 11},
            customdata=rows[["timestamp", "resource"]].astype(str).to_numpy()
            if "resource" in rows
            else None,
            hovertemplate="%{y}<br>"
            + str(activity)
            + "<br>%{customdata[0]}<br>%{customdata[1]}<extra></extra>",
        )
    figure.update_layout(
        height=140 + 45 * frame["case_id"].nunique(),
        margin={"t": 10, "b": 10},
        xaxis_title="hours since first event",
        yaxis={"title": "", "type": "category"},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure
