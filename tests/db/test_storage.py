"""Storage of log files (issue 30): relative keys, replicas that see one folder under
different paths, an S3 server, leases that make cleanup safe with several writers, and the
migration that makes stored locations relative."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from itsmreview import db as db_module
from itsmreview import settings as settings_module
from itsmreview import storage as storage_module
from itsmreview.coverage import queries
from itsmreview.coverage.explorer import variant_detail
from itsmreview.coverage.leases import Lease, sweep_leftovers
from itsmreview.coverage.models import ImportLease, LeaseState
from itsmreview.coverage.report import coverage_report
from itsmreview.coverage.service import import_log
from itsmreview.coverage.synthetic import generate_log, write_csv
from itsmreview.db import session_scope, utcnow
from itsmreview.errors import Conflict, InvalidInput
from itsmreview.storage import get_storage, storage_from_url
from sqlmodel import select


def _use(monkeypatch, data_dir: Path) -> None:
    """Act as a replica whose data folder (and so storage) is `data_dir`."""
    monkeypatch.setenv("ITSMREVIEW_DATA_DIR", str(data_dir))
    settings_module.get_settings.cache_clear()


def _first_sequence(session, log_name: str) -> list[str]:
    log = queries.latest_log(session=session, name=log_name)
    return list(queries.variants_frame(session=session, log_id=log.id)["sequence"].iloc[0])


def _readable(log_name: str) -> None:
    """The variants page's data and the explorer's cases of `log_name` read back."""
    with session_scope() as session:
        detail = variant_detail(
            session=session, log_name=log_name, sequence=_first_sequence(session, log_name)
        )
        report, _ = coverage_report(session=session, log_name=log_name)
    assert detail.found and detail.case_count > 0 and len(detail.examples) > 0
    assert report.gaps  # its variants, read from the stored cases


# hostile keys --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("../etc/passwd", "'..' segment"),
        ("logs/../../x", "'..' segment"),
        ("/etc/passwd", "absolute path"),
        ("C:\\Windows\\x", "absolute path"),
        ("logs/a\x00b", "NUL"),
        ("", "empty"),
        ("logs/" + "x" * 300, "longer than 255 bytes"),
        ("a/" * 600, "characters long"),
    ],
)
def test_hostile_keys_are_refused_with_what_is_wrong(tmp_path, key, says):
    storage = storage_from_url(str(tmp_path))
    for action in (
        lambda: storage.path(key),
        lambda: storage.read_table(key),
        lambda: storage.write_bytes(b"x", key),
        lambda: storage.delete(key),
    ):
        with pytest.raises(InvalidInput, match=says):
            action()
    assert list(tmp_path.iterdir()) == []


def test_a_link_out_of_the_local_root_is_refused(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "logs").symlink_to(outside)
    with pytest.raises(InvalidInput, match="through a link"):
        storage_from_url(str(root)).write_bytes(b"x", "logs", "f")
    assert list(outside.iterdir()) == []


def test_storage_urls():
    assert storage_from_url("s3://bucket/some/prefix/").root == "bucket/some/prefix"
    assert storage_from_url("file:///srv/itsm").root == "/srv/itsm"
    with pytest.raises(InvalidInput, match="no bucket"):
        storage_from_url("s3:///prefix")
    with pytest.raises(InvalidInput, match="the prefix"):
        storage_from_url("s3://bucket/a/../b")
    with pytest.raises(InvalidInput, match="unknown scheme 'gs'"):
        storage_from_url("gs://bucket")


# replicas ------------------------------------------------------------------------------------


def test_replicas_that_see_the_folder_under_other_paths_delete_nothing(
    configured, tmp_path, monkeypatch
):
    """Replica A sees the shared folder as `shared`, replica B through a link under another
    path. They import in turn; nothing of the other's is deleted and each reads the other's
    logs (variants, explorer cases, coverage)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    elsewhere = tmp_path / "mnt" / "itsm"
    elsewhere.parent.mkdir()
    elsewhere.symlink_to(shared)
    replicas = {"a": shared, "b": elsewhere}
    for round_ in range(2):
        for name, folder in replicas.items():
            _use(monkeypatch, folder)
            path = write_csv(
                generate_log(60 + round_, seed=round_ * 10 + ord(name)),
                tmp_path / f"{name}{round_}.csv",
            )
            with session_scope() as session:
                log = import_log(path, session=session, name=f"log-{name}", preset="bpi2013").log
            assert not Path(log.events_path).is_absolute()
    with session_scope() as session:
        stored = {log.events_path for log in queries.list_logs(session=session)}
    assert len(stored) == 4
    on_disk = {p.parent.relative_to(shared).as_posix() for p in shared.rglob("events.parquet")}
    assert on_disk == stored
    for folder in replicas.values():
        _use(monkeypatch, folder)
        _readable("log-a")
        _readable("log-b")


