"""Large imports: `python benchmarks/imports.py [--checks 300000] [--tasks 20000]`.

Generates its inputs into a temporary folder, then times on fresh copies of one migrated
SQLite database (each run on its own copy):

- checks: `checks import` of N check results (a JSON file of about 70 bytes a result) over
  1,000 stored tasks, against a baseline measured in the same run: the bare JSON parse of the
  same file plus one bare bulk INSERT of the same rows into `machine_checks`;
- tasks: `tasks import` of M native tasks (JSON Lines, two ledger entries each), with and
  without `--dry-run`, against the bare JSON parse of the file plus one bulk INSERT of one row
  a task into `tasks`.

Prints the median of each and its ratio to its baseline. Targets (issue 28): 300,000 check
results in under a minute; a dry run of 20,000 tasks in about the time of the real import.
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import peak_mb  # noqa: E402

CHECK_TASKS = 1_000


def _task(n: int) -> dict:
    return {
        "id": f"bench-{n:06d}",
        "title": f"Reset the password of user {n}",
        "persona": "L1 service desk agent",
        "track": "single-agent",
        "instruction": f"User {n} is locked out; reset the password and note it in the ticket.",
        "ground_truth": f"incident INC{n:06d} resolved",
        "tags": ["bench"],
        "provenance": [{"field": "instruction", "source": "logs", "reference": "bench log"}],
    }


def write_tasks(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            out.write(json.dumps(_task(n)) + "\n")


def write_checks(path: Path, count: int, tasks: int) -> None:
    statuses = ("pass", "pass", "pass", "warn", "fail")
    records = [
        {
            "task": f"bench-{n % tasks:06d}",
            "check": f"check{n % 7}",
            "status": statuses[n % len(statuses)],
            "summary": "ok",
            "tool": "bench",
            "ran_at": "2026-12-01T10:00:00Z",
        }
        for n in range(count)
    ]
    path.write_text(json.dumps({"checks": records}), encoding="utf-8")


def _engine(path: Path):
    from itsmreview.db import create_db_engine

    return create_db_engine(f"sqlite:///{path}")


def migrated(folder: Path) -> Path:
    from itsmreview.db import upgrade_database

    path = folder / "empty.db"
    engine = _engine(path)
    upgrade_database(engine)
    engine.dispose()
    return path


def _copy(source: Path, folder: Path, name: str) -> Path:
    target = folder / name
    shutil.copyfile(source, target)
    return target


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def import_tasks_file(db: Path, path: Path, dry_run: bool) -> None:
    from itsmreview.catalog.importing import import_path
    from itsmreview.db import session_scope

    engine = _engine(db)
    with session_scope(engine) as session:
        import_path(path, session=session, fmt="native", dry_run=dry_run)
    engine.dispose()


def import_checks_file(db: Path, path: Path) -> None:
    from itsmreview.cli.base import operator
    from itsmreview.db import session_scope
    from itsmreview.review.ratings.checks import import_checks

    engine = _engine(db)
    with session_scope(engine) as session:
        import_checks(path, session=session, actor=operator())
    engine.dispose()


def baseline_checks(db: Path, path: Path) -> None:
    """The bare parse and one bulk INSERT of the same rows: what no import can beat."""
    from itsmreview.db import bulk_insert, session_scope, utcnow

    engine = _engine(db)
    records = json.loads(path.read_text(encoding="utf-8"))["checks"]
    now = utcnow()
    rows = (
        (1 + int(r["task"][6:]), r["check"], r["status"], r["summary"], "{}", r["tool"], None, now)
        for r in records
    )
    columns = ("task_version_id", "check", "status", "summary", "details", "tool", "ran_at")
    with session_scope(engine) as session:
        bulk_insert(session, "machine_checks", (*columns, "imported_at"), rows)
    engine.dispose()


def baseline_tasks(db: Path, path: Path) -> None:
    from itsmreview.db import bulk_insert, session_scope, utcnow

    engine = _engine(db)
    with path.open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    now = utcnow()
    rows = ((r["id"], r["title"], r["persona"], r["track"], "draft", now, now) for r in records)
    columns = ("external_id", "title", "persona", "track", "status")
    with session_scope(engine) as session:
        bulk_insert(session, "tasks", (*columns, "created_at", "updated_at"), rows)
    engine.dispose()


def measure(label: str, runs: list[float], baseline: list[float] | None) -> None:
    middle = statistics.median(runs)
    line = f"{label:<32} median {middle:8.2f} s  (runs: {', '.join(f'{r:.2f}' for r in runs)})"
    if baseline:
        line += f"  x{middle / statistics.median(baseline):.1f} the baseline"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=300_000, help="check results (0: skip)")
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks (0: skip)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="itsmreview-bench-imports-") as tmp:
        folder = Path(tmp)
        empty = migrated(folder)
        if args.checks:
            tasks_file, checks_file = folder / "check-tasks.jsonl", folder / "checks.json"
            write_tasks(tasks_file, CHECK_TASKS)
            write_checks(checks_file, args.checks, CHECK_TASKS)
            size = checks_file.stat().st_size / 2**20
            with_tasks = _copy(empty, folder, "with-tasks.db")
            import_tasks_file(with_tasks, tasks_file, dry_run=False)
            print(f"checks import: {args.checks:,} results ({size:.1f} MiB), {CHECK_TASKS} tasks")
            base = [
                _timed(lambda: baseline_checks(_copy(with_tasks, folder, "b.db"), checks_file))
                for _ in range(args.repeat)
            ]
            measure("baseline (parse + bulk INSERT)", base, None)
            runs = [
                _timed(lambda: import_checks_file(_copy(with_tasks, folder, "c.db"), checks_file))
                for _ in range(args.repeat)
            ]
            measure("checks import", runs, base)
        if args.tasks:
            tasks_file = folder / "tasks.jsonl"
            write_tasks(tasks_file, args.tasks)
            print(f"tasks import: {args.tasks:,} native tasks, 2 ledger entries each")
            base = [
                _timed(lambda: baseline_tasks(_copy(empty, folder, "b.db"), tasks_file))
                for _ in range(args.repeat)
            ]
            measure("baseline (parse + bulk INSERT)", base, None)
            for label, dry_run in (("tasks import", False), ("tasks import --dry-run", True)):
                runs = [
                    _timed(
                        lambda dry=dry_run: import_tasks_file(
                            _copy(empty, folder, "t.db"), tasks_file, dry
                        )
                    )
                    for _ in range(args.repeat)
                ]
                measure(label, runs, base)
        print(f"peak memory {peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
