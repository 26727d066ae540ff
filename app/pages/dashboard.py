import plotly.express as px
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.review.dashboard import dashboard
from itsmreview.ui.auth import require

user = require(Role.lead)
st.title("Dashboard")
with session_scope() as session:
    data = dashboard(session=session, actor=user)
if not data.rounds:
    st.info(
        "No review round yet. Rounds are opened from the command line for now "
        "(`itsmreview demo` creates one)."
    )
    st.stop()
status = data.task_status
columns = st.columns(len(status) or 1)
for column, (label, value) in zip(columns, sorted(status.items()), strict=False):
    column.metric(label.replace("_", " ").capitalize(), value)
st.subheader("Progress per expert")
progress = data.progress.assign(open=lambda f: f.assigned - f.submitted)
figure = px.bar(
    progress,
    x="expert",
    y=["submitted", "open"],
    facet_col="round",
    labels={"value": "tasks", "variable": ""},
    color_discrete_map={"submitted": "#2e7d32", "open": "#bdbdbd"},
)
figure.update_layout(height=320, margin={"t": 40, "b": 10})
st.plotly_chart(figure)
st.dataframe(progress, hide_index=True)
st.subheader("Rounds")
st.dataframe(data.rounds, hide_index=True)
