"""Verifying a realistic ledger: `python benchmarks/ledger.py [--tasks 40000]
[--backend sqlite,postgresql]`.

Builds, on each backend, a database as submits leave it (see `build`: per task a version
with a real content hash and a six-turn transcript, its import and declared provenance, three
noisy ratings with content commitments, statuses and some adjudications; about 7.8 entries
a task, every one backed by its object), then times in fresh child processes, with their
peak memory:

- baseline: streaming every ledger row as the driver returns it and hashing it once (the
  floor of any verify that reads the chain);
- verify: `itsmreview ledger verify`'s service (chain, expected head, every object checked
  against its entry and every object for an entry).

Prints medians (min-max), entries per second (target: at least 50,000) and peak memory at N
and N/10 tasks (memory flat in the entries: the two should be close).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import peak_mb  # noqa: E402
from scale import PROVENANCE, TURNS  # noqa: E402  (the scale build's task material)

EXPERTS = 30
K = 3


def build(url: str, tasks: int, approved: bool = False) -> int:
    """A database as submits leave it: per task a version (real content hash) with a six-turn
    transcript, its import and three declared-provenance entries, three noisy ratings of
    every rubric dimension with their submit entries (content commitments), a status entry
    for the two thirds decided and an adjudication (with its entry) for one in ten. Every
    entry is chained and backed by its object (`approved`: every task decided approved, as an
    export's set). Returns the number of entries."""
    import random

    from itsmreview.accounts.models import User
    from itsmreview.catalog.models import Task, TaskVersion, Transcript
    from itsmreview.catalog.native import NativeTask
    from itsmreview.db import create_db_engine, upgrade_database
    from itsmreview.ledger import chain
    from itsmreview.ledger.models import LedgerEntry
    from itsmreview.ledger.service import entry_content
    from itsmreview.review.commitments import adjudication_content, rating_content
    from itsmreview.review.models import (
        Adjudication,
        Assignment,
        Rating,
        RatingScore,
        ReviewRound,
        Rubric,
    )
    from itsmreview.review.rubrics.service import load_rubric
    from itsmreview.review.scorevector import pack
    from sqlalchemy import insert

    rng = random.Random(31)
    engine = create_db_engine(url)
    upgrade_database(engine)
    rubric = load_rubric()
    keys = [d.key for d in rubric.dimensions]
    flag_keys = [f.key for f in rubric.flags]
    when = datetime(2026, 11, 1, tzinfo=UTC)
    lead = EXPERTS + 1
    seq, previous = 0, chain.GENESIS_HASH
    pending: dict[str, list] = {}

    with engine.begin() as c:

        def put(model, rows, force=False):
            # queued per table, written all together in the order first seen (parents first)
            pending.setdefault(model.__tablename__, [model, []])[1].extend(rows)
            if force or any(len(queued) >= 20_000 for _, queued in pending.values()):
                for name, (table, queued) in pending.items():
                    if queued:
                        c.execute(insert(table.__table__), queued)
                        pending[name][1] = []

        def entry(kind, ident, action, source, payload=None, field=None, reference="", actor=None):
            nonlocal seq, previous
            seq += 1
            row = SimpleNamespace(
                seq=seq,
                created_at=when + timedelta(microseconds=seq),
                artifact_type=kind,
                artifact_id=ident,
                field=field,
                source_kind=source,
                reference=reference,
                action=action,
                actor_id=actor,
                payload=payload or {},
            )
            row.prev_hash = previous
            row.entry_hash = previous = chain.link(entry_content(row), previous)
            put(LedgerEntry, [dict(row.__dict__)])

        put(
            User,
            [
                {
                    "id": i,
                    "username": f"e{i}",
                    "display_name": f"E{i}",
                    "role": "lead" if i == lead else "expert",
                    "password_hash": "x",
                    "expertise": [],
                    "active": True,
                    "created_at": when,
                    "session_epoch": 0,
                }
                for i in range(1, lead + 1)
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
                    "k": K,
                    "status": "open",
                    "reservation_minutes": 60,
                    "approval": {},
                    "created_at": when,
                    "created_by_id": lead,
                }
            ],
            force=True,
        )
        rid = adjudication = 0
        for t in range(1, tasks + 1):
            external = f"task-{t:06d}"
            native = {
                "id": external,
                "title": f"VPN outage {t}",
                "persona": "L1",
                "track": "single-agent",
                "instruction": f"Handle incident INC{t:07d}: the caller cannot reach the VPN. " * 4,
                "environment": "ServiceNow instance with CMDB, incident and change tables.",
                "verifier": "The incident is linked to the gateway's change and resolved.",
                "provenance": PROVENANCE,
                "transcripts": [
                    {
                        "id": f"run-{t}",
                        "title": "Simulated caller",
                        "simulator": {"model": "replay"},
                        "messages": [{"role": r, "content": m} for r, m in TURNS],
                    }
                ],
            }
            task = NativeTask.model_validate(native)
            stored = task.stored()
            digest = task.content_hash()
            decided = approved or t % 3 != 0  # a third waits (in adjudication or for raters)
            status = ("approved" if approved or t % 2 else "rejected") if decided else "in_review"
            put(
                Task,
                [
                    {
                        "id": t,
                        "external_id": external,
                        "title": native["title"],
                        "persona": "L1",
                        "track": "single-agent",
                        "status": status,
                        "created_at": when,
                        "updated_at": when,
                    }
                ],
            )
            put(
                TaskVersion,
                [
                    {
                        "id": t,
                        "task_id": t,
                        "version": 1,
                        "content_hash": digest,
                        "title": native["title"],
                        "persona": "L1",
                        "track": "single-agent",
                        "source_format": "native",
                        "instruction": stored["instruction"],
                        "environment": stored["environment"],
                        "ground_truth": stored["ground_truth"],
                        "verifier": stored["verifier"],
                        "tags": [],
                        "source": stored["source"],
                        "provenance": stored["provenance"],
                        "extra": {},
                        "created_at": when,
                        "status": status,
                    }
                ],
            )
            transcript = stored["transcripts"][0]
            put(
                Transcript,
                [
                    {
                        "task_version_id": t,
                        "external_id": transcript["id"],
                        "title": transcript["title"],
                        "simulator": transcript["simulator"],
                        "messages": transcript["messages"],
                        "n_turns": len(transcript["messages"]),
                        "extra": {},
                    }
                ],
            )
            artifact = f"{external}@v1"
            entry(
                "task",
                artifact,
                "import",
                "system",
                {"content_hash": digest},
                None,
                "format native",
            )
            for declared in PROVENANCE:
                entry(
                    "task",
                    artifact,
                    "declare-provenance",
                    declared["source"],
                    None,
                    declared["field"],
                    declared["reference"],
                )
            truth = rng.randint(1, 5)
            for j in range(K):
                rid += 1
                expert = 1 + (t * K + j) % EXPERTS
                scores = {
                    key: float(min(5, max(1, truth + rng.choice((-1, 0, 0, 1))))) for key in keys
                }
                rating = SimpleNamespace(
                    id=rid,
                    assignment_id=rid,
                    round_id=1,
                    task_version_id=t,
                    expert_id=expert,
                    rubric_id=1,
                    revision=1,
                    is_current=True,
                    status="submitted",
                    verdict=rng.choice(("accept", "accept", "revise", "reject")),
                    flags=rng.sample(flag_keys, rng.choice((0, 0, 1))) if flag_keys else [],
                    comment=rng.choice(("", "", "Verifier misses the change link.")),
                    confidence=rng.randint(2, 5),
                    rater_kind="human",
                    created_at=when,
                    submitted_at=when + timedelta(seconds=rid),
                    score_vector=pack(keys, scores),
                    not_applicable=None,
                )
                put(
                    Assignment,
                    [
                        {
                            "id": rid,
                            "round_id": 1,
                            "task_version_id": t,
                            "expert_id": expert,
                            "status": "submitted",
                            "created_at": when,
                            "submitted_at": rating.submitted_at,
                        }
                    ],
                )
                put(Rating, [dict(rating.__dict__)])
                put(
                    RatingScore,
                    [{"rating_id": rid, "dimension": k, "value": v} for k, v in scores.items()],
                )
                entry(
                    "rating",
                    str(rid),
                    "submit",
                    "expert",
                    {
                        "task_version_id": t,
                        "round": "R",
                        "revision": 1,
                        "content_sha256": chain.content_digest(rating_content(rating, scores)),
                    },
                    actor=expert,
                )
            if t % 10 == 1:
                adjudication += 1
                decision = SimpleNamespace(
                    id=adjudication,
                    round_id=1,
                    task_version_id=t,
                    lead_id=lead,
                    decision="accept",
                    reason="The raters disagree on the verifier; it links the change.",
                    created_at=when,
                )
                put(Adjudication, [dict(decision.__dict__)])
                entry(
                    "adjudication",
                    str(adjudication),
                    "adjudicate",
                    "expert",
                    {
                        "task_version_id": t,
                        "decision": "accept",
                        "content_sha256": chain.content_digest(adjudication_content(decision)),
                    },
                    reference="round R",
                    actor=lead,
                )
            if decided:
                entry(
                    "task",
                    artifact,
                    f"status:{status}",
                    "expert",
                    {"from": "in_review", "reasons": ["alpha 0.71 >= 0.67"], "task_version_id": t},
                    reference="round R",
                )
        put(User, [], force=True)
        # statistics, as a live database has them from autovacuum
        for table in ("ledger_entries", "ratings", "rating_scores", "tasks", "task_versions"):
            c.exec_driver_sql(f"ANALYZE {table}")
    engine.dispose()
    return seq