# S3 ------------------------------------------------------------------------------------------


def test_a_folder_copied_to_s3_and_back_keeps_its_tree_and_lists_no_folders(s3_storage, tmp_path):
    """A Harbor-like folder goes up file by file and comes back whole; once deleted, its
    prefix lists nothing (SeaweedFS keeps the emptied folder, which is not a file)."""
    folder = tmp_path / "task"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text("[task]\n")
    (folder / "tests" / "test.sh").write_text("exit 0\n")
    assert s3_storage.upload_tree(folder, "uploads/u1") == 2
    assert s3_storage.list("uploads/u1") == [
        "uploads/u1/task/task.toml",
        "uploads/u1/task/tests/test.sh",
    ]
    back = tmp_path / "back"
    s3_storage.download_tree(back, "uploads/u1")
    assert (back / "task" / "tests" / "test.sh").read_text() == "exit 0\n"
    s3_storage.delete("uploads/u1/task")
    assert s3_storage.list("uploads") == []


def test_a_log_imported_to_s3_is_read_back_and_exported(s3_storage, reviewed, tmp_path):
    """`reviewed` imports its log (with the S3 storage configured first) and reviews a round;
    the log's files are in the bucket, its variants read back, and an export reads its cases
    for the coverage evidence."""
    from itsmreview.exports.service import export_set

    assert s3_storage.scheme == "s3"
    with session_scope() as session:
        log = queries.latest_log(session=session, name="synth")
    assert s3_storage.list(log.events_path) == [
        f"{log.events_path}/cases.parquet",
        f"{log.events_path}/events.parquet",
        f"{log.events_path}/samples.parquet",
    ]
    assert not any(tmp_path.rglob("*.parquet"))  # nothing went to a local folder
    _readable("synth")
    with session_scope() as session:
        lead = session.merge(reviewed["lead"])
        result = export_set(tmp_path / "out", session=session, actor=lead)
    assert result.tasks > 0
    coverage = (tmp_path / "out" / "evidence" / "coverage.json").read_text()
    assert '"synth"' in coverage


def test_the_log_engine_reads_an_events_file_where_it_lies_in_s3(s3_storage, real_file, tmp_path):
    """The engine materialises BPI 2013's events from the bucket (DuckDB reads the file
    through the storage's file system; no copy on a local disk) exactly as the in-memory path
    does from the same events."""
    from itsmreview.coverage.engine import materialise_file
    from itsmreview.coverage.eventlog import PRESETS, read_log
    from itsmreview.coverage.variants import materialise
    from pandas.testing import assert_frame_equal

    events = read_log(real_file("logs", "bpi2013_incidents.csv.gz"), PRESETS["bpi2013"])[0]
    s3_storage.write_frame(events, "engine", "events.parquet")
    spill = tmp_path / "spill"
    spill.mkdir()
    found = materialise_file(
        f"s3://{s3_storage.path('engine', 'events.parquet')}",
        filesystem=s3_storage.fs,
        spill_dir=spill,
    )
    expected = materialise(events)
    for name in ("variants", "df_pairs", "activities", "role_values", "cases"):
        assert_frame_equal(getattr(found, name), getattr(expected, name), check_exact=True)
    assert found.summary == expected.summary
    assert found.summary["variants"] > 1000
    assert not any(tmp_path.rglob("*.parquet"))  # read where it lies


def _warm_up_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "storage-warm-up"]


