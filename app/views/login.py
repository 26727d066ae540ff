"""Page: sign in (password or single sign-on); a signed-in user goes to their start page."""

import streamlit as st
from itsmreview.ui.auth import current_user, login_form, session_ended_message, start_page

if (user := current_user()) is not None:
    st.switch_page(start_page(user))
st.title("itsmreview")
if ended := session_ended_message():
    st.warning(ended)
st.write(
    "Expert review of ITSM agent-benchmark tasks, side by side with the real process logs "
    "they came from."
)
if (user := login_form()) is not None:
    # one run to the start page (registered, hidden, before the login)
    st.switch_page(start_page(user))
