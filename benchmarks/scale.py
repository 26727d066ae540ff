"""Scale: `python benchmarks/scale.py` (one command; `--backend sqlite,postgresql`).

Builds a database of N tasks (default 100,000) in one review round, k = 3 of 50 experts, three
current ratings from noisy, biased raters for all but the last 1,000 tasks (about 300,000
ratings; `panel_ratings`: a third of the tasks wait for adjudication, as in a real panel), a
six-turn transcript and declared provenance per task, a synthetic event log the tasks derive
from, and a chained ledger entry per task, declared field, rating and status change with the
payloads the services write, in bulk; every task is decided through the product's path
(`recompute_statuses`). `--build-only` prints the status mix it produced. Then, on each
backend, each group in a fresh process:

- pages: server time of each page rendered with Streamlit's AppTest as the role that uses
  it (median of 5 warm runs);
- write: claim and submit one rating (20 experts in turn), against the full recomputation
  of the round's gate that every submit did before (the baseline, in the same run);
- agreement: `itsmreview agreement` (alpha, AC, leave-one-rater-out and bias of every item,
  1,000 bootstrap samples);
- round: creating a round over every task;
- cli: `itsmreview --help` and `itsmreview round list` as a user starts them;
- concurrent (PostgreSQL): 50 experts, each claiming and submitting 20 ratings at once, as
  threads of two replica processes (`--replicas`; 0: a process each), with no pause and with a
  mean 1 s pause: p50/p95/max latency, submits per second, and lost, duplicated or over-k
  ratings. The experts' submits queue their gate work, as a server's do
  (ITSMREVIEW_GATE_APPLY=queue), and one more process applies it as the server's gate worker
  would (its CPU counted; how long queued ratings waited, and how soon after the last submit
  the queue was empty); after both runs the gate's stored counts and every task's status are
  compared with a recomputation from scratch. Then the floor: the same load as bare driver
  statements.

Prints medians with their spread; record the table in docs/performance.md. `--build-only DIR`
keeps a SQLite build; `--reuse URL DIR` measures groups again on a database built before.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import page_views  # noqa: E402

POSTGRES = os.environ.get(
    "ITSMREVIEW_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
EXPERTS = 50
APPLIER_POLL_S = 0.05  # the gate worker's look between batches
K = 3
UNRATED = 1_000
PROVENANCE = [  # what each task declares, as a log-derived task's file does
    {"field": "instruction", "source": "logs", "reference": "synth: variant"},
    {"field": "environment", "source": "logs", "reference": "synth: roles"},
    {"field": "verifier", "source": "expert", "reference": "author"},
]
TURNS = (
    ("user", "Hi, I cannot reach the VPN since this morning; my laptop says 'connection failed'."),
    ("agent", "Sorry to hear that. Which office are you in, and which VPN client version?"),
    ("user", "Amsterdam office, client 5.2. It worked yesterday."),
    ("agent", "I see a certificate renewal on the gateway overnight. I am opening an incident."),
    ("user", "Thanks. Do I need to do anything?"),
    ("agent", "Please restart the client in ten minutes; I will update the ticket then."),
)


def _transcript(t: int) -> list[dict]:
    """A six-turn conversation of a task's simulated caller."""
    return [{"role": role, "content": f"{text} (case {t})"} for role, text in TURNS]


PASSWORD = "scale-pass"
PAGES = {
    "lead": [
        "home",
        "dashboard",
        "rounds",
        "tasks",
        "coverage",
        "completeness",
        "variants",
        "ledger",
    ],
    "expert": ["queue"],
}


