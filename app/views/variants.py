"""Page: the variant explorer, one variant of a log with its cases, timing and roles."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.catalog.task_list import tasks_declaring
from itsmreview.coverage.overview import variant_choices
from itsmreview.db import session_scope
from itsmreview.ui.auth import require
from itsmreview.ui.links import tasks_link
from itsmreview.ui.logs import logs_or_stop
from itsmreview.ui.variant import render_variant, variant_details

user = require(Role.lead, Role.expert)
st.title("Variant explorer")
names = logs_or_stop("No event log imported yet.")
left, right = st.columns([1, 2])
name = left.selectbox("Event log", names)
with session_scope() as session:
    choices = variant_choices(session=session, name=name)
rank = right.selectbox("Variant", list(choices), format_func=lambda r: choices[r]["label"])
(detail,) = variant_details(name, [choices[rank]["sequence"]])
if user.role != Role.expert:  # the Tasks page is a lead's
    with session_scope() as session:
        key, covering = tasks_declaring(
            session=session, actor=user, sequence=choices[rank]["sequence"]
        )
    if covering:
        tasks_link(f"Open the {covering:,} task(s) that cover this variant", variant_key=key)
    else:
        st.caption("No task declares this variant as its source: a gap to write a task for.")
render_variant(detail, key=f"explorer-{name}-{rank}")
