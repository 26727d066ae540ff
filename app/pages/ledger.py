import plotly.express as px
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.ledger.service import ledger_overview, verify_chain
from itsmreview.ui.auth import require

user = require(Role.lead)
st.title("Provenance ledger")
st.write(
    "Every artifact's origin: the **logs**, **external** practice (papers, vendor schemas) "
    "or **experts**. Entries are hash-chained: changing one breaks every hash after it."
)
source_kind = st.segmented_control("Source", ["logs", "external", "expert", "system"])
with session_scope() as session:
    overview = ledger_overview(session=session, actor=user, source_kind=source_kind)
if overview.counts:
    figure = px.bar(
        x=list(overview.counts),
        y=list(overview.counts.values()),
        labels={"x": "source", "y": "entries"},
    )
    figure.update_layout(height=240, margin={"t": 10, "b": 10})
    st.plotly_chart(figure)
if st.button("Verify chain"):
    with session_scope() as session:
        report = verify_chain(session=session)
    if report.ok:
        st.success(f"Chain intact: {report.entries:,} entries verified.")
    else:
        st.error(f"Entry {report.broken_at}: {report.problem}.")
st.dataframe(overview.entries, hide_index=True)