def panel_ratings(tasks: int, keys: list[str], flag_keys: list[str], seed: int = 7):
    """Three noisy raters per task, as a real expert panel rates: each task has a quality
    and each dimension of it a deviation from that; each expert a leniency (bias) and a
    steadiness (noise), and now and then a rating misread (a value drawn at random). An
    expert's verdict follows their own mean score, and a few ratings raise a flag. Tuned so
    that the gate's statuses mix like a real round's (issue 31): about 30% approved, a third
    needs revision, a third waits for adjudication, 3% rejected.

    Returns (experts: tasks x K ids, scores: tasks x K x dimensions, verdicts: tasks x K,
    flags: tasks x K lists)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    quality = rng.normal(4.1, 1.3, tasks)
    deviation = rng.normal(0.0, 0.45, (tasks, 1, len(keys)))
    bias = rng.normal(0.0, 0.25, EXPERTS + 2)
    steadiness = rng.uniform(0.35, 0.7, EXPERTS + 2)
    experts = 2 + (np.arange(tasks)[:, None] * K + np.arange(K)[None, :]) % EXPERTS
    noise = rng.normal(0.0, 1.0, (tasks, K, len(keys))) * steadiness[experts][:, :, None]
    raw = quality[:, None, None] + deviation + bias[experts][:, :, None] + noise
    misread = rng.random((tasks, K, len(keys))) < 0.033
    raw = np.where(misread, rng.uniform(0.5, 5.5, raw.shape), raw)
    scores = np.clip(np.rint(raw), 1, 5)
    mean = scores.mean(axis=2) + rng.normal(0.0, 0.5, (tasks, K))
    verdicts = np.where(mean >= 3.7, "accept", np.where(mean >= 1.8, "revise", "reject"))
    flagged = rng.random((tasks, K)) < 0.033
    picks = rng.integers(0, len(flag_keys), (tasks, K))
    flags = [
        [[flag_keys[picks[t, j]]] if flagged[t, j] else [] for j in range(K)] for t in range(tasks)
    ]
    return experts, scores, verdicts, flags


PG_DATABASE = os.environ.get("ITSMREVIEW_BENCH_PG_DATABASE", "itsmreview_scale")


def _database_url(backend: str, folder: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder / 'scale.db'}"
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{PG_DATABASE}"'))
    admin.dispose()
    return make_url(POSTGRES).set(database=PG_DATABASE).render_as_string(False)


def build(url: str, tasks: int, folder: Path) -> dict:
    """The database, in bulk; returns what was built."""
    from itsmreview.accounts.models import User
    from itsmreview.accounts.service import hash_password
    from itsmreview.catalog.models import Task, TaskVersion, TaskVersionVariant, Transcript
    from itsmreview.coverage import queries as coverage_queries
    from itsmreview.coverage.service import import_log
    from itsmreview.coverage.synthetic import generate_log, write_csv
    from itsmreview.db import analyze, create_db_engine, upgrade_database
    from itsmreview.ledger.chain import GENESIS_HASH, content_digest, link
    from itsmreview.ledger.models import LedgerEntry
    from itsmreview.ledger.service import entry_content
    from itsmreview.review.models import (
        Assignment,
        Rating,
        RatingScore,
        ReviewRound,
        RoundTask,
    )
    from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
    from itsmreview.review.scorevector import pack
    from itsmreview.sequences import sequence_key
    from sqlalchemy import insert, text
    from sqlmodel import Session

    started = time.perf_counter()
    engine = create_db_engine(url)
    upgrade_database(engine)
    when = datetime(2026, 11, 1, tzinfo=UTC)
    log_file = write_csv(generate_log(3000, seed=11), folder / "scale-log.csv")
    with Session(engine) as session:
        log = import_log(log_file, session=session, preset="bpi2013", name="synth").log
        variants = coverage_queries.variants_frame(session=session, log_id=log.id)
        sequences = [list(s) for s in variants["sequence"].head(200)]
        rubric_row = ensure_rubric(load_rubric(), session=session)
        rubric = load_rubric()
        session.commit()
        rubric_id = rubric_row.id
    keys = [d.key for d in rubric.dimensions]
    secret = hash_password(PASSWORD)
    with engine.begin() as c:

        def put(model, rows):
            for start in range(0, len(rows), 20_000):
                c.execute(insert(model.__table__), rows[start : start + 20_000])

        put(
            User,
            [
                {
                    "id": i,
                    "username": "lead" if i == 1 else f"e{i - 1}",
                    "display_name": "Lead" if i == 1 else f"Expert {i - 1}",
                    "role": "lead" if i == 1 else "expert",
                    "password_hash": secret,
                    "expertise": [],
                    "active": True,
                    "created_at": when,
                    "session_epoch": 0,
                }
                for i in range(1, EXPERTS + 2)
            ],
        )
        put(
            ReviewRound,
            [
                {
                    "id": 1,
                    "name": "R",
                    "rubric_id": rubric_id,
                    "k": K,
                    "status": "open",
                    "reservation_minutes": 60,
                    "approval": {},
                    "created_at": when,
                    "created_by_id": 1,
                }
            ],
        )
        personas = ["L1 service desk agent", "L2 resolver", "Change manager", "Problem manager"]
        put(
            Task,
            [
                {
                    "id": t,
                    "external_id": f"task-{t:06d}",
                    "title": f"Task {t}",
                    "persona": personas[t % len(personas)],
                    "track": "single-agent",
                    "status": "in_review",
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
                    "persona": personas[t % len(personas)],
                    "track": "single-agent",
                    "source_format": "native",
                    "instruction": f"Handle incident {t}: the caller cannot reach the VPN.",
                    "environment": "",
                    "ground_truth": "",
                    "verifier": "",
                    "tags": [],
                    "source": {"log": "synth", "variants": [sequences[t % len(sequences)]]},
                    "provenance": PROVENANCE,
                    "extra": {},
                    "created_at": when,
                    "status": "in_review",
                }
                for t in range(1, tasks + 1)
            ],
        )
        put(
            TaskVersionVariant,
            [
                {
                    "task_version_id": t,
                    "sequence_key": sequence_key(sequences[t % len(sequences)]),
                    "sequence": sequences[t % len(sequences)],
                }
                for t in range(1, tasks + 1)
            ],
        )
        rated = max(0, tasks - UNRATED)  # a small build: a fresh round, none rated
        put(
            RoundTask,
            [
                {
                    "id": t,
                    "round_id": 1,
                    "task_version_id": t,
                    "priority": (t % 97) / 97,
                    "places_held": K if t <= rated else 0,
                }
                for t in range(1, tasks + 1)
            ],
        )
        assignments, ratings, scores, transcripts = [], [], [], []
        flag_keys = [f.key for f in rubric.flags]
        experts, given_scores, verdicts, flags = panel_ratings(rated, keys, flag_keys)
        entries = []  # (artifact type, id, field, action, source kind, reference, actor, payload)
        for t in range(1, tasks + 1):
            entries.append(
                (
                    "task",
                    f"task-{t:06d}@v1",
                    None,
                    "import",
                    "system",
                    "format native",
                    None,
                    {"content_hash": f"{t:064x}"},
                )
            )
            entries += [
                (
                    "task",
                    f"task-{t:06d}@v1",
                    d["field"],
                    "declare-provenance",
                    d["source"],
                    d["reference"],
                    None,
                    None,
                )
                for d in PROVENANCE
            ]
        rid = 0
        for t in range(1, tasks + 1):
            transcripts.append(
                {
                    "task_version_id": t,
                    "external_id": f"run-{t}",
                    "title": "Simulated caller",
                    "simulator": {"model": "replay"},
                    "messages": _transcript(t),
                    "n_turns": 6,
                    "extra": {},
                }
            )
            if t > rated:
                continue
            for j in range(K):
                rid += 1
                expert = int(experts[t - 1, j])
                stamp = when + timedelta(seconds=rid)
                assignments.append(
                    {
                        "id": rid,
                        "round_id": 1,
                        "task_version_id": t,
                        "expert_id": expert,
                        "status": "submitted",
                        "created_at": stamp,
                        "submitted_at": stamp,
                    }
                )
                given = {key: float(given_scores[t - 1, j, k]) for k, key in enumerate(keys)}
                ratings.append(
                    {
                        "id": rid,
                        "assignment_id": rid,
                        "round_id": 1,
                        "task_version_id": t,
                        "expert_id": expert,
                        "rubric_id": rubric_id,
                        "revision": 1,
                        "is_current": True,
                        "status": "submitted",
                        "verdict": str(verdicts[t - 1, j]),
                        "flags": flags[t - 1][j],
                        "comment": "",
                        "confidence": 4,
                        "rater_kind": "human",
                        "created_at": stamp,
                        "submitted_at": stamp,
                        "score_vector": pack(keys, given),
                    }
                )
                for key, value in given.items():
                    scores.append({"rating_id": rid, "dimension": key, "value": value})
                # the entry a submit writes: its payload commits to the rating's content
                content = {
                    "task_version_id": t,
                    "round_id": 1,
                    "expert_id": expert,
                    "revision": 1,
                    "rater_kind": "human",
                    "verdict": ratings[-1]["verdict"],
                    "flags": sorted(ratings[-1]["flags"]),
                    "comment": "",
                    "confidence": 4,
                    "scores": dict(sorted(given.items())),
                }
                entries.append(
                    (
                        "rating",
                        str(rid),
                        None,
                        "submit",
                        "expert",
                        "",
                        expert,
                        {
                            "task_version_id": t,
                            "round": "R",
                            "revision": 1,
                            "content_sha256": content_digest(content),
                        },
                    )
                )
            if len(scores) >= 200_000:
                put(Assignment, assignments)
                put(Rating, ratings)
                put(RatingScore, scores)
                put(Transcript, transcripts)
                assignments, ratings, scores, transcripts = [], [], [], []
        put(Assignment, assignments)
        put(Rating, ratings)
        put(RatingScore, scores)
        put(Transcript, transcripts)
        first = c.execute(text("SELECT COALESCE(MAX(seq), 0) FROM ledger_entries")).scalar()
        prev = (
            c.execute(
                text("SELECT entry_hash FROM ledger_entries WHERE seq = :s"), {"s": first}
            ).scalar()
            or GENESIS_HASH
        )
        rows = []
        stamp = when.isoformat(timespec="microseconds")
        for i, (a, b, fld, action, kind, ref, actor, payload) in enumerate(entries, start=1):
            row = {
                "seq": first + i,
                "created_at": when,
                "artifact_type": a,
                "artifact_id": b,
                "field": fld,
                "source_kind": kind,
                "reference": ref,
                "action": action,
                "actor_id": actor,
                "payload": payload,
            }
            row["prev_hash"] = prev
            row["entry_hash"] = prev = link(entry_content(SimpleNamespace(**row), stamp), prev)
            rows.append(row)
            if len(rows) >= 50_000:
                put(LedgerEntry, rows)
                rows = []
        put(LedgerEntry, rows)
        if c.dialect.name == "postgresql":
            for table in ("users", "review_rounds", "tasks", "task_versions", "round_tasks"):
                c.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT MAX(id) FROM {table}))"
                    )
                )
            for table in ("assignments", "ratings", "rating_scores", "ledger_entries"):
                c.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT MAX(id) FROM {table}))"
                    )
                )
    with Session(engine) as session:
        _settle_statuses(session)
        analyze(
            session,
            "tasks",
            "task_versions",
            "task_version_variants",
            "round_tasks",
            "assignments",
            "ratings",
            "rating_scores",
            "ledger_entries",
        )
        session.commit()
    engine.dispose()
    return {"tasks": tasks, "ratings": rid, "seconds": time.perf_counter() - started}


def _settle_statuses(session) -> None:
    """Decide every task as the submits would have left it, through the product's path: the
    round's gate counts built from its ratings, every task re-decided (`recompute_statuses`,
    what an alpha crossing does), each change stored with its ledger entry, chained at the
    commit."""
    from itsmreview.ledger.service import chain_at_commit
    from itsmreview.review.gate.service import recompute_statuses

    chain_at_commit(session)
    recompute_statuses(session=session)
    session.commit()


def status_mix(url: str) -> dict:
    """How many tasks of the round stand at each status: compare with a real round's mix."""
    from itsmreview.db import create_db_engine
    from itsmreview.review.dashboard.queries import round_status_counts
    from sqlmodel import Session

    engine = create_db_engine(url)
    with Session(engine) as session:
        found = round_status_counts(session=session, round_id=1)
    engine.dispose()
    return found


