import streamlit as st
from itsmreview.errors import ItsmReviewError
from itsmreview.ui.auth import (
    current_user,
    log_in,
    session_ended_message,
    sso_configured,
    start_page,
)
from itsmreview.ui.text import literal

if current_user() is not None:
    st.switch_page(start_page(current_user()))
st.title("itsmreview")
if ended := session_ended_message():
    st.warning(ended)
st.write(
    "Expert review of ITSM agent-benchmark tasks, side by side with the real process logs "
    "they came from."
)
with st.form("login"):
    username = st.text_input("Username", key="login_username")
    password = st.text_input("Password", type="password", key="login_password")
    submitted = st.form_submit_button("Log in", type="primary")
if sso_configured():
    st.divider()
    if st.button("Log in with single sign-on"):
        st.login()
if submitted:
    try:
        log_in(username, password)
    except ItsmReviewError as exc:
        st.error(literal(str(exc)))
    else:
        st.rerun()
