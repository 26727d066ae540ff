"""Page: the variant explorer, one variant of a log with its cases, timing and roles."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.coverage.overview import variant_choices
from itsmreview.db import session_scope
from itsmreview.ui.auth import require
from itsmreview.ui.logs import logs_or_stop
from itsmreview.ui.variant import render_variant, variant_details

require(Role.lead, Role.expert)
st.title("Variant explorer")
names = logs_or_stop("No event log imported yet.")
left, right = st.columns([1, 2])
name = left.selectbox("Event log", names)
with session_scope() as session:
    choices = variant_choices(session=session, name=name)
rank = right.selectbox("Variant", list(choices), format_func=lambda r: choices[r]["label"])
(detail,) = variant_details(name, [choices[rank]["sequence"]])
render_variant(detail, key=f"explorer-{name}-{rank}")
