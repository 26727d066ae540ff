"""Appending to and verifying the provenance ledger."""

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from itsmreview.db import utcnow
from itsmreview.errors import LedgerIntegrityError
from itsmreview.ledger import chain, queries
from itsmreview.ledger.models import LedgerEntry
from sqlmodel import Session

SOURCE_KINDS = ("logs", "external", "expert", "system")


def entry_content(entry, created_at: str | None = None) -> dict[str, Any]:
    """What an entry's hash covers; `created_at` as ISO text when the caller has it already."""
    return {
        "seq": entry.seq,
        "created_at": created_at or entry.created_at.isoformat(timespec="microseconds"),
        "artifact_type": entry.artifact_type,
        "artifact_id": entry.artifact_id,
        "field": entry.field,
        "source_kind": entry.source_kind,
        "reference": entry.reference,
        "action": entry.action,
        "actor_id": entry.actor_id,
        "payload": entry.payload,
    }


def entry_record(entry, actor: str | None) -> dict[str, Any]:
    """An entry as a JSON-ready record with its hashes and the actor's (given) name."""
    record = entry_content(entry, entry.created_at.isoformat())
    del record["actor_id"]
    return {**record, "actor": actor, "prev_hash": entry.prev_hash, "entry_hash": entry.entry_hash}


def append_entry(
    *,
    session: Session,
    artifact_type: str,
    artifact_id: str | int,
    action: str,
    source_kind: str,
    field: str | None = None,
    reference: str = "",
    actor_id: int | None = None,
    payload: dict[str, Any] | None = None,
) -> LedgerEntry:
    """Append one provenance entry, chained to the last one. Flushes, does not commit.

    Raises ValueError for a source kind outside logs, external, expert, system.
    """
    if source_kind not in SOURCE_KINDS:
        raise ValueError(f"source_kind {source_kind!r} is not one of {', '.join(SOURCE_KINDS)}")
    queries.lock_chain(session=session)
    last = queries.last_entry(session=session)
    entry = LedgerEntry(
        seq=(last.seq + 1) if last else 1,
        created_at=utcnow(),
        artifact_type=artifact_type,
        artifact_id=str(artifact_id),
        field=field,
        source_kind=source_kind,
        reference=reference,
        action=action,
        actor_id=actor_id,
        payload=json.loads(chain.canonical_json(payload or {})),
        prev_hash=last.entry_hash if last else chain.GENESIS_HASH,
        entry_hash="",
    )
    entry.entry_hash = chain.link(entry_content(entry), entry.prev_hash)
    session.add(entry)
    session.flush()
    return entry


@dataclass(frozen=True)
class ChainReport:
    entries: int
    ok: bool
    broken_at: int | None = None
    problem: str | None = None


def verify_chain(*, session: Session, raise_on_break: bool = False) -> ChainReport:
    """Recompute every hash in seq order; report the first broken entry.

    Raises LedgerIntegrityError instead of reporting when `raise_on_break` is set.
    """
    count = 0

    def triples():
        nonlocal count
        for entry in queries.iter_entries(session=session):
            count += 1
            yield entry_content(entry), entry.prev_hash, entry.entry_hash

    broken = chain.find_break(triples())
    if broken is None:
        return ChainReport(entries=count, ok=True)
    seq, problem = broken
    if raise_on_break:
        raise LedgerIntegrityError(
            f"ledger entry {seq}: {problem}; entries from {seq} on cannot be trusted"
        )
    return ChainReport(entries=count, ok=False, broken_at=seq, problem=problem)


@dataclass
class LedgerOverview:
    counts: dict[str, int]
    entries: pd.DataFrame


def ledger_overview(
    *, session: Session, actor, source_kind: str | None = None, limit: int = 500
) -> LedgerOverview:
    """Entry counts per source kind and the newest entries (filtered by source kind)."""
    from itsmreview.accounts.models import Role
    from itsmreview.accounts.service import require_role

    require_role(actor, Role.lead)
    return LedgerOverview(
        counts=queries.source_kind_counts(session=session),
        entries=queries.entries_frame(session=session, source_kind=source_kind, limit=limit),
    )