def _median(values: list[float]) -> dict:
    return {
        "median_ms": statistics.median(values) * 1000,
        "min_ms": min(values) * 1000,
        "max_ms": max(values) * 1000,
        "n": len(values),
    }


def _lead(session):
    from itsmreview.accounts.queries import user_by_username

    return user_by_username(session=session, username="lead")


def group_pages(repeats: int = 5) -> dict:
    import itsmreview

    app = str(Path(itsmreview.__file__).parent / "streamlit_app.py")
    out = {}
    for role, pages in PAGES.items():
        at, login = _logged_in(app, role)
        out[f"login to the start page ({role}), first session of the process"] = _median([login])
        for page in pages:
            # the first runs start what the page computes in the background
            times, waits = page_views(at, page, repeats + 2, background_after=2)
            for run, waited in enumerate(waits):
                if waited > 0.05:
                    out[f"page {page} ({role}): background figures, run {run + 1}"] = _median(
                        [waited]
                    )
            out[f"page {page} ({role}), first view"] = _median(times[:1])
            out[f"page {page} ({role})"] = _median(times[2:])
            if page == "tasks":
                out.update(_filtered_tasks(at, repeats))
    out.update(_new_sessions(app, repeats))
    return out


def _logged_in(app: str, role: str):
    """A new session (AppTest) logged in as `role`, and the seconds from the login's click to
    its start page drawn."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(app, default_timeout=600)
    at.run()
    at.text_input(key="login_username").input("lead" if role == "lead" else "e1")
    at.text_input(key="login_password").input(PASSWORD)
    start = time.perf_counter()
    at.button(key="FormSubmitter:login-Log in").click().run()
    return at, time.perf_counter() - start


def _filtered_tasks(at, repeats: int) -> dict:
    """The Tasks page's views after a filter changes: each filter set and cleared in turn, the
    set views timed (the page's own filters: status, persona, text)."""
    out = {}
    filters = {
        "status adjudication": (at.multiselect, "tasks-statuses", ["adjudication"]),
        "one persona": (
            at.multiselect,
            "tasks-personas",
            at.multiselect(key="tasks-personas").options[:1],
        ),
        "text 'task-12'": (at.text_input, "tasks-text", "task-12"),
    }
    for name, (kind, key, value) in filters.items():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            kind(key=key).set_value(value).run()
            times.append(time.perf_counter() - start)
            if at.exception:
                raise SystemExit(f"tasks filtered by {name} failed: {at.exception}")
            kind(key=key).set_value("" if isinstance(value, str) else []).run()
        out[f"page tasks (lead), filtered by {name}"] = _median(times)
    return out


def _new_sessions(app: str, repeats: int) -> dict:
    """Each page's first view in a new session of a warm process (a second login, a new
    browser tab): what a lead or an expert opening the tool meets."""
    out = {}
    logins = {role: [] for role in PAGES}
    for role, pages in PAGES.items():
        for page in pages:
            times = []
            for _ in range(repeats):
                at, login = _logged_in(app, role)
                logins[role].append(login)
                start = time.perf_counter()
                at.switch_page(f"views/{page}.py").run()
                times.append(time.perf_counter() - start)
                if at.exception:
                    raise SystemExit(f"page {page} failed in a new session: {at.exception}")
            out[f"page {page} ({role}), a new session"] = _median(times)
    for role, times in logins.items():
        out[f"login to the start page ({role}), a new session"] = _median(times)
    return out


def group_write(submits: int = 20) -> dict:
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.gate.service import current_gate, recompute_statuses
    from itsmreview.review.ratings.service import submit_rating
    from itsmreview.review.rounds.assignment import claim_next

    claims, writes = [], []
    for n in range(submits):
        with session_scope() as session:
            expert = user_by_username(session=session, username=f"e{1 + n % EXPERTS}")
            start = time.perf_counter()
            assignment = claim_next(session=session, actor=expert)
            claims.append(time.perf_counter() - start)
            _, rubric = current_gate(session=session)
            start = time.perf_counter()
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=assignment.id,
                scores={d.key: 4 for d in rubric.dimensions},
                verdict="accept",
            )
            session.flush()
            writes.append(time.perf_counter() - start)
    full = []
    for _ in range(3):
        with session_scope() as session:
            start = time.perf_counter()
            recompute_statuses(session=session)
            full.append(time.perf_counter() - start)
            session.rollback()
    return {
        "claim the next task": _median(claims),
        "submit one rating": _median(writes),
        "baseline: full gate recomputation (what each submit did before)": _median(full),
    }


