"""Appends from several sessions at once keep one unbroken chain on both backends."""

import threading

from itsmreview.ledger.service import append_entry, verify_chain
from sqlmodel import Session


def test_concurrent_appends_keep_one_chain(engine):
    with Session(engine) as session:  # a first entry, so every writer reads a last entry
        append_entry(
            session=session,
            artifact_type="task",
            artifact_id=0,
            action="seed",
            source_kind="system",
        )
        session.commit()
    writers = 8
    barrier = threading.Barrier(writers)
    errors = []

    def append(number):
        with Session(engine) as session:
            session.connection()  # open the connection before the race starts
            barrier.wait()
            try:
                append_entry(
                    session=session,
                    artifact_type="task",
                    artifact_id=number,
                    action="import",
                    source_kind="expert",
                )
                session.commit()
            except Exception as exc:  # noqa: BLE001 - any failure fails the test below
                errors.append(exc)
                session.rollback()

    threads = [threading.Thread(target=append, args=(n,)) for n in range(1, writers + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    with Session(engine) as session:
        report = verify_chain(session=session)
    assert report.ok and report.entries == writers + 1
