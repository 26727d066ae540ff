"""Hostile check and task imports (issue 28): each fails with one clean message naming the
file, the record and the field, leaves the database and the ledger as they were and ends in
bounded time; large imports read the ledger's head once a batch; a dry run writes nothing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from itsmreview.catalog.importing import import_path
from itsmreview.cli import app
from itsmreview.cli.base import operator
from itsmreview.db import session_scope
from itsmreview.ledger import queries as ledger_queries
from itsmreview.ledger.service import verify_chain
from itsmreview.review.ratings import checks as checks_module
from itsmreview.review.ratings.checks import import_checks
from itsmreview.schema import metadata
from sqlalchemy import func, select
from typer.testing import CliRunner

GOOD = {"task": "t0", "check": "structure", "status": "pass"}
AT = "2026-12-01T11:30:00+01:00"


def _tasks_file(folder: Path, count: int, name: str = "tasks.jsonl") -> Path:
    path = folder / name
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"t{n}",
                    "title": f"Task {n}",
                    "persona": "L1 service desk agent",
                    "track": "single-agent",
                    "instruction": f"Do {n}.",
                    "provenance": [{"field": "instruction", "source": "logs"}],
                }
            )
            + "\n"
            for n in range(count)
        )
    )
    return path


def _state() -> tuple:
    """Every table's row count, the ledger's head and each task's status."""
    from itsmreview.catalog.models import Task
    from itsmreview.ledger.models import LedgerEntry

    with session_scope() as session:
        counts = {
            table.name: session.execute(select(func.count()).select_from(table)).scalar_one()
            for table in metadata.sorted_tables
        }
        head = session.execute(
            select(LedgerEntry.seq, LedgerEntry.entry_hash).order_by(LedgerEntry.seq.desc())
        ).first()
        head = None if head is None else tuple(head)
        statuses = sorted(session.execute(select(Task.external_id, Task.status)).all())
    return counts, head, statuses


@pytest.fixture
def catalog(configured, tmp_path):
    """Two tasks in the test database (each backend)."""
    with session_scope() as session:
        import_path(_tasks_file(tmp_path, 2, "two.jsonl"), session=session)
    return tmp_path


def _checks(folder: Path, records, name: str = "checks.json") -> Path:
    path = folder / name
    path.write_text(json.dumps({"checks": records}) if name.endswith(".json") else records)
    return path


HOSTILE_CHECKS = [
    ("naive-ran-at", {**GOOD, "ran_at": "2026-12-01T10:00:00"}, "$[0].ran_at", "no time zone"),
    ("ran-at-not-a-time", {**GOOD, "ran_at": "yesterday"}, "$[0].ran_at", "not an ISO 8601"),
    ("ran-at-a-number", {**GOOD, "ran_at": 1.7e9}, "$[0].ran_at", "not ISO 8601 text"),
    (
        "ran-at-out-of-range",
        {**GOOD, "ran_at": "0001-01-01T00:00:00+01:00"},
        "$[0].ran_at",
        "out of range",
    ),
    ("version-2-to-70", {**GOOD, "version": 2**70}, "$[0].version", "from 1 to 2,147,483,647"),
    ("version-true", {**GOOD, "version": True}, "$[0].version", "version true is not"),
    ("version-zero", {**GOOD, "version": 0}, "$[0].version", "not a version number"),
    ("version-text", {**GOOD, "version": "2"}, "$[0].version", "not a version number"),
    ("version-float", {**GOOD, "version": 1.5}, "$[0].version", "not a version number"),
    ("nul-in-summary", {**GOOD, "summary": "ok\x00; DROP"}, "$[0].summary", "U+0000"),
    ("escape-in-tool", {**GOOD, "tool": "x\x1b[2J"}, "$[0].tool", "U+001B"),
    ("nul-in-task", {**GOOD, "task": "t0\x00"}, "$[0].task", "U+0000"),
    ("lone-surrogate", {**GOOD, "summary": "\ud800"}, "$[0].summary", "as a unicode string"),
    ("nul-in-details", {**GOOD, "details": {"a": ["x\x00"]}}, "$[0].details", "details.a[0]"),
    ("nul-in-details-key", {**GOOD, "details": {"k\x00": 1}}, "$[0].details", "U+0000"),
    ("status-a-number", {**GOOD, "status": 1}, "$[0].status", "not one of pass"),
]


