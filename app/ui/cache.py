"""Caching lead-page figures that need a whole round or the whole catalog: computed once per
state of the database, not on every rerun. Every change those figures depend on (an import,
a rating, a decision, a gate, a recorded source, an export) appends a ledger entry, so the
ledger head's sequence number is the key that tells when to compute again."""

import io
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st
from itsmreview.db import session_scope
from itsmreview.ledger.evidence.service import ledger_head
from itsmreview.settings import get_settings
from itsmreview.summaries.service import materialised


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


INLINE_LEDGER_ENTRIES = 20_000  # below this, background figures are computed at once


@dataclass(frozen=True)
class Shown:
    """A figure as stored: `value` is None while its first computation runs; `current` is
    False while a newer one is computed in the background."""

    value: Any
    computed_at: datetime | None
    current: bool


def in_background(function):
    """For lead figures over a whole round or catalog, `function(session=..., actor=...,
    **keys)` registered with `summaries.service.lead_figures`: stored per state of the ledger
    (`summaries`), computed at once while the ledger is small and in the background after
    that (a worker's job, or a thread), so that a page view never waits for them."""
    kind = getattr(function, "summary_kind", None)
    if kind is None:
        raise TypeError(
            f"{function.__qualname__} is not registered: decorate it with "
            "itsmreview.summaries.service.lead_figures so that a worker can compute it"
        )

    def call(actor, **keys) -> Shown:
        version = ledger_version()
        with session_scope() as session:
            found = materialised(
                session=session,
                kind=kind,
                key=json.dumps(keys, sort_keys=True, default=str),
                fingerprint=str(version),
                inline=version <= INLINE_LEDGER_ENTRIES,
                actor=actor,
            )
        payload = found.payload or {}
        value = (
            pd.read_json(io.StringIO(payload["table"]), orient="table")
            if "table" in payload
            else payload.get("value")
        )
        return Shown(value, found.computed_at, found.current)

    return call


def background_note(shown: Shown, what: str) -> None:
    """Say on the page when a figure is on its way or older than the data."""
    if shown.value is None:
        st.info(f"{what} is being computed in the background; reload the page in a moment.")
    elif not shown.current:
        st.caption(
            f"{what} as of {shown.computed_at:%Y-%m-%d %H:%M:%S} UTC; newer figures are being "
            "computed in the background."
        )
