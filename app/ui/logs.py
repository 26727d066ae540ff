"""The imported event logs a page picks from."""

import streamlit as st
from itsmreview.coverage.overview import log_names
from itsmreview.db import session_scope


def logs_or_stop(empty: str, *, caption: bool = False) -> list[str]:
    """The names of the imported logs; with none, the page says `empty` and stops."""
    with session_scope() as session:
        names = log_names(session=session)
    if not names:
        (st.caption if caption else st.info)(empty)
        st.stop()
    return names
