"""Calling a service from a page: its own transaction, its error shown where the page is."""

from collections.abc import Callable
from typing import Any

import streamlit as st
from itsmreview.db import write_transaction
from itsmreview.errors import ItsmReviewError
from itsmreview.ui.text import literal

FAILED = object()  # what perform returns when the service refused (its message is shown)


def perform(service: Callable[..., Any], /, **arguments) -> Any:
    """service(session=..., **arguments) in a transaction of its own; on an ItsmReviewError
    nothing is stored, the message is shown and FAILED comes back."""
    try:
        return write_transaction(lambda session: service(session=session, **arguments))
    except ItsmReviewError as exc:
        st.error(literal(str(exc)))
        return FAILED
