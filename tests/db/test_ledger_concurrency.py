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
