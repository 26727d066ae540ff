from pathlib import Path

import pandas as pd
import pytest
from itsmreview.coverage import queries, service
from itsmreview.coverage.eventlog import ColumnMapping
from itsmreview.coverage.models import EventLog, LogActivity, LogRoleValue, LogVariant
from itsmreview.coverage.service import import_log
from itsmreview.coverage.synthetic import generate_log, write_csv
from itsmreview.db import insert_rows
from itsmreview.errors import InvalidInput
from itsmreview.schema import metadata
from itsmreview.storage import get_storage
from sqlalchemy import func
from sqlmodel import select


def _row_counts(session):
    return {
        name: session.exec(select(func.count()).select_from(table)).one()
        for name, table in metadata.tables.items()
    }


def test_import_materialises_and_reimport_is_a_no_op(session, tmp_path):
    path = write_csv(generate_log(300, seed=5), tmp_path / "small.csv")
    result = import_log(path, session=session, preset="bpi2013")
    session.commit()
    log = result.log
    assert result.created and log.n_cases == 300
    variants = queries.variants_frame(session=session, log_id=log.id)
    assert variants["case_count"].sum() == 300
    assert list(variants["rank"]) == list(range(1, len(variants) + 1))
    assert not Path(log.events_path).is_absolute()
    assert get_storage().exists(log.events_path, "events.parquet")
    counts = _row_counts(session)
    again = import_log(path, session=session, preset="bpi2013")
    assert not again.created and again.log.id == log.id
    assert _row_counts(session) == counts


def test_changed_file_becomes_a_new_version(session, tmp_path):
    path = tmp_path / "log.csv"
    write_csv(generate_log(50, seed=1), path)
    import_log(path, session=session, name="L", preset="bpi2013")
    write_csv(generate_log(60, seed=1), path)
    second = import_log(path, session=session, name="L", preset="bpi2013")
    assert second.log.version == 2 and second.log.n_cases == 60


def test_failed_import_writes_nothing(session, tmp_path):
    frame = generate_log(40, seed=2)
    frame.loc[17, "Change Date+Time"] = "31/12/2012 10:00"
    path = write_csv(frame, tmp_path / "bad.csv")
    before = _row_counts(session)
    with pytest.raises(InvalidInput, match=r"1 timestamp\(s\).*row 19: '31/12/2012 10:00'"):
        import_log(path, session=session, preset="bpi2013")
    session.rollback()
    assert _row_counts(session) == before
    assert not any((tmp_path / "data").rglob("*.parquet"))


def test_unknown_preset_and_csv_without_mapping(session, tmp_path):
    path = write_csv(generate_log(5, seed=2), tmp_path / "x.csv")
    with pytest.raises(InvalidInput, match="unknown preset 'bpi2099'; presets: bpi2013"):
        import_log(path, session=session, preset="bpi2099")
    with pytest.raises(InvalidInput, match="needs --preset"):
        import_log(path, session=session)


@pytest.mark.realdata
def test_bpi2013_preset_imports_the_real_file_with_no_options(session, tmp_path, real_file):
    result = import_log(
        real_file("logs", "bpi2013_incidents.csv.gz"),
        session=session,
        preset="bpi2013",
    )
    session.commit()
    log = session.exec(select(EventLog)).one()
    assert (log.n_cases, log.n_events, log.n_variants) == (7554, 65533, 2278)
    stored = session.exec(
        select(func.sum(LogVariant.case_count)).where(
            LogVariant.log_id == result.log.id, LogVariant.level == "raw"
        )
    ).one()
    assert stored == 7554


def test_text_with_quotes_backslashes_tabs_and_unicode_round_trips(session, tmp_path):
    # variants go to the database in bulk (COPY on PostgreSQL): every character must survive
    activities = ['say "hi"', "back\\slash", "tab\there", "Zürich → 東京", "new\nline", "a,b"]
    frame = pd.DataFrame(
        {
            "case": ['c"1', 'c"1', 'c"1', "c\\2", "c\\2", "c\\2"],
            "activity": activities,
            "time": pd.date_range("2024-01-01", periods=6, freq="h").strftime("%Y-%m-%d %H:%M"),
            "team": ["L1", "L2 \\ ops", "L1", "é", "L1", "L1"],
        }
    )
    path = tmp_path / "tricky.csv"
    frame.to_csv(path, index=False)
    mapping = ColumnMapping(case="case", activity="activity", timestamp="time", roles=("team",))
    log = import_log(path, session=session, mapping=mapping).log
    session.commit()
    variants = queries.variants_frame(session=session, log_id=log.id)
    assert sorted(map(list, variants["sequence"])) == sorted([activities[:3], activities[3:]])
    assert sorted(x for ids in variants["example_case_ids"] for x in ids) == ['c"1', "c\\2"]
    roles = session.exec(select(LogRoleValue.value).where(LogRoleValue.log_id == log.id)).all()
    assert sorted(roles) == ["L1", "L2 \\ ops", "é"]


def test_an_import_failing_while_storing_leaves_no_rows_and_no_files(
    session, tmp_path, monkeypatch
):
    path = write_csv(generate_log(60, seed=3), tmp_path / "log.csv")
    before = _row_counts(session)

    def broken(*_args):
        raise RuntimeError("disk full")

    monkeypatch.setattr(service, "_insert_materialised", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        import_log(path, session=session, preset="bpi2013")
    session.rollback()
    leases = queries.lease_states(session=session)
    assert _row_counts(session) == before | {"import_leases": len(leases)}
    assert not any((tmp_path / "data").rglob("*.parquet"))
    # its files are gone; its lease too, or (SQLite, whose write lock the failed import
    # held) left running to expire: never published
    assert set(leases.values()) <= {"running"}


def test_the_portable_bulk_insert_for_other_drivers(session, tmp_path):
    log = import_log(
        write_csv(generate_log(5, seed=2), tmp_path / "x.csv"),
        session=session,
        preset="bpi2013",
    ).log
    rows = [(log.id, 'say "hi"', 3, 2), (log.id, "back\\slash", 1, 1)]
    insert_rows(session, "log_activities", ("log_id", "name", "event_count", "case_count"), rows)
    stored = session.exec(
        select(LogActivity.name, LogActivity.event_count).where(
            LogActivity.log_id == log.id, LogActivity.name.in_(['say "hi"', "back\\slash"])
        )
    ).all()
    assert sorted(stored) == [("back\\slash", 1), ('say "hi"', 3)]


def test_reimporting_a_large_file_from_the_same_path_reads_nothing(session, tmp_path, monkeypatch):
    path = write_csv(generate_log(30, seed=4), tmp_path / "big.csv")
    monkeypatch.setattr(service, "PARALLEL_HASH_BYTES", 0)  # treat every file as large
    first = import_log(path, session=session, preset="bpi2013")

    def no_parsing(*_args, **_kwargs):
        raise AssertionError("the file was parsed although it was imported before")

    monkeypatch.setattr(service, "read_log", no_parsing)
    again = import_log(path, session=session, preset="bpi2013")
    assert not again.created and again.log.id == first.log.id
