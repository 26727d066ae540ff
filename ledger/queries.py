"""The ledger chain's statements: the head, appending (insert, lock) and streaming entries."""

from collections.abc import Iterator

from itsmreview.db import bulk_insert_records, driver_rows
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


RAW_ENTRIES = (
    "SELECT seq, created_at, artifact_type, artifact_id, field, source_kind, reference, action,"
    " actor_id, payload, prev_hash, entry_hash FROM ledger_entries WHERE seq > ?"
    " ORDER BY seq LIMIT ?"
)


def raw_entries(*, session: Session, batch: int = 20_000) -> Iterator[tuple]:
    """Every entry as the driver returns it (no SQLAlchemy row or type processing, which
    costs more than hashing): created_at as text (SQLite) or datetime (PostgreSQL), payload
    as JSON text or dict; the columns of ENTRY_COLUMNS. In sequence order, in batches."""
    after = 0
    while True:
        rows = driver_rows(session, RAW_ENTRIES, (after, batch))
        if not rows:
            return
        yield from rows
        after = rows[-1][0]


def head(*, session: Session, excluding: tuple[str, ...] = ()) -> tuple[int, str] | None:
    """Sequence number and hash of the newest entry (not of the excluded artifact types)."""
    query = select(LedgerEntry.seq, LedgerEntry.entry_hash)
    if excluding:
        query = query.where(LedgerEntry.artifact_type.not_in(excluding))
    row = session.exec(query.order_by(LedgerEntry.seq.desc()).limit(1)).first()
    return (int(row[0]), str(row[1])) if row else None
