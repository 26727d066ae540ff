"""Appending to and verifying the provenance ledger."""

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from itsmreview.db import utcnow
from itsmreview.errors import LedgerIntegrityError
from itsmreview.ledger import chain, queries
from itsmreview.ledger.models import LedgerEntry
from sqlalchemy import event
from sqlalchemy.orm import Session as OrmSession
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


AT_COMMIT = "itsmreview.ledger.at_commit"
_PENDING = "itsmreview.ledger.pending"


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
) -> LedgerEntry | None:
    """Append one provenance entry, chained to the last one, and return it. Flushes, does not
    commit; in a transaction marked by `chain_at_commit`, the entry is chained when it commits
    (and None returned).

    Raises ValueError for a source kind outside logs, external, expert, system.
    """
    fields = _fields(
        artifact_type=artifact_type,
        artifact_id=artifact_id,
        action=action,
        source_kind=source_kind,
        field=field,
        reference=reference,
        actor_id=actor_id,
        payload=payload,
    )
    if session.info.get(AT_COMMIT):
        _defer(session, [fields])
        return None
    return _chain(session, [fields])[0]


def append_entries(*, session: Session, entries: Iterable[dict[str, Any]]) -> int:
    """Append many entries at once, each given as `append_entry`'s keyword arguments (without
    `session`), in their order: one read of the ledger's head for all of them and inserts in
    batches of INSERT_BATCH rows, not a lock, a read and a flush per entry. In a transaction
    marked by `chain_at_commit` they are chained when it commits. Returns how many.

    Raises ValueError for a source kind outside logs, external, expert, system (before
    anything is appended).
    """
    items = [_fields(**entry) for entry in entries]
    if not items:
        return 0
    if session.info.get(AT_COMMIT):
        _defer(session, items)
    else:
        session.flush()  # the caller's rows first, as append_entry would
        _chain(session, items, keep=False)
    return len(items)


