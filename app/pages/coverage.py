import plotly.graph_objects as go
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.coverage.overview import log_names, log_overview
from itsmreview.db import session_scope
from itsmreview.ui.auth import require

user = require(Role.lead)
st.title("Coverage")
with session_scope() as session:
    names = log_names(session=session)
if not names:
    st.info("No event log imported yet: `itsmreview log import PATH --preset bpi2013`.")
    st.stop()
name = st.selectbox("Event log", names)
with session_scope() as session:
    view = log_overview(session=session, actor=user, name=name)
log, variants = view.log, view.variants
kpis = st.columns(5)
kpis[0].metric("Cases", f"{log.n_cases:,}")
kpis[1].metric("Events", f"{log.n_events:,}")
kpis[2].metric("Variants", f"{log.n_variants:,}")
kpis[3].metric("Covered variants", int(variants["covered"].sum()))
kpis[4].metric("Cases in covered variants", f"{view.covered_share:.1%}")

st.subheader("Variants by frequency")
top = variants.head(100)
figure = go.Figure()
figure.add_bar(
    x=top["rank"],
    y=top["case_count"],
    name="cases",
    marker_color=["#2e7d32" if c else "#9e9e9e" for c in top["covered"]],
    hovertext=[" → ".join(s) for s in top["sequence"]],
)
figure.add_scatter(
    x=top["rank"],
    y=top["cumulative_share"],
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
    yaxis2={"overlaying": "y", "side": "right", "range": [0, 1], "tickformat": ".0%"},
)
st.plotly_chart(figure)
st.caption("Green bars: variants that at least one task declares as its source.")
table = variants.head(500).assign(sequence=lambda f: f["sequence"].map(" → ".join))
st.dataframe(
    table[["rank", "case_count", "share", "covered", "length", "sequence"]],
    hide_index=True,
    column_config={
        "share": st.column_config.ProgressColumn(
            "share", format="%.3f", min_value=0.0, max_value=float(variants["share"].max())
        )
    },
)
left, right = st.columns(2)
with left:
    st.subheader("Activities")
    st.dataframe(view.activities, hide_index=True)
with right:
    st.subheader("Role values")
    st.dataframe(view.role_values, hide_index=True)
