"""Page: user accounts (admins): add, deactivate, change role, reset password."""

import pandas as pd
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.accounts.service import (
    add_user,
    reset_password,
    set_active,
    set_role,
    users_overview,
)
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

st.subheader("Change a user")
st.caption("Each change ends the user's open sessions at once and is recorded in the ledger.")
names = [u.username for u in users]
chosen = st.selectbox("User", names, index=None, placeholder="Choose a user")
if chosen:
    target = next(u for u in users if u.username == chosen)
    left, middle, right = st.columns(3)
    with left:
        label = "Reactivate" if not target.active else "Deactivate"
        if st.button(label, key="toggle-active"):
            done = perform(set_active, actor=user, username=chosen, active=not target.active)
            if done is not FAILED:
                st.rerun()
    with middle:
        roles = [r.value for r in Role]
        new_role = st.selectbox("Role", roles, index=roles.index(Role(target.role).value))
        clicked = st.button("Change role", key="set-role", disabled=new_role == target.role)
        if clicked and perform(set_role, actor=user, username=chosen, role=new_role) is not FAILED:
            st.rerun()
    with right:
        if st.button("Reset password", key="reset-password"):
            result = perform(reset_password, actor=user, username=chosen)
            if result is not FAILED:
                st.success(f"New password of {chosen} (shown once): `{result[1]}`")