def _fields(
    *,
    artifact_type: str,
    artifact_id: str | int,
    action: str,
    source_kind: str,
    field: str | None = None,
    reference: str = "",
    actor_id: int | None = None,
    payload: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if source_kind not in SOURCE_KINDS:
        raise ValueError(f"source_kind {source_kind!r} is not one of {', '.join(SOURCE_KINDS)}")
    stored = dict(payload) if _flat(payload) else json.loads(chain.canonical_json(payload or {}))
    return {
        "artifact_type": artifact_type,
        "artifact_id": str(artifact_id),
        "field": field,
        "source_kind": source_kind,
        "reference": reference,
        "action": action,
        "actor_id": actor_id,
        "payload": stored,
    }


_PLAIN = (str, int, type(None))


def _flat(payload: dict[str, Any] | None) -> bool:
    """Whether the payload is stored and hashed as it is (text keys, text, whole-number or
    null values), so the JSON round trip that makes it so can be skipped."""
    return bool(payload) and all(
        type(key) is str and type(value) in _PLAIN for key, value in payload.items()
    )


def _defer(session: Session, items: list[dict[str, Any]]) -> None:
    session.connection()
    owner = session.get_nested_transaction() or session.get_transaction()
    session.info.setdefault(_PENDING, []).extend((owner, fields) for fields in items)


def chain_at_commit(session: Session) -> None:
    """Chain the entries this transaction appends when it commits, in the order appended:
    the ledger's lock is then held for one read of the head and one insert, not for the
    rest of the transaction (a submit's gate work). Entries of a transaction that rolls
    back are dropped with it."""
    session.connection()  # the mark belongs to a begun transaction and ends with it
    session.info[AT_COMMIT] = True


INSERT_BATCH = 5_000  # ledger rows a statement inserts, at most


class _Row:
    """An entry to insert as a row: its columns only (an ORM object costs a hundred times
    more to build, which counts at 300,000 entries)."""

    def __init__(self, **columns: Any) -> None:
        self.__dict__.update(columns)


def _chain(session: Session, items: list[dict[str, Any]], keep: bool = True) -> list:
    """Chain and insert entries under the ledger's lock, after one read of its head; `keep`
    False inserts them as rows only, INSERT_BATCH a statement (no ORM objects: less work while
    the lock is held)."""
    queries.lock_chain(session=session)
    seq, prev_hash = queries.chain_head(session=session) or (0, chain.GENESIS_HASH)
    entries = []
    kind = LedgerEntry if keep else _Row
    for fields in items:
        seq += 1
        entry = kind(seq=seq, created_at=utcnow(), prev_hash=prev_hash, entry_hash="", **fields)
        entry.entry_hash = prev_hash = chain.link(entry_content(entry), prev_hash)
        entries.append(entry)
    if keep:
        session.add_all(entries)
        session.flush()
    else:
        for start in range(0, len(entries), INSERT_BATCH):
            queries.insert_entries(session=session, entries=entries[start : start + INSERT_BATCH])
    return entries


@event.listens_for(OrmSession, "before_commit")
def _chain_pending(session: OrmSession) -> None:
    session.info.pop(AT_COMMIT, None)
    if pending := session.info.pop(_PENDING, None):
        session.flush()  # the transaction's own writes before the lock, not under it
        _chain(session, [fields for _, fields in pending], keep=False)


@event.listens_for(OrmSession, "after_soft_rollback")
def _drop_rolled_back(session: OrmSession, previous_transaction) -> None:
    """Entries appended inside the transaction or savepoint just rolled back go with it."""

    def inside(transaction) -> bool:
        while transaction is not None:
            if transaction is previous_transaction:
                return True
            transaction = transaction.parent
        return False

    if previous_transaction.parent is None:
        session.info.pop(AT_COMMIT, None)
    if pending := session.info.get(_PENDING):
        session.info[_PENDING] = [(owner, f) for owner, f in pending if not inside(owner)]


class StoredEntry:
    """A raw ledger row with the types the chain was hashed with: the creation time as ISO
    8601 text with microseconds and offset, the payload as a dict."""

    __slots__ = (
        "seq",
        "created",
        "artifact_type",
        "artifact_id",
        "field",
        "source_kind",
        "reference",
        "action",
        "actor_id",
        "payload",
        "prev_hash",
        "entry_hash",
    )

    def __init__(self, row):
        (
            self.seq,
            created,
            self.artifact_type,
            self.artifact_id,
            self.field,
            self.source_kind,
            self.reference,
            self.action,
            self.actor_id,
            payload,
            self.prev_hash,
            self.entry_hash,
        ) = row
        self.created = _iso(created)
        self.payload = json.loads(payload) if isinstance(payload, str) else (payload or {})


def _iso(value) -> str:
    """ISO 8601 with microseconds and +00:00, from SQLite's stored text
    ('2026-11-01 00:00:00.000001') or a driver's datetime."""
    if isinstance(value, str):
        if len(value) == 26 and value[10] == " ":
            return f"{value[:10]}T{value[11:]}+00:00"
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


_TEXT = json.encoder.encode_basestring  # a str as JSON text, as the canonical encoder writes it
_PLAIN_TYPES = (str, type(None))


def content_text(entry: StoredEntry) -> str:
    """`chain.canonical_json(entry_content(entry, entry.created))` of a stored entry, written
    field by field (no dict, no key sorting: a third less work per entry); an entry whose
    columns are not the stored types (text, whole numbers) goes the general way."""
    field, actor, seq = entry.field, entry.actor_id, entry.seq
    if not (
        type(seq) is int
        and (actor is None or type(actor) is int)
        and type(field) in _PLAIN_TYPES
        and type(entry.action) is str
        and type(entry.artifact_id) is str
        and type(entry.artifact_type) is str
        and type(entry.reference) is str
        and type(entry.source_kind) is str
    ):
        return chain.canonical_json(entry_content(entry, entry.created))
    return (
        f'{{"action":{_TEXT(entry.action)},"actor_id":{"null" if actor is None else actor},'
        f'"artifact_id":{_TEXT(entry.artifact_id)},"artifact_type":{_TEXT(entry.artifact_type)},'
        f'"created_at":{_TEXT(entry.created)},"field":{"null" if field is None else _TEXT(field)},'
        f'"payload":{chain.canonical_json(entry.payload)},"reference":{_TEXT(entry.reference)},'
        f'"seq":{seq},"source_kind":{_TEXT(entry.source_kind)}}}'
    )


BREAKS = {
    "prev_hash does not match the entry before it": "an entry was removed, inserted or reordered",
    "entry_hash does not match its content": "the entry was edited",
}


@dataclass
class ChainReport:
    entries: int = 0
    broken_at: int | None = None
    problem: str | None = None
    head: tuple[int, str] | None = None
    expected_head_problem: str | None = None
    expected_seen: bool = False  # the expected head's entry was among those read

    @property
    def ok(self) -> bool:
        return self.problem is None and self.expected_head_problem is None


WHOLE = ((0, None),)  # every entry


def parse_head(text: str) -> tuple[int, str]:
    """'SEQ:HASH' as (seq, hash). Raises ValueError naming the expected form."""
    seq, _, digest = text.strip().partition(":")
    if not seq.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(
            f"expected head {text!r} is not SEQ:HASH (a sequence number, a colon and the 64 hex "
            "digits `itsmreview ledger head` prints)"
        )
    return int(seq), digest


def verify_chain(
    *,
    session: Session,
    expect_head: str | None = None,
    on_entry: Callable[[StoredEntry], None] | None = None,
    progress: Callable[[str, int], None] | None = None,
    raise_on_break: bool = False,
    ranges: Sequence[tuple[int, int | None]] = WHOLE,
) -> ChainReport:
    """Recompute every hash in seq order in one stream of raw rows (bounded memory); report
    the first broken entry and, with `expect_head` ('SEQ:HASH' kept outside the database),
    whether that entry is there with that hash. `on_entry` sees every entry on the way.

    `ranges`: the entries checked, as (after, up to) seq ranges in order (None: no end).
    An entry's check needs only the stored hash before it, so a ledger's ranges can be
    checked apart (by two processes) and the first break is the least of theirs.

    Raises LedgerIntegrityError instead of reporting a break when `raise_on_break` is set.
    """
    report = ChainReport()
    expected = parse_head(expect_head) if expect_head else None

    # chain.find_break's checks, inline: one loop over the rows, each entry's content
    # written as canonical text and hashed once (the rest is still counted and seen after a
    # break, no longer trusted)
    sha256 = hashlib.sha256
    problem = None
    for after, until in ranges:
        previous = (after and queries.hash_through(session=session, seq=after)) or (
            chain.GENESIS_HASH
        )
        for row in queries.raw_entries(session=session, after=after, until=until):
            entry = StoredEntry(row)
            report.entries += 1
            if problem is None:
                if entry.prev_hash != previous:
                    problem = "prev_hash does not match the entry before it"
                elif (
                    sha256(f"{previous}\n{content_text(entry)}".encode()).hexdigest()
                    != entry.entry_hash
                ):
                    problem = "entry_hash does not match its content"
                if problem is not None:
                    report.broken_at = entry.seq
                    report.problem = f"{problem} ({BREAKS[problem]})"
                previous = entry.entry_hash
            if expected and entry.seq == expected[0]:
                report.expected_seen = True
                if entry.entry_hash != expected[1]:
                    report.expected_head_problem = (
                        f"entry {entry.seq} has hash {entry.entry_hash}, not the expected "
                        f"{expected[1]}: the chain was re-written from there or before"
                    )
            if on_entry is not None:
                on_entry(entry)
            if progress and report.entries % 100_000 == 0:
                progress("chain", report.entries)
    report.head = queries.head(session=session)
    if expected and not report.expected_seen:
        report.expected_head_problem = (
            f"entry {expected[0]} is missing: the ledger ends at "
            f"{report.head[0] if report.head else 'nothing'} (truncated, or the wrong database)"
        )
    if raise_on_break and report.broken_at is not None:
        raise LedgerIntegrityError(
            f"ledger entry {report.broken_at}: {report.problem}; entries from "
            f"{report.broken_at} on cannot be trusted"
        )
    return report
