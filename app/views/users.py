"""Page: user accounts (admins): add, deactivate, change role or profile, reset password."""

import pandas as pd
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.accounts.service import (
    add_user,
    reset_password,
    set_active,
    set_profile,
    set_role,
    users_overview,
)
from itsmreview.db import session_scope
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal

user = require(Role.admin)
PEOPLE = [r.value for r in Role if r != Role.model]  # model raters come from model reviews
PASSWORD_NOTE = "users-password-note"  # a new password, shown once after the rerun


def _personas(text: str) -> list[str]:
    return [e.strip() for e in text.split(",") if e.strip()]


st.title("Users")
if note := st.session_state.pop(PASSWORD_NOTE, None):
    st.success(note)
with session_scope() as session:
    users = users_overview(session=session, actor=user)
show_table(
    pd.DataFrame(
        [
            {
                "username": u.username,
                "name": u.display_name,
                "role": u.role,
                "expertise": ", ".join(u.expertise) or None,
                "active": u.active,
            }
            for u in users
        ]
    )
)
st.subheader("Add a user")
with st.form("add-user", clear_on_submit=True):
    username = st.text_input("Username")
    display_name = st.text_input("Display name")
    role = st.selectbox("Role", PEOPLE)
    expertise = st.text_input("Expertise (personas, comma-separated)")
    submitted = st.form_submit_button("Add user", type="primary")
if submitted:
    added = perform(
        add_user,
        actor=user,
        username=username.strip(),
        role=role,
        display_name=display_name.strip() or None,
        expertise=_personas(expertise),
    )
    if added is not FAILED:
        created, password = added
        st.session_state[PASSWORD_NOTE] = (
            f"Added {literal(created.username)}. Password (shown once): `{password}`"
        )
        st.rerun()  # the table and the lists below name the new user at once

st.subheader("Change a user")
st.caption(
    "A change of activity, role or password ends the user's open sessions at once; every "
    "change is recorded in the ledger."
)
people = [u for u in users if u.role != Role.model]
chosen = st.selectbox("User", [u.username for u in people], index=None, placeholder="Choose a user")
if chosen:
    target = next(u for u in people if u.username == chosen)
    left, middle, right = st.columns(3)
    with left:
        label = "Reactivate" if not target.active else "Deactivate"
        if st.button(label, key="toggle-active"):
            done = perform(set_active, actor=user, username=chosen, active=not target.active)
            if done is not FAILED:
                state = "reactivated" if done.active else "deactivated; their sessions ended"
                announce(literal(f"{chosen} {state}."))
                st.rerun()
    with middle:
        new_role = st.selectbox("Role", PEOPLE, index=PEOPLE.index(Role(target.role).value))
        clicked = st.button("Change role", key="set-role", disabled=new_role == target.role)
        if clicked and perform(set_role, actor=user, username=chosen, role=new_role) is not FAILED:
            announce(literal(f"{chosen} is now {new_role}; their sessions ended."))
            st.rerun()
    with right:
        if st.button("Reset password", key="reset-password"):
            result = perform(reset_password, actor=user, username=chosen)
            if result is not FAILED:
                st.success(f"New password of {literal(chosen)} (shown once): `{result[1]}`")
    with st.form(f"profile-{chosen}"):
        new_name = st.text_input(
            "Display name", value=target.display_name, key=f"profile-name-{chosen}"
        )
        new_expertise = st.text_input(
            "Expertise (personas, comma-separated)",
            value=", ".join(target.expertise),
            key=f"profile-expertise-{chosen}",
        )
        saved = st.form_submit_button("Save profile")
    if saved:
        done = perform(
            set_profile,
            actor=user,
            username=chosen,
            display_name=new_name,
            expertise=_personas(new_expertise),
        )
        if done is not FAILED:
            announce(literal(f"Profile of {chosen} saved."))
            st.rerun()
