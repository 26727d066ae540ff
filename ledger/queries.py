"""The ledger chain's statements: the head, appending (insert, lock) and streaming entries."""

from collections import namedtuple
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

from itsmreview.db import bulk_insert_records, driver_rows, json_reader
from itsmreview.ledger.models import LedgerEntry
from sqlalchemy import insert, text
from sqlmodel import Session, select


def last_entry(*, session: Session) -> LedgerEntry | None:
    return session.exec(select(LedgerEntry).order_by(LedgerEntry.seq.desc()).limit(1)).first()


def chain_head(*, session: Session) -> tuple[int, str] | None:
    """(seq, entry hash) of the last entry: all that appending needs of it."""
    row = session.exec(
        select(LedgerEntry.seq, LedgerEntry.entry_hash).order_by(LedgerEntry.seq.desc()).limit(1)
    ).first()
    return None if row is None else (row[0], row[1])


def insert_entries(*, session: Session, entries: list[LedgerEntry]) -> None:
    """Insert chained entries as rows, in one statement (COPY on PostgreSQL past
    BULK_ENTRIES of them)."""
    columns = [c.name for c in LedgerEntry.__table__.columns if c.name != "id"]
    records = [{c: getattr(e, c) for c in columns} for e in entries]
    if len(records) >= BULK_ENTRIES:
        bulk_insert_records(session, LedgerEntry.__table__, records)
        return
    session.connection().execute(insert(LedgerEntry.__table__), records)


BULK_ENTRIES = 1_000  # entries of one insert that go in at driver speed (imports)


def lock_chain(*, session: Session) -> None:
    """Serialise appends until the transaction ends: an advisory lock on PostgreSQL; on
    SQLite, a write that changes nothing but takes the database's single write lock (waiting
    up to the busy timeout), so the last entry is read by one writer at a time."""
    if session.get_bind().dialect.name == "postgresql":
        session.exec(text("SELECT pg_advisory_xact_lock(727001)"))
    else:
        session.exec(text("UPDATE ledger_entries SET seq = seq WHERE 0 = 1"))


ENTRY_COLUMNS = (
    LedgerEntry.seq,
    LedgerEntry.created_at,
    LedgerEntry.artifact_type,
    LedgerEntry.artifact_id,
    LedgerEntry.field,
    LedgerEntry.source_kind,
    LedgerEntry.reference,
    LedgerEntry.action,
    LedgerEntry.actor_id,
    LedgerEntry.payload,
    LedgerEntry.prev_hash,
    LedgerEntry.entry_hash,
)


def entry_rows(*, session: Session, where=None, batch: int = 5000) -> Iterator:
    """Entries (or those matching `where`) in chain order as plain rows with the entry's
    fields, read in batches: memory stays bounded whatever the ledger's length. Core rows
    (no ORM loading, which cost more than reading them)."""
    connection = session.connection()
    after = 0
    while True:
        query = select(*ENTRY_COLUMNS).where(LedgerEntry.seq > after)
        if where is not None:
            query = query.where(where)
        rows = connection.execute(query.order_by(LedgerEntry.seq).limit(batch)).all()
        if not rows:
            return
        yield from rows
        after = rows[-1].seq


EntryRow = namedtuple("EntryRow", [c.key for c in ENTRY_COLUMNS])
_ENTRY_LIST = ", ".join(EntryRow._fields)


def entries_of_types(
    *, session: Session, artifact_types: Sequence[str], batch: int = 5_000
) -> Iterator[EntryRow]:
    """The entries of these artifact types in chain order, with the fields (and types) of
    `entry_rows`' rows, read as the driver's rows in batches (a fifth of the time of
    SQLAlchemy's rows for an export's hundreds of thousands of entries), 5,000 at a time (20,000
    raised an export's peak by 20-35 MB)."""
    sql = (
        # `|| ''` keeps the type's index out of the plan: on it SQLite sorted every matching
        # entry for each batch (10 s of reads for 400,000 entries, 0.2 s on the seq index)
        f"SELECT {_ENTRY_LIST} FROM ledger_entries WHERE seq > ? AND artifact_type || '' IN "
        f"({', '.join('?' * len(artifact_types))}) ORDER BY seq LIMIT ?"
    )
    read_json = json_reader(session)
    created, payload = EntryRow._fields.index("created_at"), EntryRow._fields.index("payload")
    after = 0
    while True:
        rows = driver_rows(session, sql, (after, *artifact_types, batch))
        if not rows:
            return
        for row in rows:
            values = list(row)
            values[created] = _utc(row[created])
            values[payload] = read_json(row[payload])
            yield EntryRow._make(values)
        after = rows[-1][0]


def _utc(value) -> datetime:
    """A stored time as the column's type reads it: SQLite's text or the driver's datetime,
    as an aware datetime in UTC."""
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


RAW_ENTRIES = (
    "SELECT seq, {created}, artifact_type, artifact_id, field, source_kind, reference, action,"
    " actor_id, payload, prev_hash, entry_hash FROM ledger_entries WHERE seq > ?"
    " ORDER BY seq LIMIT ?"
)
# created_at as SQLite stores it ('2026-11-01 00:00:00.000001'): PostgreSQL prints its UTC
# time as such text (DateStyle ISO, which psycopg needs anyway) faster than the driver makes
# and the chain formats a datetime (2.0 s against 2.8 s for 776,667 entries, and 1.5 s less
# formatting; to_char took 2.4 s)
_CREATED_TEXT = {"postgresql": "(created_at AT TIME ZONE 'UTC')::text"}


def raw_entries(
    *, session: Session, after: int = 0, until: int | None = None, batch: int = 20_000
) -> Iterator[tuple]:
    """Every entry after seq `after` (up to `until`) as the driver returns it (no SQLAlchemy
    row or type processing, which costs more than hashing): created_at as UTC text with no
    offset (as SQLite stores it), payload as JSON text; the columns of ENTRY_COLUMNS. In
    sequence order, in batches (the upper bound is applied here, not in SQL: a range on seq
    made PostgreSQL, without fresh statistics, read the whole range for every batch)."""
    sql = RAW_ENTRIES.format(
        created=_CREATED_TEXT.get(session.get_bind().dialect.name, "created_at")
    )
    while until is None or after < until:
        limit = batch if until is None else min(batch, until - after)
        rows = driver_rows(session, sql, (after, limit))
        if not rows:
            return
        if until is not None and rows[-1][0] > until:
            yield from (row for row in rows if row[0] <= until)
            return
        yield from rows
        after = rows[-1][0]


def hash_through(*, session: Session, seq: int) -> str | None:
    """The stored hash of the newest entry at or before `seq`: what the entry after it links
    to."""
    row = session.exec(
        select(LedgerEntry.entry_hash)
        .where(LedgerEntry.seq <= seq)
        .order_by(LedgerEntry.seq.desc())
        .limit(1)
    ).first()
    return None if row is None else str(row)


def head(*, session: Session, excluding: tuple[str, ...] = ()) -> tuple[int, str] | None:
    """Sequence number and hash of the newest entry (not of the excluded artifact types)."""
    query = select(LedgerEntry.seq, LedgerEntry.entry_hash)
    if excluding:
        query = query.where(LedgerEntry.artifact_type.not_in(excluding))
    row = session.exec(query.order_by(LedgerEntry.seq.desc()).limit(1)).first()
    return (int(row[0]), str(row[1])) if row else None
