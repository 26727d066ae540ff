import pandas as pd
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.accounts.service import add_user, users_overview
from itsmreview.db import session_scope
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require

user = require(Role.admin)
st.title("Users")
with session_scope() as session:
    users = users_overview(session=session, actor=user)
st.dataframe(
    pd.DataFrame(
        [
            {
                "username": u.username,
                "name": u.display_name,
                "role": u.role,
                "expertise": ", ".join(u.expertise),
                "active": u.active,
            }
            for u in users
        ]
    ),
    hide_index=True,
)
st.subheader("Add a user")
with st.form("add-user", clear_on_submit=True):
    username = st.text_input("Username")
    display_name = st.text_input("Display name")
    role = st.selectbox("Role", [r.value for r in Role])
    expertise = st.text_input("Expertise (personas, comma-separated)")
    submitted = st.form_submit_button("Add user", type="primary")
if submitted:
    added = perform(
        add_user,
        actor=user,
        username=username.strip(),
        role=role,
        display_name=display_name.strip() or None,
        expertise=[e.strip() for e in expertise.split(",") if e.strip()],
    )
    if added is not FAILED:
        created, password = added
        st.success(f"Added {created.username}. Password (shown once): `{password}`")
