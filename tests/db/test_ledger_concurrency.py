"""Appends from several sessions at once keep one unbroken chain on both backends."""

from itsmreview.ledger.service import append_entry, verify_chain
from sqlmodel import Session


def test_concurrent_appends_keep_one_chain(engine, at_once):
    with Session(engine) as session:  # a first entry, so every writer reads a last entry
        append_entry(
            session=session,
            artifact_type="task",
            artifact_id=0,
            action="seed",
            source_kind="system",
        )
        session.commit()
    writers = list(range(1, 9))

    def append(number):
        with Session(engine) as session:
            append_entry(
                session=session,
                artifact_type="task",
                artifact_id=number,
                action="import",
                source_kind="expert",
            )
            session.commit()

    assert at_once(append, writers) == []
    with Session(engine) as session:
        report = verify_chain(session=session)
    assert report.ok and report.entries == len(writers) + 1


def _entry(session, number, action="import"):
    return append_entry(
        session=session,
        artifact_type="task",
        artifact_id=number,
        action=action,
        source_kind="expert",
    )


def test_entries_chained_at_commit_keep_their_order_and_leave_with_a_rollback(engine):
    from itsmreview.ledger.models import LedgerEntry
    from itsmreview.ledger.service import chain_at_commit
    from sqlmodel import select

    with Session(engine) as session:
        chain_at_commit(session)
        assert _entry(session, 1) is None  # not chained yet
        with session.begin_nested() as trial:
            _entry(session, 2, "tried")
            trial.rollback()
        _entry(session, 3)
        assert session.exec(select(LedgerEntry)).all() == []
        session.commit()
        chain_at_commit(session)
        _entry(session, 4, "rolled back")
        session.rollback()
        assert _entry(session, 5).seq == 3  # the mark ends with its transaction
        session.commit()
        rows = session.exec(select(LedgerEntry).order_by(LedgerEntry.seq)).all()
        assert [(r.seq, r.artifact_id) for r in rows] == [(1, "1"), (2, "3"), (3, "5")]
        assert verify_chain(session=session).ok


def test_appends_chained_at_commit_from_many_sessions_keep_one_chain(engine, at_once):
    from itsmreview.ledger.service import chain_at_commit

    def append(number):
        with Session(engine) as session:
            chain_at_commit(session)
            _entry(session, number)
            _entry(session, number, "status")
            session.commit()

    assert at_once(append, list(range(1, 9))) == []
    with Session(engine) as session:
        report = verify_chain(session=session)
    assert report.ok and report.entries == 16
