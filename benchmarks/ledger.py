"""Verifying a long ledger: `python benchmarks/ledger.py [--entries 1000000]`.

Builds a SQLite database whose ledger holds N valid, chained entries (ratings' and tasks'
kinds of entries, without the objects, so only the chain is measured), then times in fresh
child processes, with their peak memory:

- baseline: reading every entry's columns in the same batches, hashing nothing;
- verify: `itsmreview ledger verify`'s service (chain, head, commitments).

Prints medians, entries per second (target: at least 50,000) and peak memory at N and N/10
(bounded memory: the two should be close).
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


def build(path: Path, entries: int) -> None:
    from itsmreview.db import create_db_engine, upgrade_database
    from itsmreview.ledger import chain
    from itsmreview.ledger.models import LedgerEntry
    from sqlalchemy import insert

    engine = create_db_engine(f"sqlite:///{path}")
    upgrade_database(engine)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    previous = chain.GENESIS_HASH
    rows = []
    with engine.begin() as connection:
        for seq in range(1, entries + 1):
            kind = "rating" if seq % 4 else "task"
            content = {
                "seq": seq,
                "created_at": (start + timedelta(microseconds=seq)).isoformat(
                    timespec="microseconds"
                ),
                "artifact_type": kind,
                "artifact_id": f"x{seq}",
                "field": None,
                "source_kind": "expert",
                "reference": "",
                "action": "note",
                "actor_id": None,
                "payload": {"round": "R", "revision": 1},
            }
            entry_hash = chain.link(content, previous)
            rows.append(
                {
                    **content,
                    "created_at": start + timedelta(microseconds=seq),
                    "prev_hash": previous,
                    "entry_hash": entry_hash,
                }
            )
            previous = entry_hash
            if len(rows) == 50_000:
                connection.execute(insert(LedgerEntry.__table__), rows)
                rows = []
        if rows:
            connection.execute(insert(LedgerEntry.__table__), rows)
    engine.dispose()


def child(task: str, database: str) -> dict:
    import os

    os.environ["ITSMREVIEW_DATABASE_URL"] = f"sqlite:///{database}"
    from itsmreview.db import session_scope

    start = time.perf_counter()
    with session_scope() as session:
        if task == "baseline":
            from itsmreview.provenance.queries import entries

            count = sum(1 for _ in entries(session=session))
            ok = True
        else:
            from itsmreview.provenance.service import verify_ledger

            report = verify_ledger(session=session)
            count, ok = report.entries, report.ok
    seconds = time.perf_counter() - start
    peak = peak_mb()
    return {"seconds": seconds, "entries": count, "ok": ok, "peak_mb": peak}


def run(task: str, database: Path) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", task, str(database)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        sizes = {"N": args.entries, "N/10": args.entries // 10}
        databases = {}
        for label, n in sizes.items():
            databases[label] = Path(tmp) / f"{label.replace('/', '-')}.db"
            started = time.perf_counter()
            build(databases[label], n)
            print(f"built {n:,} entries in {time.perf_counter() - started:.0f} s")
        print(
            f"{'contender':<22} {'median s':>9} {'entries/s':>11} {'x baseline':>11} {'peak MB':>8}"
        )
        for label in sizes:
            runs = {
                t: [run(t, databases[label]) for _ in range(args.repeats)]
                for t in ("baseline", "verify")
            }
            base = statistics.median(r["seconds"] for r in runs["baseline"])
            for task, results in runs.items():
                assert all(r["ok"] for r in results), f"{task} found a problem"
                seconds = statistics.median(r["seconds"] for r in results)
                rate = sizes[label] / seconds
                peak = statistics.median(r["peak_mb"] for r in results)
                print(
                    f"{task + ' ' + label:<22} {seconds:>9.2f} {rate:>11,.0f} "
                    f"{seconds / base:>11.2f} {peak:>8.0f}"
                )
        print("target: verify at least 50,000 entries/s; peak memory at N close to N/10")


if __name__ == "__main__":
    main()