def test_an_s3_client_is_opened_once_before_the_first_page_needs_it(s3_storage, monkeypatch):
    monkeypatch.setattr(storage_module, "_warmed", set())
    assert "fs" not in vars(s3_storage)
    storage_module.warm_up_in_background()
    started = _warm_up_threads()
    assert len(started) == 1
    started[0].join(30)
    assert {"fs", "arrow_fs"} <= set(vars(s3_storage))  # made, and kept for the pages
    storage_module.warm_up_in_background()
    assert _warm_up_threads() == []  # once per process


def test_a_local_storage_needs_no_warm_up(tmp_path, monkeypatch):
    _use(monkeypatch, tmp_path)
    monkeypatch.setattr(storage_module, "_warmed", set())
    storage_module.warm_up_in_background()
    assert _warm_up_threads() == []


# leases --------------------------------------------------------------------------------------


def _lease(session, key: str, state: LeaseState, expires_in_s: float) -> None:
    session.add(
        ImportLease(key=key, state=state, expires_at=utcnow() + timedelta(seconds=expires_in_s))
    )


def test_cleanup_removes_only_ended_or_expired_staging_never_published(configured, tmp_path):
    storage = get_storage()
    cases = {
        "logs/ended": (LeaseState.ended, 600),
        "logs/expired": (LeaseState.running, -5),
        "logs/running": (LeaseState.running, 600),
        "logs/published": (LeaseState.published, -5),
        "logs/unknown": None,  # no lease at all: never touched
    }
    for key in cases:
        storage.write_bytes(b"x", key, "events.parquet")
    with session_scope() as session:
        for key, lease in cases.items():
            if lease:
                _lease(session, key, *lease)
    path = write_csv(generate_log(40, seed=1), tmp_path / "x.csv")
    with session_scope() as session:  # an import sweeps first
        kept = import_log(path, session=session, preset="bpi2013").log.events_path
    left = {key.split("/")[1] for key in storage.list("logs")}
    assert left == {"running", "published", "unknown", kept.split("/")[1]}
    with session_scope() as session:
        states = queries.lease_states(session=session)
    assert states == {
        "logs/running": "running",
        "logs/published": "published",
        kept: "published",
    }


def test_a_published_log_is_never_swept_even_with_an_expired_running_lease(configured):
    """A log row that points at a key protects it whatever its lease says."""
    storage = get_storage()
    path = write_csv(generate_log(30, seed=2), Path(configured.data_dir).parent / "y.csv")
    with session_scope() as session:
        log = import_log(path, session=session, preset="bpi2013").log
    with session_scope() as session:
        lease = session.exec(select(ImportLease).where(ImportLease.key == log.events_path)).one()
        lease.state, lease.expires_at = LeaseState.running, utcnow() - timedelta(hours=1)
    with session_scope() as session:
        assert sweep_leftovers(session=session) == []
    assert storage.exists(log.events_path, "cases.parquet")


def test_an_import_whose_expired_lease_was_reaped_cannot_publish(configured):
    storage = get_storage()
    with session_scope() as session:
        lease = Lease(session, "logs/slow")
        lease.seconds = 0.05
        lease.begin()
        lease._stop_renewing()  # a stalled import: it renews no more
        storage.write_bytes(b"x", "logs/slow", "events.parquet")
        time.sleep(0.1)
        assert sweep_leftovers(session=session) == ["logs/slow"]
        with pytest.raises(Conflict, match="removed by another import's cleanup"):
            lease.publish(session)
    assert not storage.exists("logs/slow", "events.parquet")


def test_a_lease_is_renewed_while_its_import_runs(configured):
    with session_scope() as session:
        lease = Lease(session, "logs/long")
        lease.seconds = 0.6
        lease.begin()
        first = _expiry(session, "logs/long")
        time.sleep(0.5)
        assert _expiry(session, "logs/long") > first
        lease.publish(session)
        session.rollback()  # the caller's transaction did not commit: the lease runs on


def _expiry(session, key):
    session.expire_all()
    return session.exec(select(ImportLease.expires_at).where(ImportLease.key == key)).one()


