import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.coverage.overview import log_names, variant_choices
from itsmreview.db import session_scope
from itsmreview.ui.auth import require
from itsmreview.ui.variant import render_variant, variant_details

require(Role.lead, Role.expert)
st.title("Variant explorer")
with session_scope() as session:
    names = log_names(session=session)
if not names:
    st.info("No event log imported yet.")
    st.stop()
left, right = st.columns([1, 2])
name = left.selectbox("Event log", names)
with session_scope() as session:
    choices = variant_choices(session=session, name=name)
rank = right.selectbox("Variant", list(choices), format_func=lambda r: choices[r]["label"])
(detail,) = variant_details(name, [choices[rank]["sequence"]])
render_variant(detail, key=f"explorer-{name}-{rank}")
