"""Calling a service from a page: its own transaction, its error shown where the page is,
and the page's user checked again when it commits (a stale tab writes nothing)."""

from collections.abc import Callable
from typing import Any

import streamlit as st
from itsmreview.accounts.acting import SessionEnded, act_as
from itsmreview.db import write_transaction
from itsmreview.errors import ItsmReviewError
from itsmreview.ui.text import literal

FAILED = object()  # what perform returns when the service refused (its message is shown)


def perform(service: Callable[..., Any], /, **arguments) -> Any:
    """service(session=..., **arguments) in a transaction of its own; on an ItsmReviewError
    nothing is stored, the message is shown and FAILED comes back. The `actor` argument is
    checked again when the transaction commits, whether the service checks it or not; when
    their session ended meanwhile the tab forgets the login and the whole page runs again,
    showing why and the login form."""

    def work(session):
        act_as(session, arguments.get("actor"))
        return service(session=session, **arguments)

    try:
        return write_transaction(work)
    except SessionEnded as exc:
        from itsmreview.ui.auth import end_here

        end_here(str(exc))
        st.rerun(scope="app")
    except ItsmReviewError as exc:
        st.error(literal(str(exc)))
        return FAILED
