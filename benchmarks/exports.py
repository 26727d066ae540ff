"""Export of an approved task set at scale: `python benchmarks/exports.py [--tasks 50000]
[--backend postgresql]`.

Builds SQLite (or PostgreSQL) databases with benchmarks/ledger.py's builder, every task
approved: per task a
version with a six-turn transcript, three noisy ratings of every rubric dimension, the
ledger entries submits and imports write (about 8 a task). Then times, each in a fresh child
process with its peak memory (VmHWM):

- baseline: reading the same tasks, transcripts, ratings, scores and ledger entries with
  pandas.read_sql and writing them as JSON lines (the floor of any export that reads and
  writes this data);
- export: `itsmreview export` in formats native, hf and tau2 (all but Harbor), bootstrap 1000;
- export with a tenth of the ratings, and of a tenth of the tasks (memory should grow with
  neither).

Prints medians of the repeats and the ratio to the baseline.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import peak_mb, run_sampled  # noqa: E402

from ledger import _postgres, build  # noqa: E402  (benchmarks/ledger.py: a realistic database)


def child(task: str, url: str, out: str) -> dict:
    import os

    os.environ["ITSMREVIEW_DATABASE_URL"] = url
    from itsmreview.accounts.models import Role, User
    from itsmreview.db import session_scope

    before = peak_mb()
    start = time.perf_counter()
    if task == "baseline":
        import pandas as pd
        from itsmreview.db import get_engine

        engine = get_engine()
        with open(out, "w") as handle:
            for query in (
                "SELECT t.external_id, v.* FROM task_versions v JOIN tasks t ON t.id = v.task_id",
                "SELECT * FROM transcripts",
                "SELECT id, task_version_id, round_id, expert_id, revision, verdict, flags,"
                " comment, confidence, rater_kind, submitted_at FROM ratings"
                " WHERE is_current AND status = 'submitted'",
                "SELECT rating_id, dimension, value FROM rating_scores",
                "SELECT * FROM ledger_entries WHERE artifact_type IN ('task', 'rating')",
            ):
                frame = pd.read_sql(query, engine)
                handle.write(frame.to_json(orient="records", lines=True, date_format="iso"))
    else:
        from itsmreview.exports.service import export_set

        actor = User(id=None, username="bench", display_name="b", role=Role.lead, password_hash="")
        with session_scope() as session:
            result = export_set(
                out,
                session=session,
                actor=actor,
                formats=["native", "hf", "tau2"],
                at=datetime(2026, 12, 1, tzinfo=UTC),
                allow_tentative=True,  # the tenth keeps too few ratings for the gate
                reason="benchmark",
            )
            session.rollback()  # leave the database as built for the next repeat
        assert result.tasks > 0
    seconds = time.perf_counter() - start
    peak = peak_mb()
    import resource

    # the second process that writes the tasks and the ledger slice of a large set (its RSS:
    # pages it shares with this one, forked from it, are counted in both)
    second = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "seconds": seconds,
        "peak_mb": peak,
        "grew_mb": peak - before,
        "second_mb": second,
    }


def run_child(task: str, url: str, folder: Path, index: int) -> dict:
    out = folder / f"{task}-{index}"
    stdout, stderr, code, pss = run_sampled(
        [sys.executable, __file__, "--child", task, url, str(out)]
    )
    shutil.rmtree(out, ignore_errors=True)  # hundreds of MB at 50,000 tasks
    if code != 0:
        raise SystemExit(f"{task} failed:\n{stderr[-3000:]}")
    return json.loads(stdout.strip().splitlines()[-1]) | {"pss_mb": pss}


def _databases(args, folder: Path) -> dict[str, str]:
    """The URLs of the three databases (all tasks, a tenth of the ratings, a tenth of the
    tasks), built unless `--keep` kept them: SQLite files in `folder`, or PostgreSQL
    databases named itsmreview_exports_* (kept when `--keep` is given)."""
    from sqlalchemy import create_engine, text

    if args.backend == "sqlite":
        urls = {name: f"sqlite:///{folder / f'{name}.db'}" for name in ("full", "tenth", "small")}
        built = all((folder / f"{name}.db").exists() for name in urls)
        if not built:
            for name in urls:
                (folder / f"{name}.db").unlink(missing_ok=True)
    else:
        marker = folder / f"postgresql-{args.tasks}.built"
        built = args.keep is not None and marker.exists()
        urls = {
            name: _postgres(f"itsmreview_exports_{name}", keep=built) for name in ("full", "small")
        }
        urls["tenth"] = _postgres("itsmreview_exports_tenth", keep=True)
    if built:
        return urls
    start = time.perf_counter()
    build(urls["full"], args.tasks, approved=True)
    seconds = time.perf_counter() - start
    build(urls["small"], args.tasks // 10, approved=True)
    if args.backend == "sqlite":
        shutil.copyfile(folder / "full.db", folder / "tenth.db")
    else:
        _postgres("itsmreview_exports_tenth", template="itsmreview_exports_full")
    engine = create_engine(urls["tenth"])
    with engine.begin() as c:  # keep one rater per task in ten: a tenth of the ratings
        c.execute(text("DELETE FROM rating_scores WHERE rating_id % 10 <> 0"))
        c.execute(text("DELETE FROM ratings WHERE id % 10 <> 0"))
    engine.dispose()
    if args.backend == "postgresql" and args.keep:
        (folder / f"postgresql-{args.tasks}.built").touch()
    print(f"built {args.tasks:,} tasks / {3 * args.tasks:,} ratings in {seconds:.0f} s")
    return urls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--keep", metavar="DIR", help="build into DIR and keep it (reused when already built)"
    )
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores shared)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        urls = _databases(args, folder)
        rows = {}
        for task, database in (
            ("baseline", "full"),
            ("export", "full"),
            ("export-tenth-ratings", "tenth"),
            ("export-tenth-tasks", "small"),
        ):
            runs = [
                run_child(task.split("-")[0], urls[database], Path(tmp), i)
                for i in range(args.repeats)
            ]
            rows[task] = {
                "seconds": statistics.median(r["seconds"] for r in runs),
                "spread": (min(r["seconds"] for r in runs), max(r["seconds"] for r in runs)),
                **{
                    key: statistics.median(r.get(key, 0) for r in runs)
                    for key in ("peak_mb", "second_mb", "pss_mb")
                },
            }
        base = rows["baseline"]["seconds"]
        print(
            f"{'contender':<26} {'median s':>9} {'min-max':>13} {'x baseline':>11} "
            f"{'peak MB':>8} {'2nd MB':>7} {'both PSS':>9}"
        )
        for name, row in rows.items():
            low, high = row["spread"]
            print(
                f"{name:<26} {row['seconds']:>9.2f} {low:>6.2f}-{high:<6.2f} "
                f"{row['seconds'] / base:>11.2f} {row['peak_mb']:>8.0f} {row['second_mb']:>7.0f}"
                f" {row['pss_mb']:>9.0f}"
            )
        print(
            "peak MB: the export's process (VmHWM); 2nd MB: the process that writes the tasks "
            "and the ledger slice of a large set (RSS, pages shared with the first counted); "
            "both PSS: the two together, shared pages once (sampled every 0.5 s)"
        )
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(
            "target: export within 2x the baseline, at most 500 MB; peak memory of 'export' "
            "close to the tenths'"
        )


if __name__ == "__main__":
    main()
