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
from sqlalchemy import func
from sqlmodel import select


def _row_counts(session):
    return {
        name: session.exec(select(func.count()).select_from(table)).one()
        for name, table in metadata.tables.items()
    }


def test_import_materialises_and_reimport_is_a_no_op(session, tmp_path):
    path = write_csv(generate_log(300, seed=5), tmp_path / "small.csv")
    result = import_log(path, session=session, preset="bpi2013", data_dir=tmp_path / "d")
    session.commit()
    log = result.log
    assert result.created and log.n_cases == 300
    variants = queries.variants_frame(session=session, log_id=log.id)
    assert variants["case_count"].sum() == 300
    assert list(variants["rank"]) == list(range(1, len(variants) + 1))
    assert (Path(log.events_path) / "events.parquet").is_file()
    counts = _row_counts(session)
    again = import_log(path, session=session, preset="bpi2013", data_dir=tmp_path / "d")
    assert not again.created and again.log.id == log.id
    assert _row_counts(session) == counts


def test_changed_file_becomes_a_new_version(session, tmp_path):
    path = tmp_path / "log.csv"
    write_csv(generate_log(50, seed=1), path)
    import_log(path, session=session, name="L", preset="bpi2013", data_dir=tmp_path)
    write_csv(generate_log(60, seed=1), path)
    second = import_log(path, session=session, name="L", preset="bpi2013", data_dir=tmp_path)
    assert second.log.version == 2 and second.log.n_cases == 60


def test_failed_import_writes_nothing(session, tmp_path):
    frame = generate_log(40, seed=2)
    frame.loc[17, "Change Date+Time"] = "31/12/2012 10:00"
    path = write_csv(frame, tmp_path / "bad.csv")
    before = _row_counts(session)
    with pytest.raises(InvalidInput, match=r"1 timestamp\(s\).*row 19: '31/12/2012 10:00'"):
        import_log(path, session=session, preset="bpi2013", data_dir=tmp_path / "d")
    session.rollback()
    assert _row_counts(session) == before
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").rglob("*.parquet"))


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
        data_dir=tmp_path,
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
    log = import_log(path, session=session, mapping=mapping, data_dir=tmp_path / "d").log
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
        import_log(path, session=session, preset="bpi2013", data_dir=tmp_path / "d")
    session.rollback()
    assert _row_counts(session) == before
    assert list((tmp_path / "d" / "logs").iterdir()) == []


def test_the_portable_bulk_insert_for_other_drivers(session, tmp_path):
    log = import_log(
        write_csv(generate_log(5, seed=2), tmp_path / "x.csv"),
        session=session,
        preset="bpi2013",
        data_dir=tmp_path / "d",
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
    first = import_log(path, session=session, preset="bpi2013", data_dir=tmp_path / "d")

    def no_parsing(*_args, **_kwargs):
        raise AssertionError("the file was parsed although it was imported before")

    monkeypatch.setattr(service, "read_log", no_parsing)
    again = import_log(path, session=session, preset="bpi2013", data_dir=tmp_path / "d")
    assert not again.created and again.log.id == first.log.id


def _dead_pid() -> int:
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_leftovers_of_killed_imports_are_swept_by_the_next_import(session, tmp_path):
    import os
    import socket

    logs = tmp_path / "d" / "logs"
    staging = logs / ".import-killed"
    renamed = logs / "99-0123456789ab"  # renamed, killed before the commit: no row points at it
    running = logs / ".import-running"  # an import still under way in this process
    legacy = logs / "7-abcdefabcdef"  # written before owners were recorded: never touched
    for folder in (staging, renamed, running, legacy):
        folder.mkdir(parents=True)
        (folder / "events.parquet").write_bytes(b"x" * 1000)
    dead = f"{socket.gethostname()} {_dead_pid()}"
    (staging / ".owner").write_text(dead)
    (renamed / ".owner").write_text(dead)
    (running / ".owner").write_text(f"{socket.gethostname()} {os.getpid()}")
    path = write_csv(generate_log(50, seed=9), tmp_path / "small.csv")
    result = import_log(path, session=session, preset="bpi2013", data_dir=tmp_path / "d")
    session.commit()
    assert not staging.exists() and not renamed.exists()
    assert running.exists() and legacy.exists()
    kept = Path(result.log.events_path)
    assert kept.is_dir() and (kept / "events.parquet").is_file()
    import_log(  # a later import keeps the committed folder of the first
        write_csv(generate_log(60, seed=10), tmp_path / "other.csv"),
        session=session,
        preset="bpi2013",
        data_dir=tmp_path / "d",
    )
    session.commit()
    assert kept.is_dir()


def test_an_import_killed_with_sigkill_leaves_nothing_after_the_next_import(configured, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from itsmreview.db import session_scope

    path = write_csv(generate_log(30_000, seed=11), tmp_path / "big.csv")
    logs = Path(configured.data_dir) / "logs"
    for attempt in range(3):
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "itsmreview.cli",
                "log",
                "import",
                str(path),
                "--preset",
                "bpi2013",
                "--name",
                f"killed{attempt}",
            ],
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            if list(logs.glob(".import-*")):
                break
            time.sleep(0.005)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            break
    else:
        pytest.fail("the import finished before it could be killed three times")
    assert list(logs.glob(".import-*")) or list(logs.glob("*-*"))  # it left something behind
    small = write_csv(generate_log(40, seed=12), tmp_path / "small.csv")
    with session_scope() as session:
        import_log(small, session=session, preset="bpi2013")
    with session_scope() as session:
        stored = queries.stored_event_paths(session=session)
    assert sorted(str(p.resolve()) for p in logs.iterdir()) == sorted(stored)