def child(task: str, url: str) -> dict:
    import os

    os.environ["ITSMREVIEW_DATABASE_URL"] = url
    from itsmreview.db import session_scope

    start = time.perf_counter()
    with session_scope() as session:
        if task == "baseline":
            # the floor: every ledger row streamed as the driver returns it, and hashed once
            from itsmreview.ledger import chain, queries
            from itsmreview.ledger.service import StoredEntry, entry_content

            def hashed(row) -> str:
                entry = StoredEntry(row)
                return chain.link(entry_content(entry, entry.created), entry.prev_hash)

            count = sum(1 for row in queries.raw_entries(session=session) if hashed(row))
            ok = True
        else:
            from itsmreview.ledger.evidence.service import verify_ledger

            report = verify_ledger(session=session, parallel=True)  # as the CLI runs it
            count, ok = report.entries, report.ok
            if not ok:
                print(report.problems[:5], file=sys.stderr)
    seconds = time.perf_counter() - start
    peak = peak_mb()
    return {"seconds": seconds, "entries": count, "ok": ok, "peak_mb": peak}


def run(task: str, url: str) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", task, url],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


POSTGRES = os.environ.get(
    "ITSMREVIEW_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _postgres(name: str, drop: bool = False, keep: bool = False, template: str = "") -> str:
    """A fresh database `name` on the benchmark's PostgreSQL server (a copy of `template`,
    when named), or drop it, or (`keep`) the one there is."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    if not keep:
        admin = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            if not drop:
                copy = f' TEMPLATE "{template}"' if template else ""
                connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
        admin.dispose()
    return make_url(POSTGRES).set(database=name).render_as_string(False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=40_000, help="about 8 entries a task")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backend", default="sqlite,postgresql")
    parser.add_argument("--only", default="baseline,verify", help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(
        "--reuse",
        metavar="URL",
        help="time baseline and verify on this database (built before by `build`) only",
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    if args.reuse:
        print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores shared)")
        runs = {
            t: [run(t, args.reuse) for _ in range(args.repeats)] for t in ("baseline", "verify")
        }
        base = statistics.median(r["seconds"] for r in runs["baseline"])
        for task, results in runs.items():
            assert all(r["ok"] for r in results), f"{task} found a problem"
            seconds = sorted(r["seconds"] for r in results)
            entries, median = results[0]["entries"], statistics.median(seconds)
            print(
                f"{task:<10} {entries:>9,} entries {median:>7.2f} s "
                f"({seconds[0]:.2f}-{seconds[-1]:.2f}) {entries / median:>9,.0f}"
                f" entries/s {median / base:>5.2f}x baseline "
                f"{statistics.median(r['peak_mb'] for r in results):>5.0f} MB"
            )
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores shared)")
    with tempfile.TemporaryDirectory() as tmp:
        sizes = {"N": args.tasks, "N/10": args.tasks // 10}
        for backend in args.backend.split(","):
            urls, entries = {}, {}
            for label, n in sizes.items():
                tag = label.replace("/", "-").lower()
                urls[label] = (
                    f"sqlite:///{Path(tmp) / f'{tag}.db'}"
                    if backend == "sqlite"
                    else _postgres(f"itsmreview_ledger_{tag}")
                )
                started = time.perf_counter()
                entries[label] = build(urls[label], n)
                print(
                    f"{backend}: built {n:,} tasks, {entries[label]:,} entries in "
                    f"{time.perf_counter() - started:.0f} s"
                )
            print(
                f"{'contender':<30} {'median s':>9} {'min-max':>13} {'entries/s':>11} "
                f"{'x baseline':>11} {'peak MB':>8}"
            )
            for label in sizes:
                runs = {
                    t: [run(t, urls[label]) for _ in range(args.repeats)]
                    for t in args.only.split(",")
                }
                base = statistics.median(r["seconds"] for r in runs.get("baseline", runs["verify"]))
                for task, results in runs.items():
                    assert all(r["ok"] for r in results), f"{task} found a problem"
                    assert all(r["entries"] == entries[label] for r in results), "entries differ"
                    seconds = statistics.median(r["seconds"] for r in results)
                    low, high = (
                        min(r["seconds"] for r in results),
                        max(r["seconds"] for r in results),
                    )
                    rate = entries[label] / seconds
                    peak = statistics.median(r["peak_mb"] for r in results)
                    print(
                        f"{backend + ' ' + task + ' ' + label:<30} {seconds:>9.2f} "
                        f"{low:>6.2f}-{high:<6.2f} {rate:>11,.0f} {seconds / base:>11.2f} "
                        f"{peak:>8.0f}"
                    )
            if backend == "postgresql":
                for label in sizes:
                    _postgres(f"itsmreview_ledger_{label.replace('/', '-').lower()}", drop=True)
            print(f"load average after {backend}: {os.getloadavg()[0]:.2f}")
        print("target: verify at least 50,000 entries/s; peak memory at N close to N/10")


if __name__ == "__main__":
    main()