@pytest.mark.parametrize(
    ("record", "field", "message"),
    [case[1:] for case in HOSTILE_CHECKS],
    ids=[case[0] for case in HOSTILE_CHECKS],
)
def test_a_hostile_check_result_is_named_and_changes_nothing(catalog, record, field, message):
    path = _checks(catalog, [record])
    before = _state()
    result = CliRunner().invoke(app, ["checks", "import", str(path)])
    assert result.exit_code == 1
    assert str(path) in result.output and field in result.output and message in result.output
    assert "Traceback" not in result.output and "INSERT" not in result.output
    assert _state() == before


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_in_details_are_refused(catalog, constant):
    path = catalog / "nan.jsonl"
    path.write_text(
        json.dumps(GOOD) + "\n" + json.dumps(GOOD)[:-1] + f', "details": {{"x": {constant}}}}}\n'
    )
    before = _state()
    result = CliRunner().invoke(app, ["checks", "import", str(path)])
    assert result.exit_code == 1, result.output
    assert "line 2.details" in result.output and "details.x is" in result.output
    assert "not a number" in result.output
    assert _state() == before


def test_a_fifo_or_a_device_is_refused_without_reading(catalog):
    fifo = catalog / "checks.json"
    os.mkfifo(fifo)
    before = _state()
    for target, kind in ((fifo, "FIFO"), (Path("/dev/zero"), "character device")):
        # a process of its own, so that a regression hangs that process, not the test run
        done = subprocess.run(
            [sys.executable, "-m", "itsmreview.cli", "checks", "import", str(target)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONSAFEPATH": "1"},
        )
        assert done.returncode == 1, done.stderr
        assert f"{target}: is a" in done.stderr and kind in done.stderr
        assert "Traceback" not in done.stderr
    assert _state() == before


def test_a_folder_is_refused(catalog):
    result = CliRunner().invoke(app, ["checks", "import", str(catalog)])
    assert result.exit_code == 1
    assert f"{catalog}: is a folder, not a regular file" in result.output


def test_an_aware_ran_at_is_stored_in_utc(catalog):
    from itsmreview.review.models import MachineCheck

    path = _checks(catalog, [{**GOOD, "ran_at": "2026-12-01T11:30:00+01:00"}])
    with session_scope() as session:
        import_checks(path, session=session, actor=operator())
    with session_scope() as session:
        (stored,) = session.exec(select(MachineCheck.ran_at)).all()
    stored = stored[0]
    assert stored.replace(tzinfo=None).isoformat() == "2026-12-01T10:30:00"


def test_checks_import_reads_the_ledger_head_once_a_batch(catalog, monkeypatch):
    from itsmreview.review.models import MachineCheck

    reads = []
    original = ledger_queries.chain_head

    def counted(*, session):
        reads.append(1)
        return original(session=session)

    monkeypatch.setattr(ledger_queries, "chain_head", counted)
    monkeypatch.setattr(checks_module, "BATCH", 1_200)  # two batches go in by COPY
    records = [
        {**GOOD, "task": f"t{n % 2}", "check": f"c{n % 5}", "details": {"n": n}, "ran_at": AT}
        for n in range(2_500)
    ]
    path = _checks(catalog, records)
    before = _state()
    with session_scope() as session:
        report = import_checks(path, session=session, actor=operator(), dry_run=True)
    assert report["imported"] == 2_500
    assert _state() == before  # the dry run kept nothing
    reads.clear()
    with session_scope() as session:
        import_checks(path, session=session, actor=operator())
    assert len(reads) == 3  # 2,500 results in batches of 1,200
    counts, _, _ = _state()
    assert counts["machine_checks"] == 2_500
    assert counts["ledger_entries"] == before[0]["ledger_entries"] + 2_500
    with session_scope() as session:
        assert verify_chain(session=session).ok
        last = session.scalars(select(MachineCheck).order_by(MachineCheck.id.desc())).first()
    assert last.details == {"n": 2_499} and last.ran_at.replace(tzinfo=None).hour == 10
    # every stored result matches what its ledger entry commits to
    verified = CliRunner().invoke(app, ["ledger", "verify"])
    assert verified.exit_code == 0, verified.output


def test_a_large_task_import_chains_a_batch_at_a_time_and_a_dry_run_writes_nothing(
    configured, tmp_path, monkeypatch
):
    from itsmreview.catalog import service as catalog_service

    reads = []
    original = ledger_queries.chain_head

    def counted(*, session):
        reads.append(1)
        return original(session=session)

    monkeypatch.setattr(ledger_queries, "chain_head", counted)
    monkeypatch.setattr(catalog_service, "BATCH", 40)
    monkeypatch.setattr(ledger_queries, "BULK_ENTRIES", 50)  # a batch's 80 entries by COPY
    path = _tasks_file(tmp_path, 100)
    with session_scope() as session:
        import_path(_tasks_file(tmp_path, 3, "first.jsonl"), session=session)
    before = _state()
    reads.clear()
    with session_scope() as session:
        dry = import_path(path, session=session, dry_run=True)
    assert (len(dry.report.created), len(dry.report.unchanged)) == (97, 3)
    assert _state() == before and reads == []
    with session_scope() as session:
        done = import_path(path, session=session)
    assert done.report.as_dict() == dry.report.as_dict()
    assert len(reads) == 3  # 97 new tasks in batches of 40: one head read each
    counts, _, _ = _state()
    assert counts["tasks"] == 100 and counts["task_versions"] == 100
    assert counts["ledger_entries"] == before[0]["ledger_entries"] + 2 * 97
    with session_scope() as session:
        assert verify_chain(session=session).ok
    verified = CliRunner().invoke(app, ["ledger", "verify"])
    assert verified.exit_code == 0, verified.output


def test_a_new_version_named_twice_in_one_file_is_numbered_in_order(configured, tmp_path):
    """Within one batch a task named again (through transcripts of two files) gets v2, v3."""
    from itsmreview.catalog.models import TaskVersion
    from itsmreview.catalog.native import NativeTask
    from itsmreview.catalog.service import import_tasks

    base = {"id": "x", "title": "X", "persona": "P", "track": "single-agent"}
    with session_scope() as session:
        import_tasks([NativeTask.model_validate({**base, "instruction": "a"})], session=session)
        report = import_tasks(
            [NativeTask.model_validate({**base, "instruction": i}) for i in ("b", "c", "c")],
            session=session,
        )
    assert report.new_versions == ["x", "x"] and report.unchanged == ["x"]
    with session_scope() as session:
        versions = session.exec(select(TaskVersion.version, TaskVersion.instruction)).all()
    assert sorted(tuple(v) for v in versions) == [(1, "a"), (2, "b"), (3, "c")]


def test_a_file_of_bad_records_lists_the_first_twenty_and_stops(catalog):
    path = _checks(catalog, [{**GOOD, "status": "maybe"}] * 10_000)
    before = _state()
    result = CliRunner().invoke(app, ["checks", "import", str(path)])
    assert result.exit_code == 1
    listed = [line for line in result.output.splitlines() if ".status: status 'maybe'" in line]
    assert len(listed) == checks_module.MAX_PROBLEMS
    assert "stopped at $[19] of 10,000 records" in result.output and len(result.output) < 4000
    assert _state() == before


def test_appended_payloads_are_stored_as_hashed(configured):
    """A flat payload is taken as it is (a copy: the caller may change its dict after), any
    other through JSON (tuples become lists), so the stored entry verifies either way."""
    from itsmreview.ledger.models import LedgerEntry
    from itsmreview.ledger.service import append_entries

    flat = {"task": "t0@v1", "n": 3, "none": None}
    other = {"pair": (1, 2), "nested": {"b": [3]}, "ratio": 0.5, "yes": True}
    entry = {"artifact_type": "x", "artifact_id": 1, "action": "a", "source_kind": "system"}
    with session_scope() as session:
        append_entries(
            session=session, entries=[{**entry, "payload": flat}, {**entry, "payload": other}]
        )
        flat["n"] = 4
    with session_scope() as session:
        payloads = session.exec(select(LedgerEntry.payload).order_by(LedgerEntry.seq)).all()
        assert [p[0] for p in payloads] == [
            {"task": "t0@v1", "n": 3, "none": None},
            {"pair": [1, 2], "nested": {"b": [3]}, "ratio": 0.5, "yes": True},
        ]
        assert verify_chain(session=session).ok


def test_a_harbor_task_whose_instruction_is_a_fifo_is_refused_without_waiting(configured, tmp_path):
    folder = tmp_path / "reset"
    folder.mkdir()
    (folder / "task.toml").write_text('[task]\nname = "reset"\n')
    os.mkfifo(folder / "instruction.md")
    before = _state()
    done = subprocess.run(
        [sys.executable, "-m", "itsmreview.cli", "tasks", "import", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
    )
    assert done.returncode == 1, done.stderr
    assert f"{folder / 'instruction.md'}: is a FIFO (named pipe), not a regular file" in done.stderr
    assert "Traceback" not in done.stderr
    assert _state() == before