def group_agreement() -> dict:
    from itsmreview.db import session_scope
    from itsmreview.review.gate.item_agreement import round_agreement

    times = []
    for _ in range(3):
        with session_scope() as session:
            start = time.perf_counter()
            round_agreement(session=session, actor=_lead(session), bootstrap=1000)
            times.append(time.perf_counter() - start)
    return {"agreement, 1,000 bootstrap samples": _median(times)}


def group_round() -> dict:
    from itsmreview.catalog.queries import latest_version_ids
    from itsmreview.db import session_scope
    from itsmreview.review.models import Rubric
    from itsmreview.review.rounds.service import create_round
    from sqlmodel import select

    times = []
    for n in range(3):
        with session_scope() as session:
            rubric = session.exec(select(Rubric)).first()
            start = time.perf_counter()
            versions = latest_version_ids(session=session)
            create_round(
                session=session,
                actor=_lead(session),
                name=f"all-{n}",
                rubric=rubric,
                task_version_ids=versions,
            )
            session.flush()
            times.append(time.perf_counter() - start)
            session.rollback()
    return {"create a round over every task": _median(times)}


def group_cli() -> dict:
    out = {}
    binary = Path(sys.executable).with_name("itsmreview")
    for name, args in (
        ("itsmreview --help", ["--help"]),
        ("itsmreview round list", ["round", "list"]),
    ):
        times = []
        for _ in range(4):
            start = time.perf_counter()
            subprocess.run([str(binary), *args], check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        out[name] = _median(times[1:])
    return out


def _start_together(barrier: Path, index: int, ready=None) -> None:
    """Say this worker is ready, then wait for the start time the parent writes. A thread of
    a replica (`ready`: the replica's barrier) waits for its siblings; the replica says it."""
    if ready is None:
        (barrier / f"ready-{index}").touch()
    else:
        ready.wait()
    go = barrier / "go"
    while not go.exists():
        time.sleep(0.01)
    time.sleep(max(0.0, float(go.read_text() or 0) - time.time()))


def concurrent_worker(index: int, submits: int, barrier: Path, think: float, ready=None) -> dict:
    """One expert's process: claim and submit, each in `write_transaction` as the queue page
    does (busy writes, deadlocks and serialization failures retried whole). Imports and
    connects first, says so in `barrier`, then waits for the start time the parent writes
    there once every worker is ready, so that fifty start-ups do not overlap the work;
    before each action it thinks for a uniform 0-2x`think` seconds."""
    import random

    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope, write_transaction
    from itsmreview.review.gate.service import current_gate
    from itsmreview.review.ratings.service import submit_rating
    from itsmreview.review.rounds.assignment import claim_next

    # the page knows its logged-in expert and shows the rubric before a claim or a submit
    with session_scope() as session:
        expert = user_by_username(session=session, username=f"e{index}")
        scores = {d.key: 4 for d in current_gate(session=session)[1].dimensions}
    _start_together(barrier, index, ready)
    chance = random.Random(index)
    claims, writes, errors = [], [], []
    cpu_start = time.process_time()

    def claim(session):
        assignment = claim_next(session=session, actor=expert)
        return None if assignment is None else assignment.id

    def submit(session, assignment_id):
        submit_rating(
            session=session,
            actor=expert,
            assignment_id=assignment_id,
            scores=scores,
            verdict="accept",
        )

    for _ in range(submits):
        try:
            time.sleep(chance.uniform(0, 2 * think))
            start = time.perf_counter()
            assignment_id = write_transaction(claim)
            claims.append(time.perf_counter() - start)
            if assignment_id is None:
                break
            time.sleep(chance.uniform(0, 2 * think))
            start = time.perf_counter()
            write_transaction(lambda session, a=assignment_id: submit(session, a))
            writes.append(time.perf_counter() - start)  # includes the commit
        except Exception as exc:  # noqa: BLE001 - counted and reported, not hidden
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
    cpu = time.process_time() - cpu_start
    return {"claims": claims, "writes": writes, "errors": errors, "cpu_s": cpu}


def replica_worker(
    replica: int, experts: str, submits: int, barrier: Path, think: float, work=None
) -> dict:
    """One web replica serving several experts at once, as `itsmreview serve` does: one
    process, a thread per expert session (Streamlit runs each session's script on a thread of
    its own), sharing the process's engine and its interpreter lock. Each thread claims and
    submits exactly as `concurrent_worker` does (or `work`: the floor's bare driver calls).
    `experts`: "FIRST-LAST" indices."""
    import threading

    first, last = (int(v) for v in experts.split("-"))
    results: dict[int, dict] = {}
    ready = threading.Barrier(last - first + 2)

    def session_thread(index: int) -> None:
        results[index] = (work or concurrent_worker)(index, submits, barrier, think, ready=ready)

    threads = [threading.Thread(target=session_thread, args=(i,)) for i in range(first, last + 1)]
    for thread in threads:
        thread.start()
    ready.wait()  # every session has its expert and rubric: the process is ready
    _start_together(barrier, replica)
    cpu_start = time.process_time()
    for thread in threads:
        thread.join()
    return {
        "claims": [c for r in results.values() for c in r["claims"]],
        "writes": [w for r in results.values() for w in r["writes"]],
        "errors": [e for r in results.values() for e in r["errors"]],
        "cpu_s": time.process_time() - cpu_start,
    }


def floor_worker(index: int, submits: int, barrier: Path, think: float, ready=None) -> dict:
    """The floor under the concurrent run: the same process, start and pauses, but a claim is
    one locking SELECT and an UPDATE of a scratch table, and a submit one INSERT of a rating
    and its eight scores, straight through the driver (no ORM, gate, ledger or checks)."""
    import random

    import psycopg
    from itsmreview.settings import get_settings
    from sqlalchemy.engine import make_url

    url = make_url(get_settings().resolved_database_url())
    connection = psycopg.connect(
        host=url.host, port=url.port, user=url.username, dbname=url.database, autocommit=True
    )
    _start_together(barrier, index, ready)
    chance = random.Random(index)
    claims, writes = [], []
    cpu_start = time.process_time()
    for _ in range(submits):
        time.sleep(chance.uniform(0, 2 * think))
        start = time.perf_counter()
        with connection.transaction():
            row = connection.execute(
                "SELECT id FROM floor_places WHERE held < 3 ORDER BY id LIMIT 1 "
                "FOR UPDATE SKIP LOCKED"
            ).fetchone()
            connection.execute("UPDATE floor_places SET held = held + 1 WHERE id = %s", row)
        claims.append(time.perf_counter() - start)
        time.sleep(chance.uniform(0, 2 * think))
        start = time.perf_counter()
        with connection.transaction():
            rating = connection.execute(
                "INSERT INTO floor_ratings (place, expert) VALUES (%s, %s) RETURNING id",
                (row[0], index),
            ).fetchone()[0]
            connection.cursor().executemany(
                "INSERT INTO floor_scores (rating, dimension, value) VALUES (%s, %s, 4)",
                [(rating, f"d{d}") for d in range(8)],
            )
        writes.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu_start
    return {"claims": claims, "writes": writes, "errors": [], "cpu_s": cpu}


def gate_applier(barrier: Path, poll: float) -> dict:
    """The server's gate worker, as its own process: applies what the experts' submits queue,
    looking every `poll` seconds, until the parent says stop and nothing is left. Samples how
    long the oldest queued rating had waited at each look (how far statuses lag submits)."""
    from itsmreview.db import get_engine
    from itsmreview.review.gate.work import apply_pending, pending
    from sqlmodel import Session

    engine = get_engine()
    (barrier / "applier-ready").touch()
    ages, applied, batches, errors = [], 0, 0, []
    while True:
        stopping = (barrier / "stop").exists()
        with Session(engine) as session:
            waiting, oldest = pending(session=session)
        if oldest is not None:
            ages.append((datetime.now(UTC) - oldest).total_seconds())
        if waiting:
            try:
                applied += apply_pending(engine=engine)
            except Exception as exc:  # noqa: BLE001 - counted and reported; the queue keeps it
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
            batches += 1
        elif stopping:
            break
        time.sleep(poll)
    return {"applied": applied, "looks_with_work": batches, "ages": ages, "errors": errors}


def lag_sampler(barrier: Path, poll: float) -> dict:
    """Beside the product's own `itsmreview worker` (SCALE_GATE_WORKER=itsmreview): looks every
    `poll` seconds how long the oldest queued rating has waited, as a page would see it,
    until the parent says stop and nothing is queued; applies nothing."""
    from itsmreview.db import get_engine
    from itsmreview.review.gate.work import pending
    from sqlmodel import Session

    engine = get_engine()
    (barrier / "applier-ready").touch()
    ages, looks_with_work = [], 0
    while True:
        stopping = (barrier / "stop").exists()
        with Session(engine) as session:
            waiting, oldest = pending(session=session)
        if oldest is not None:
            ages.append((datetime.now(UTC) - oldest).total_seconds())
            looks_with_work += 1
        elif stopping:
            break
        time.sleep(poll)
    return {"applied": None, "looks_with_work": looks_with_work, "ages": ages, "errors": []}


def gate_consistency() -> dict:
    """Whether the gate's incremental state equals a recomputation from scratch: the round's
    stored coincidence counts against counts built anew from every rating, and every task's
    stored status against the gate's decision recomputed from the round's ratings."""
    from itsmreview.db import session_scope
    from itsmreview.review.gate import cache as gatecache
    from itsmreview.review.gate.queries import pending as pending_queries
    from itsmreview.review.gate.queries import reads as gate_queries
    from itsmreview.review.gate.round_data import load_round
    from itsmreview.review.gate.service import gate_decisions

    with session_scope() as session:
        data = load_round(session=session)
        stored = {
            r.dimension: r.pairs
            for r in gate_queries.coincidence_rows(session=session, round_id=data.review_round.id)
        }
        fresh = gatecache.recomputed_pairs(
            session=session, review_round=data.review_round, rubric=data.rubric
        )
        tasks, decisions = gate_decisions(session=session, data=data)
        wrong = sum(
            1
            for row in tasks.itertuples()
            if decisions[int(row.task_version_id)].status != row.status
        )
        queued = pending_queries.pending_summary(session=session)[0]
    return {
        "counts_equal_recomputed": stored == fresh,
        "statuses_differing_from_recomputed": wrong,
        "still_queued": queued,
    }


def group_concurrent(workers: int = EXPERTS, submits: int = 20) -> dict:
    """Fifty experts at once, twice: acting back to back (no pause: the issue's load), and
    pausing a mean 1 s before each claim and each submit (still far quicker than a person
    reading a task)."""
    from itsmreview.db import get_engine
    from sqlalchemy import text

    out = {}
    replicas = int(os.environ.get("SCALE_REPLICAS", "2"))
    served = f"{replicas} replicas" if replicas else "a process each"
    for think in (0.0, 1.0):
        out[f"concurrent, {served}, think {think:g} s"] = _concurrent_run(
            workers, submits, think, replicas=replicas
        )
    out["gate after the runs against a recomputation from scratch"] = gate_consistency()
    scratch = ("floor_places", "floor_ratings", "floor_scores")
    with get_engine().begin() as c:
        c.execute(text("CREATE TABLE floor_places (id serial PRIMARY KEY, held int NOT NULL)"))
        c.execute(text("INSERT INTO floor_places (held) SELECT 0 FROM generate_series(1, 5000)"))
        c.execute(text("CREATE TABLE floor_ratings (id serial PRIMARY KEY, place int, expert int)"))
        c.execute(text("CREATE TABLE floor_scores (rating int, dimension text, value float)"))
    try:
        out["floor, think 0 s: bare claim and insert (no ORM, gate or ledger)"] = _concurrent_run(
            workers, submits, 0.0, mode="--floor-worker"
        )
        if replicas:  # the same bare calls served as the product's are: threads of replicas
            out[f"floor, think 0 s, {served}: bare claim and insert"] = _concurrent_run(
                workers, submits, 0.0, mode="--floor-worker", replicas=replicas
            )
    finally:
        with get_engine().begin() as c:
            for table in scratch:
                c.execute(text(f"DROP TABLE IF EXISTS {table}"))
    return out


def _cpu_times() -> tuple[float, float]:
    """Busy and total CPU seconds of the whole machine so far (every process: the workers,
    PostgreSQL, anything else), from /proc/stat."""
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


def _process_cpu(pid: int) -> float:
    """User and system CPU seconds of one process so far, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _concurrent_run(
    workers: int, submits: int, think: float, mode: str = "--worker", replicas: int = 0
) -> dict:
    """`workers` experts claiming and submitting `submits` times each: a process each, or with
    `replicas`, that many replica processes serving them on threads."""
    from itsmreview.db import get_engine
    from sqlalchemy import text

    barrier = Path(tempfile.mkdtemp(prefix="scale-barrier-"))
    # the experts' submits only queue their gate work, as a server's do: the server's gate
    # worker (here a process of its own) applies it
    env = {**os.environ, "ITSMREVIEW_GATE_APPLY": "queue"}
    applier = product_worker = None
    if mode == "--worker" and os.environ.get("SCALE_GATE_WORKER") == "itsmreview":
        # the product's worker process applies the queue (woken by each submit's NOTIFY);
        # a light sampler beside it measures how long queued ratings wait
        product_worker = subprocess.Popen(
            [sys.executable, "-m", "itsmreview.cli", "worker", "--poll", "1"],
            stdout=subprocess.PIPE,
            text=True,
            env={**env, "ITSMREVIEW_JOBS": "worker", "PGAPPNAME": "scale worker"},
        )
        # its first line says it waits for jobs: started and connected before the experts
        ready = product_worker.stdout.readline()
        if "waiting for jobs" not in ready:
            raise SystemExit(f"the worker did not start: {ready!r}")
        applier = subprocess.Popen(
            [sys.executable, __file__, "--lag-sampler", str(barrier), "0.1"],
            stdout=subprocess.PIPE,
            text=True,
            env={**env, "PGAPPNAME": "scale sampler"},
        )
    elif mode == "--worker":
        applier = subprocess.Popen(
            [sys.executable, __file__, "--applier", str(barrier), str(APPLIER_POLL_S)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
    if replicas:
        bounds = [workers * r // replicas for r in range(replicas + 1)]
        serving = "--floor-replica" if mode == "--floor-worker" else "--replica"
        commands = [
            [serving, str(r + 1), f"{bounds[r] + 1}-{bounds[r + 1]}"] for r in range(replicas)
        ]
    else:
        commands = [[mode, str(i)] for i in range(1, workers + 1)]
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, *command, str(submits), str(barrier), str(think)],
            stdout=subprocess.PIPE,
            text=True,
            env={**env, "PGAPPNAME": "scale experts"},
        )
        for command in commands
    ]
    deadline = time.time() + 600
    while len(list(barrier.glob("ready-*"))) < len(commands) and time.time() < deadline:
        if any(p.poll() not in (None, 0) for p in processes):
            break  # a worker failed to start: its error is reported below
        time.sleep(0.1)
    start_at = time.time() + 1.0  # every worker has imported and connected
    (barrier / "go.tmp").write_text(repr(start_at))
    (barrier / "go.tmp").replace(barrier / "go")
    time.sleep(max(0.0, start_at - time.time()))
    busy_before, total_before = _cpu_times()
    worker_before = _process_cpu(product_worker.pid) if product_worker else 0.0
    results = []
    for process in processes:
        lines = process.communicate()[0].strip().splitlines()
        results.append(
            json.loads(lines[-1])
            if lines
            else {"claims": [], "writes": [], "errors": [f"worker exited {process.returncode}"]}
        )
    experts_done = time.time()
    gate = {}
    if applier is not None:
        (barrier / "stop").touch()
        lines = applier.communicate()[0].strip().splitlines()
        done = json.loads(lines[-1]) if lines else {"applied": None, "ages": []}
        if product_worker is not None:
            gate["worker_cpu_s"] = _process_cpu(product_worker.pid) - worker_before
            product_worker.terminate()  # SIGTERM: it ends after the batch it applies
            product_worker.wait(60)
        ages = sorted(done["ages"])
        gate |= {
            "gate_applied": done["applied"],
            "gate_looks_with_work": done.get("looks_with_work"),
            "gate_lag_p50_ms": ages[len(ages) // 2] * 1000 if ages else 0.0,
            "gate_lag_p95_ms": ages[min(len(ages) - 1, int(0.95 * len(ages)))] * 1000
            if ages
            else 0.0,
            "gate_lag_max_ms": ages[-1] * 1000 if ages else 0.0,
            "gate_done_after_experts_ms": (time.time() - experts_done) * 1000,
            "gate_errors": len(done.get("errors", [])),
            "gate_first_errors": done.get("errors", [])[:2],
        }
    busy_after, total_after = _cpu_times()
    shutil.rmtree(barrier, ignore_errors=True)
    elapsed = time.time() - start_at
    writes = sorted(w for r in results for w in r["writes"])
    claims = sorted(c for r in results for c in r["claims"])
    with get_engine().connect() as c:
        over_k = c.execute(
            text(
                "SELECT COUNT(*) FROM (SELECT task_version_id FROM ratings WHERE is_current "
                "AND status = 'submitted' AND round_id = 1 GROUP BY task_version_id "
                "HAVING COUNT(*) > 3) o"
            )
        ).scalar()
        duplicated = c.execute(
            text(
                "SELECT COUNT(*) FROM (SELECT assignment_id FROM ratings WHERE is_current "
                "GROUP BY assignment_id HAVING COUNT(*) > 1) d"
            )
        ).scalar()

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else None

    errors = [e for r in results for e in r["errors"]]
    cpu_s = busy_after - busy_before
    cores = os.cpu_count() or 1
    cycles = max(1, len(writes))
    experts_cpu_s = sum(r.get("cpu_s", 0.0) for r in results)
    worker_cpu_s = gate.pop("worker_cpu_s", 0.0)
    return {
        # where the CPU of a claim and a submit goes: the experts' processes (the web
        # processes' share in a deployment), the gate's worker, and the rest (PostgreSQL,
        # the sampler, the kernel)
        "cpu_ms_experts_per_cycle": experts_cpu_s / cycles * 1000,
        "cpu_ms_worker_per_cycle": worker_cpu_s / cycles * 1000,
        "cpu_ms_rest_per_cycle": (cpu_s - experts_cpu_s - worker_cpu_s) / cycles * 1000,
        # a claim and a submit cost this much CPU, all processes together; with no pause
        # and the CPU saturated, Little's law puts the mean time of a claim and a submit at
        # workers x this / cores, whatever the code does with locks
        "cpu_ms_per_claim_and_submit": cpu_s / max(1, len(writes)) * 1000,
        "cpu_busy_share": cpu_s / max(1e-9, total_after - total_before),
        "littles_law_floor_ms": workers * cpu_s / max(1, len(writes)) / cores * 1000,
        "workers": workers,
        "think_s": think,
        "submits": len(writes),
        "submits_per_s": len(writes) / elapsed,
        "submit_p50_ms": pct(writes, 0.5),
        "submit_p95_ms": pct(writes, 0.95),
        "submit_max_ms": writes[-1] * 1000 if writes else None,
        "claim_p50_ms": pct(claims, 0.5),
        "claim_p95_ms": pct(claims, 0.95),
        "errors": len(errors),
        "first_errors": errors[:3],
        "over_k_tasks": over_k,
        "duplicated": duplicated,
        **gate,
    }


GROUPS = {
    "pages": group_pages,
    "write": group_write,
    "agreement": group_agreement,
    "round": group_round,
    "cli": group_cli,
    "concurrent": group_concurrent,
}


def run_group(name: str, url: str, data_dir: Path) -> dict:
    env = {
        **os.environ,
        "ITSMREVIEW_DATABASE_URL": url,
        "ITSMREVIEW_DATA_DIR": str(data_dir),
        "PYTHONSAFEPATH": "1",
    }
    result = subprocess.run(
        [sys.executable, __file__, "--group", name], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        return {name: {"failed": result.stderr.strip().splitlines()[-1:]}}
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--backend", default="sqlite,postgresql")
    parser.add_argument("--groups", default=",".join(GROUPS))
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--floor-worker", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--replica", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--floor-replica", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--applier", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--lag-sampler", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(
        "--gate-worker",
        choices=["bench", "itsmreview"],
        default="bench",
        help="concurrent group: who applies the gate's queue: this benchmark's applier loop, "
        "or the product's `itsmreview worker` process (as a team deployment runs it)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=2,
        help="concurrent group: the experts' sessions are threads of this many replica "
        "processes, as behind `make team` (0: a process per expert, the eighth session's "
        "model, which adds fifty processes' scheduling to every figure)",
    )
    parser.add_argument(
        "--build-only",
        metavar="DIR",
        help="build the database in DIR (kept, for profiling and --reuse) and stop: SQLite "
        "unless --backend postgresql (database ITSMREVIEW_BENCH_PG_DATABASE, default "
        "itsmreview_scale)",
    )
    parser.add_argument(
        "--reuse",
        nargs=2,
        metavar=("URL", "DIR"),
        help="run --groups against a database built before (URL) and its data folder (DIR) "
        "instead of building one; each run adds its claims and ratings to it",
    )
    args = parser.parse_args()
    os.environ["SCALE_GATE_WORKER"] = os.environ.get("SCALE_GATE_WORKER", args.gate_worker)
    os.environ["SCALE_REPLICAS"] = os.environ.get("SCALE_REPLICAS", str(args.replicas))
    if args.reuse:
        url, folder = args.reuse
        backend = "postgresql" if url.startswith("postgresql") else "sqlite"
        _run_groups(backend, url, Path(folder), args.groups)
        return
    if args.build_only:
        folder = Path(args.build_only)
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["ITSMREVIEW_DATA_DIR"] = str(folder)
        backend = "postgresql" if args.backend == "postgresql" else "sqlite"
        url = _database_url(backend, folder)
        built = build(url, args.tasks, folder)
        print(f"built {built['tasks']:,} tasks in {built['seconds']:.0f} s: {url}")
        print(json.dumps(status_mix(url)))
        return
    if args.group:
        print(json.dumps(GROUPS[args.group]()))
        return
    if args.applier:
        print(json.dumps(gate_applier(Path(args.applier[0]), float(args.applier[1]))))
        return
    if args.lag_sampler:
        print(json.dumps(lag_sampler(Path(args.lag_sampler[0]), float(args.lag_sampler[1]))))
        return
    if args.replica or args.floor_replica:
        replica, experts, submits, barrier, think = args.replica or args.floor_replica
        work = floor_worker if args.floor_replica else concurrent_worker
        print(
            json.dumps(
                replica_worker(
                    int(replica), experts, int(submits), Path(barrier), float(think), work
                )
            )
        )
        return
    for worker, work in ((args.worker, concurrent_worker), (args.floor_worker, floor_worker)):
        if worker:
            index, submits, barrier, think = worker
            print(json.dumps(work(int(index), int(submits), Path(barrier), float(think))))
            return
    for backend in args.backend.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            url = _database_url(backend, folder)
            os.environ["ITSMREVIEW_DATA_DIR"] = str(folder)
            built = build(url, args.tasks, folder)
            print(
                f"[{backend}] built {built['tasks']:,} tasks / {built['ratings']:,} ratings "
                f"in {built['seconds']:.0f} s",
                flush=True,
            )
            _run_groups(backend, url, folder, args.groups)


def _run_groups(backend: str, url: str, folder: Path, groups: str) -> None:
    for group in groups.split(","):
        if group == "concurrent" and backend != "postgresql":
            continue
        for name, row in run_group(group, url, folder).items():
            if "median_ms" in row:
                print(
                    f"[{backend}] {name:<66} {row['median_ms']:>9.1f} ms "
                    f"({row['min_ms']:.1f}-{row['max_ms']:.1f}, n={row['n']})",
                    flush=True,
                )
            else:
                print(f"[{backend}] {name}: {json.dumps(row)}", flush=True)


if __name__ == "__main__":
    main()
