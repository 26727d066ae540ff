"""Export of an approved task set at scale: `python benchmarks/exports.py` (or `make bench`).

Builds a SQLite database of N approved tasks (one round, k = 3 of 20 experts, so 3N current
ratings of 8 rubric dimensions each, and a ledger entry per task and per rating), then times,
each in a fresh child process with its peak memory:

- baseline: reading the same tasks, ratings and scores with pandas.read_sql and writing them
  as JSON lines (the floor of any export that reads and writes this data);
- export: `itsmreview export` in formats native, hf and tau2 (all but Harbor), bootstrap 1000;
- export with a tenth of the ratings (memory should not grow with the ratings).

Prints medians of the repeats and the ratio to the baseline.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import peak_mb  # noqa: E402

DIMENSIONS = 8


def build(path: Path, tasks: int, ratings_per_task: int, experts: int = 20) -> None:
    from itsmreview.accounts.models import User
    from itsmreview.catalog.models import Task, TaskVersion
    from itsmreview.db import create_db_engine, upgrade_database
    from itsmreview.ledger.models import LedgerEntry
    from itsmreview.review.models import (
        Assignment,
        Rating,
        RatingScore,
        ReviewRound,
        RoundTask,
        Rubric,
    )
    from itsmreview.review.rubrics import load_rubric
    from sqlalchemy import insert

    engine = create_db_engine(f"sqlite:///{path}")
    upgrade_database(engine)
    rubric = load_rubric()
    keys = [d.key for d in rubric.dimensions][:DIMENSIONS]
    when = datetime(2026, 11, 1, tzinfo=UTC)
    with engine.begin() as c:

        def put(model, rows):
            for start in range(0, len(rows), 50_000):
                c.execute(insert(model.__table__), rows[start : start + 50_000])

        put(
            User,
            [
                {
                    "id": i,
                    "username": f"e{i}",
                    "display_name": f"E{i}",
                    "role": "expert",
                    "password_hash": "x",
                    "expertise": [],
                    "active": True,
                    "created_at": when,
                    "session_epoch": 0,
                }
                for i in range(1, experts + 2)
            ],
        )
        put(
            Rubric,
            [
                {
                    "id": 1,
                    "name": rubric.name,
                    "version": 1,
                    "title": rubric.title,
                    "definition": rubric.model_dump(mode="json"),
                    "content_hash": rubric.content_hash(),
                    "created_at": when,
                }
            ],
        )
        put(
            ReviewRound,
            [
                {
                    "id": 1,
                    "name": "R",
                    "rubric_id": 1,
                    "k": ratings_per_task,
                    "status": "open",
                    "reservation_minutes": 60,
                    "approval": {},
                    "created_at": when,
                    "created_by_id": experts + 1,
                }
            ],
        )
        put(
            Task,
            [
                {
                    "id": t,
                    "external_id": f"task-{t:06d}",
                    "title": f"Task {t}",
                    "persona": "L1",
                    "track": "single-agent",
                    "status": "approved",
                    "created_at": when,
                    "updated_at": when,
                }
                for t in range(1, tasks + 1)
            ],
        )
        put(
            TaskVersion,
            [
                {
                    "id": t,
                    "task_id": t,
                    "version": 1,
                    "content_hash": f"{t:064x}",
                    "title": f"Task {t}",
                    "persona": "L1",
                    "track": "single-agent",
                    "source_format": "native",
                    "instruction": f"Handle incident {t} " * 20,
                    "environment": "",
                    "ground_truth": "",
                    "verifier": "",
                    "tags": [],
                    "source": {},
                    "provenance": [],
                    "extra": {},
                    "created_at": when,
                    "status": "approved",
                }
                for t in range(1, tasks + 1)
            ],
        )
        put(
            RoundTask,
            [
                {"id": t, "round_id": 1, "task_version_id": t, "priority": 0.0}
                for t in range(1, tasks + 1)
            ],
        )
        assignments, ratings, scores, ledger = [], [], [], []
        rid = 0
        for t in range(1, tasks + 1):
            truth = 3 + t % 3
            for j in range(ratings_per_task):
                rid += 1
                expert = 1 + (t + j) % experts
                assignments.append(
                    {
                        "id": rid,
                        "round_id": 1,
                        "task_version_id": t,
                        "expert_id": expert,
                        "status": "submitted",
                        "created_at": when,
                        "submitted_at": when,
                    }
                )
                ratings.append(
                    {
                        "id": rid,
                        "assignment_id": rid,
                        "round_id": 1,
                        "task_version_id": t,
                        "expert_id": expert,
                        "rubric_id": 1,
                        "revision": 1,
                        "is_current": True,
                        "status": "submitted",
                        "verdict": "accept",
                        "flags": [],
                        "comment": "",
                        "rater_kind": "human",
                        "created_at": when,
                        "submitted_at": when + timedelta(seconds=rid),
                    }
                )
                for k, key in enumerate(keys):
                    scores.append(
                        {
                            "rating_id": rid,
                            "dimension": key,
                            "value": float(min(5, truth + ((j + k) % 3 == 0))),
                        }
                    )
        put(Assignment, assignments)
        put(Rating, ratings)
        put(RatingScore, scores)
        for t in range(1, tasks + 1):
            ledger.append(("task", f"task-{t:06d}@v1", "import", "system"))
        for r in range(1, rid + 1):
            ledger.append(("rating", str(r), "submit", "expert"))
        put(
            LedgerEntry,
            [
                {
                    "seq": i,
                    "created_at": when,
                    "artifact_type": a,
                    "artifact_id": b,
                    "field": None,
                    "source_kind": k,
                    "reference": "",
                    "action": act,
                    "actor_id": None,
                    "payload": {},
                    "prev_hash": f"{i - 1:064x}",
                    "entry_hash": f"{i:064x}",
                }
                for i, (a, b, act, k) in enumerate(ledger, start=1)
            ],
        )
    engine.dispose()


def child(task: str, database: str, out: str) -> dict:
    import os

    os.environ["ITSMREVIEW_DATABASE_URL"] = f"sqlite:///{database}"
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
                "SELECT * FROM ratings WHERE is_current AND status = 'submitted'",
                "SELECT rating_id, dimension, value FROM rating_scores",
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
    return {"seconds": seconds, "peak_mb": peak, "grew_mb": peak - before}


def run_child(task: str, database: Path, folder: Path, index: int) -> dict:
    out = folder / f"{task}-{database.stem}-{index}"
    result = subprocess.run(
        [sys.executable, __file__, "--child", task, str(database), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"{task} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        full, tenth = folder / "full.db", folder / "tenth.db"
        start = time.perf_counter()
        build(full, args.tasks, 3)
        built = time.perf_counter() - start
        build(tenth, args.tasks, 3)
        from sqlalchemy import create_engine, text

        engine = create_engine(f"sqlite:///{tenth}")
        with engine.begin() as c:  # keep one rater per task in ten: a tenth of the ratings
            c.execute(text("DELETE FROM rating_scores WHERE rating_id % 10 <> 0"))
            c.execute(text("DELETE FROM ratings WHERE id % 10 <> 0"))
        engine.dispose()
        print(f"built {args.tasks:,} tasks / {3 * args.tasks:,} ratings in {built:.0f} s")
        rows = {}
        for task, database in (("baseline", full), ("export", full), ("export-tenth", tenth)):
            runs = [run_child(task.split("-")[0], database, folder, i) for i in range(args.repeats)]
            rows[task] = {
                "seconds": statistics.median(r["seconds"] for r in runs),
                "spread": (min(r["seconds"] for r in runs), max(r["seconds"] for r in runs)),
                "peak_mb": statistics.median(r["peak_mb"] for r in runs),
            }
        base = rows["baseline"]["seconds"]
        print(
            f"{'contender':<34} {'median s':>9} {'min-max':>13} {'x baseline':>11} {'peak MB':>8}"
        )
        for name, row in rows.items():
            low, high = row["spread"]
            print(
                f"{name:<34} {row['seconds']:>9.2f} {low:>6.2f}-{high:<6.2f} "
                f"{row['seconds'] / base:>11.2f} {row['peak_mb']:>8.0f}"
            )
        print("target: export under 10 s; peak memory of 'export' close to 'export-tenth'")


if __name__ == "__main__":
    main()
