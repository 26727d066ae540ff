"""Confirmations that survive st.rerun (a rerun drops what the current run drew)."""

import streamlit as st

_KEY = "_notices"


def announce(message: str) -> None:
    """Show `message` as a toast on the next run of the app."""
    st.session_state.setdefault(_KEY, []).append(message)


def show_announcements() -> None:
    for message in st.session_state.pop(_KEY, []):
        st.toast(message, icon=":material/check_circle:")