def test_kill_9_mid_import_loses_nothing_and_its_staging_goes_after_its_lease(
    configured, tmp_path, monkeypatch
):
    """A `log import` killed with SIGKILL while it writes its files leaves the published
    logs intact; a later import's cleanup leaves the dead import's staging while its lease
    lasts and removes it once the lease expired."""
    storage = get_storage()
    monkeypatch.setenv("ITSMREVIEW_STORAGE_LEASE_S", "6")
    settings_module.get_settings.cache_clear()
    small = write_csv(generate_log(40, seed=12), tmp_path / "small.csv")
    with session_scope() as session:
        published = import_log(small, session=session, name="before", preset="bpi2013").log
    big = write_csv(generate_log(30_000, seed=11), tmp_path / "big.csv")
    logs = Path(configured.data_dir) / "logs"
    dead_key, mine = None, Path(published.events_path).name
    for attempt in range(3):
        process = subprocess.Popen(
            [sys.executable, "-m", "itsmreview.cli", "log", "import", str(big)]
            + ["--preset", "bpi2013", "--name", f"killed{attempt}"],
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            staged = [p.parent for p in logs.glob("*/*.parquet") if p.parent.name != mine]
            if staged:
                dead_key = f"logs/{staged[0].name}"
                break
            time.sleep(0.005)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            break
    else:
        pytest.fail("the import finished before it could be killed three times")
    assert dead_key is not None
    with session_scope() as session:
        assert queries.lease_states(session=session)[dead_key] == "running"
    later = write_csv(generate_log(50, seed=13), tmp_path / "later.csv")
    with session_scope() as session:  # its lease still lasts: kept
        import_log(later, session=session, name="during", preset="bpi2013")
    assert storage.exists(dead_key)
    with session_scope() as session:
        expires = _expiry(session, dead_key)
    time.sleep(max(0.0, (expires - utcnow()).total_seconds()) + 0.2)
    last = write_csv(generate_log(55, seed=14), tmp_path / "last.csv")
    with session_scope() as session:
        import_log(last, session=session, name="after", preset="bpi2013")
    assert not storage.exists(dead_key)
    with session_scope() as session:
        assert dead_key not in queries.lease_states(session=session)
        stored = {log.name: log.events_path for log in queries.list_logs(session=session)}
    assert set(stored) == {"before", "during", "after"}
    for name, key in stored.items():
        assert storage.exists(key, "events.parquet") and storage.exists(key, "cases.parquet")
        _readable(name)


# the migration -------------------------------------------------------------------------------


def test_the_migration_makes_locations_under_the_root_relative(
    empty_database_url, tmp_path, monkeypatch, caplog
):
    root = tmp_path / "data"
    (root / "logs" / "1-abc").mkdir(parents=True)
    link = tmp_path / "seen-as"
    link.symlink_to(root)
    _use(monkeypatch, root)
    engine = db_module.create_db_engine(empty_database_url)
    db_module.upgrade_database(engine, revision="0018")
    locations = {
        1: str(root / "logs" / "1-abc"),
        2: str(link / "logs" / "2-def"),  # under the root through a link
        3: "/elsewhere/logs/3-ghi",
        4: "logs/4-already",
    }
    with engine.begin() as connection:
        for log_id, location in locations.items():
            connection.execute(
                sa.text(
                    "INSERT INTO event_logs (id, name, version, source_path, sha256, mapping, "
                    "mapping_hash, events_path, n_cases, n_events, n_activities, n_variants, "
                    "n_collapsed_variants, n_df_pairs, n_singleton_variants, imported_at) "
                    "VALUES (:id, :name, 1, 'x', 'x', '{}', 'x', :path, 0, 0, 0, 0, 0, 0, 0, "
                    ":at)"
                ),
                {"id": log_id, "name": f"l{log_id}", "path": location, "at": utcnow()},
            )
    with caplog.at_level("WARNING"):
        db_module.upgrade_database(engine)
    with engine.connect() as connection:
        found = dict(connection.execute(sa.text("SELECT id, events_path FROM event_logs")).all())
    engine.dispose()
    assert found == {
        1: "logs/1-abc",
        2: "logs/2-def",
        3: "/elsewhere/logs/3-ghi",
        4: "logs/4-already",
    }
    assert "/elsewhere/logs/3-ghi" in caplog.text and "left as they are" in caplog.text


def test_an_absolute_location_left_by_the_migration_is_refused_clearly(configured):
    storage = storage_module.get_storage()
    with pytest.raises(InvalidInput, match="absolute path"):
        storage.read_table("/elsewhere/logs/3-ghi", "cases.parquet")
