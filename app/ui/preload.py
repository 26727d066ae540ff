"""Browser code that Streamlit loads on an element's first use, loaded ahead of it."""

import pandas as pd
import streamlit as st
from itsmreview.ui.words import MISSING

HIDDEN = "preload"
KEY_PREFIX = "preload-"


def preload_grid_and_code() -> None:
    """A data grid, a code block and each kind of widget of the expert's page, drawn out of
    sight (hidden, disabled): Streamlit loads some elements' browser code on first use and
    draws nothing after them until it is in (0.35-0.85 s each on this machine). Drawn on the
    login page, that happens while the password is typed, not after it."""
    st.html(f"<style>.st-key-{HIDDEN} {{display: none}}</style>")
    hidden = {"label_visibility": "collapsed", "disabled": True}
    with st.container(key=HIDDEN):
        st.dataframe(pd.DataFrame({"-": ["-"]}), hide_index=True, placeholder=MISSING)
        st.code("{}", language="json")
        st.radio("-", [1], index=None, horizontal=True, key=f"{KEY_PREFIX}radio", **hidden)
        st.selectbox("-", [1], key=f"{KEY_PREFIX}select", **hidden)
        st.multiselect("-", [1], key=f"{KEY_PREFIX}multi", **hidden)
        st.text_area("-", key=f"{KEY_PREFIX}area", **hidden)
        st.number_input("-", 1, 2, 1, key=f"{KEY_PREFIX}number", **hidden)
        st.progress(0.5)
        st.metric("-", 1)
        with st.chat_message("user", avatar=":material/person:"):
            st.text("-")
        with st.expander("-"):
            st.caption("-")
