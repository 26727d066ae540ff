"""Caching lead-page figures that need a whole round or the whole catalog: computed once per
state of the database, not on every rerun. Every change those figures depend on (an import,
a rating, a decision, a gate, a recorded source, an export) appends a ledger entry, so the
ledger head's sequence number is the key that tells when to compute again."""

import streamlit as st
from itsmreview.db import session_scope
from itsmreview.provenance.service import ledger_head
from itsmreview.settings import get_settings


def ledger_version() -> int:
    """The newest ledger entry's sequence number (0 for an empty ledger): one indexed query."""
    with session_scope() as session:
        head = ledger_head(session=session)
    return 0 if head is None else head["seq"]


def cached(function):
    """st.cache_data for `function(session=..., actor=..., **keys)` keyed on the function,
    the database, the ledger version and `keys`; not on the actor: these are lead figures,
    the same for every lead (the page checked the role; the service checks it on a miss)."""

    name = f"{function.__module__}.{function.__qualname__}"

    @st.cache_data(ttl=600, show_spinner=False, max_entries=64)
    def run(name: str, database: str, version: int, _actor, **keys):
        # `_actor` is not part of the key: these figures are the same for every lead
        with session_scope() as session:
            return function(session=session, actor=_actor, **keys)

    def call(actor, **keys):
        database = get_settings().resolved_database_url()
        return run(name, database, ledger_version(), actor, **keys)

    return call
