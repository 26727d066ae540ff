"""Delphi rounds at the issue's size: `python benchmarks/delphi.py` (one command;
`--backend sqlite,postgresql`, `--tasks 1000`, `--repeats 5`).

Builds, on each backend, a round of 1,000 tasks rated blind by a panel of 10 experts on every
rubric item (`panel_scores`: each task a quality and each item a deviation from it, each expert
a leniency and a steadiness, a rating misread now and then, and a third of the tasks read two
ways by the panel, so that about a third of them end phase 1 beyond the IQR limit: a
consensus to reach, not a panel that agrees already), in bulk, every task decided by the
product's gate. Then, through the product's services, makes it a Delphi round (IQR <= 1, at
most 3 phases), ends phase 1, lets the panel revise phase 2 as the Consensus page lets them
(an answer far from the panel's median moves towards it, with a reason, more often than one
near it; an expert answers most of their tasks, expert e1 leaves 100 for the measurements),
ends phase 2, revises phase 3 likewise, and ends it (the round closes). A copy is kept of each
state. Each group then runs in a fresh process, medians of `--repeats` warm runs (min-max),
the first, cold run of the process shown apart:

- phase change: `advance_phase` ending phase 1, ending phase 2, and ending phase 3 (the
  close, which decides the tasks that converged), each run on a fresh copy of the state
  before, committed; baseline: the same by bare SQL (lock the round's Delphi
  row, count the task items whose stored spread is beyond the limit, move the phase);
- reveal: the Consensus page as expert e1 sees it in phase 2, rendered by Streamlit's AppTest
  (server time of a rerun), and inside it the service calls it makes (`rounds_to_revise`,
  `reveal`); baseline: the same page when no round waits for the expert (the closed round):
  the app shell, the login check and the page's lookup, which no work on the reveal removes;
- revise: e1 submits 10 revisions (half change an item, with a reason), each its own
  transaction; baseline: the same data by bare statements (read the expert's answers of the
  task, insert the answers, commit);
- report: `delphi_report` of the closed round (three phases, 300,000 answers) and the command
  `itsmreview agreement --round D` (a fresh process, start-up included); baseline: the same
  command and `round_agreement` on the same ratings as an ordinary round (before the round
  became a Delphi round), what a lead waits for on any round of this size.

Targets (issue 37): phase change and reveal <= 200 ms server time; the report <= 2 s.
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import peak_mb  # noqa: E402
from scale import POSTGRES, _settle_statuses, status_mix  # noqa: E402

PANEL = 10
PASSWORD = "delphi-pass"
ROUND = "D"
LEFT = 100  # tasks expert e1 leaves unanswered in phase 2, for the reveal and revise runs
REVISES = 10
REASONS = (
    "The panel's reading of the verifier convinced me.",
    "I had missed the change link in the transcript.",
    "Others saw the caller's second message; I agree on reflection.",
    "The persona would not escalate this; lowered.",
)
STATES = ("plain", "phase1", "phase2", "phase3", "closed")


def panel_scores(tasks: int, items: int, seed: int = 37):
    """Scores of a panel of PANEL experts on every item of every task, as a real panel rates:
    each task a quality and each item of it a deviation; each expert a leniency (bias) and a
    steadiness (noise); 2% of ratings misread (a value drawn at random); and 35% of the tasks
    contentious, read two ways, each expert falling in one camp or the other, 1.2-2.6 points
    apart. Tuned so that about a third of the tasks end phase 1 with an item's IQR above 1.

    Returns (scores: tasks x PANEL x items in 1..5, commented: tasks x PANEL booleans)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    quality = rng.normal(3.7, 0.9, tasks)
    deviation = rng.normal(0.0, 0.4, (tasks, 1, items))
    bias = rng.normal(0.0, 0.3, PANEL)
    steadiness = rng.uniform(0.3, 0.6, PANEL)
    noise = rng.normal(0.0, 1.0, (tasks, PANEL, items)) * steadiness[None, :, None]
    contentious = rng.random(tasks) < 0.35
    camp = rng.random((tasks, PANEL)) < 0.5
    gap = rng.uniform(1.2, 2.6, tasks)[:, None] / 2
    shift = np.where(contentious[:, None], np.where(camp, gap, -gap), 0.0)
    raw = quality[:, None, None] + deviation + bias[None, :, None] + noise + shift[:, :, None]
    misread = rng.random(raw.shape) < 0.02
    raw = np.where(misread, rng.uniform(0.5, 5.5, raw.shape), raw)
    commented = rng.random((tasks, PANEL)) < np.where(contentious[:, None], 0.25, 0.05)
    return np.clip(np.rint(raw), 1, 5), commented


def build(url: str, tasks: int) -> dict:
    """The blind phase in bulk: a lead and PANEL experts (e1..e10), the default rubric, one
    round of `tasks` tasks with k = PANEL, every expert's submitted rating of every task (its
    assignment, every item scored, a comment on some), then every task decided by the gate
    (`recompute_statuses`, what the submits would have left)."""
    import numpy as np
    from itsmreview.accounts.models import User
    from itsmreview.accounts.service import hash_password
    from itsmreview.catalog.models import Task, TaskVersion
    from itsmreview.db import analyze, create_db_engine, upgrade_database
    from itsmreview.review.models import Assignment, Rating, RatingScore, ReviewRound, RoundTask
    from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
    from itsmreview.review.scorevector import pack
    from sqlalchemy import insert, text
    from sqlmodel import Session

    engine = create_db_engine(url)
    upgrade_database(engine)
    when = datetime(2026, 11, 1, tzinfo=UTC)
    rubric = load_rubric()
    with Session(engine) as session:
        rubric_id = ensure_rubric(rubric, session=session).id
        session.commit()
    keys = [d.key for d in rubric.dimensions]
    scores, commented = panel_scores(tasks, len(keys))
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
                for i in range(1, PANEL + 2)
            ],
        )
        put(
            ReviewRound,
            [
                {
                    "id": 1,
                    "name": ROUND,
                    "rubric_id": rubric_id,
                    "k": PANEL,
                    "status": "open",
                    "reservation_minutes": 60,
                    "approval": {},
                    "created_at": when,
                    "created_by_id": 1,
                }
            ],
        )
        put(
            Task,
            [
                {
                    "id": t,
                    "external_id": f"task-{t:05d}",
                    "title": f"Task {t}",
                    "persona": "L1 service desk agent",
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
                    "persona": "L1 service desk agent",
                    "track": "single-agent",
                    "source_format": "native",
                    "instruction": f"Handle incident {t}: the caller cannot reach the VPN.",
                    "environment": "",
                    "ground_truth": "",
                    "verifier": "",
                    "tags": [],
                    "source": {},
                    "provenance": [],
                    "extra": {},
                    "created_at": when,
                    "status": "in_review",
                }
                for t in range(1, tasks + 1)
            ],
        )
        put(
            RoundTask,
            [
                {
                    "id": t,
                    "round_id": 1,
                    "task_version_id": t,
                    "priority": 0.5,
                    "places_held": PANEL,
                }
                for t in range(1, tasks + 1)
            ],
        )
        assignments, ratings, rating_scores = [], [], []
        for t in range(1, tasks + 1):
            for j in range(PANEL):
                rid = (t - 1) * PANEL + j + 1
                given = {key: float(scores[t - 1, j, k]) for k, key in enumerate(keys)}
                mean = sum(given.values()) / len(given)
                assignments.append(
                    {
                        "id": rid,
                        "round_id": 1,
                        "task_version_id": t,
                        "expert_id": j + 2,
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
                        "expert_id": j + 2,
                        "rubric_id": rubric_id,
                        "revision": 1,
                        "is_current": True,
                        "status": "submitted",
                        "verdict": "accept"
                        if mean >= 3.7
                        else "revise"
                        if mean >= 1.8
                        else "reject",
                        "flags": [],
                        "comment": (
                            f"Expert {j + 1}: the caller's second message changes the reading."
                            if commented[t - 1, j]
                            else ""
                        ),
                        "confidence": 4,
                        "rater_kind": "human",
                        "created_at": when,
                        "submitted_at": when,
                        "score_vector": pack(keys, given),
                    }
                )
                rating_scores += [
                    {"rating_id": rid, "dimension": k, "value": v} for k, v in given.items()
                ]
        put(Assignment, assignments)
        put(Rating, ratings)
        put(RatingScore, rating_scores)
        if c.dialect.name == "postgresql":
            for table in (
                "users",
                "review_rounds",
                "tasks",
                "task_versions",
                "round_tasks",
                "assignments",
                "ratings",
                "rating_scores",
            ):
                c.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT MAX(id) FROM {table}))"
                    )
                )
    with Session(engine) as session:
        _settle_statuses(session)
        analyze(session, "tasks", "task_versions", "round_tasks", "assignments", "ratings")
        session.commit()
    engine.dispose()
    q1, q3 = np.percentile(scores, [25, 75], axis=1)  # tasks x items, over the panel
    wide = (q3 - q1 > 1).any(axis=1)
    return {
        "ratings": len(ratings),
        "scores": len(rating_scores),
        "tasks with an item's IQR above 1 (blind)": f"{wide.mean():.1%}",
    }


def revise_in_bulk(session, phase: int, seed: int, move: float) -> dict:
    """The panel's revisions of `phase` as the Consensus page lets them be made: per task each
    expert answers every item (kept or changed), 90% of their tasks (e1 all but the last LEFT);
    an answer more than 1 from the panel's median of the phase before moves to it with chance
    `move`, one 1 away with chance `move` / 4, each change with a reason. The rows and the
    ledger entries are those `revise` writes (entries chained at the commit, in batches)."""
    import numpy as np
    from itsmreview.ledger.service import append_entry, chain_at_commit
    from itsmreview.review.consensus import queries
    from itsmreview.review.consensus.service import answers_of_phase, refresh_spreads
    from itsmreview.review.models import DelphiAnswer
    from sqlalchemy import insert

    chain_at_commit(session)
    rng = np.random.default_rng(seed)
    before = answers_of_phase(session, 1, phase - 1).sort_values(
        ["task_version_id", "expert_id", "item"]
    )  # the draws in a fixed order, whatever order the database returns
    median = before.groupby(["task_version_id", "item"])["score"].median()
    before = before.join(median.rename("median"), on=["task_version_id", "item"])
    last_tasks = set(sorted(before["task_version_id"].unique())[-LEFT:])
    when = datetime.now(UTC)
    rows, answered, changed = [], 0, 0
    for (version, expert), own in before.groupby(["task_version_id", "expert_id"], sort=True):
        if (expert == 2 and version in last_tasks) or (expert != 2 and rng.random() >= 0.9):
            continue
        answered += 1
        moves = {}
        for r in own.itertuples():
            distance = abs(r.score - r.median)
            chance = move if distance > 1 else move / 4 if distance >= 1 else 0.0
            new = float(np.rint(r.median)) if rng.random() < chance else float(r.score)
            reason = REASONS[int(rng.integers(len(REASONS)))] if new != r.score else ""
            if reason:
                moves[r.item] = [float(r.score), new, reason]
            rows.append(
                {
                    "round_id": 1,
                    "task_version_id": int(version),
                    "expert_id": int(expert),
                    "phase": phase,
                    "item": r.item,
                    "score": new,
                    "changed": bool(reason),
                    "reason": reason,
                    "created_at": when,
                }
            )
        changed += len(moves)
        append_entry(
            session=session,
            artifact_type="delphi",
            artifact_id=ROUND,
            action="revise",
            source_kind="expert",
            actor_id=int(expert),
            payload={"task_version_id": int(version), "phase": phase, "changed": moves},
        )
    for start in range(0, len(rows), 20_000):
        session.execute(insert(DelphiAnswer.__table__), rows[start : start + 20_000])
    # the spreads each `revise` keeps current, for every task revised
    refresh_spreads(
        session,
        queries.delphi_of(session=session, round_id=1),
        sorted({r["task_version_id"] for r in rows}),
    )
    return {"answered": answered, "changed": changed, "rows": len(rows)}


def copy_database(url: str, name: str) -> str:
    """A copy of the database at `url` named `name` (SQLite: the backup API, safe with WAL;
    PostgreSQL: CREATE DATABASE ... TEMPLATE, which needs the source idle)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        target = Path(parsed.database).with_name(f"{name}.db")
        target.unlink(missing_ok=True)
        with sqlite3.connect(parsed.database) as source, sqlite3.connect(target) as copy:
            source.backup(copy)
        copy.close()
        return f"sqlite:///{target}"
    admin = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{parsed.database}"'))
    admin.dispose()
    return parsed.set(database=name).render_as_string(False)


def fresh_postgres(name: str) -> str:
    """An empty database `name` on the benchmark's PostgreSQL server."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(POSTGRES).set(database=name).render_as_string(False)


def drop_database(url: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(parsed.database + suffix).unlink(missing_ok=True)
        return
    admin = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)'))
    admin.dispose()


def build_states(url: str, tasks: int, prefix: str) -> dict:
    """Build the blind phase, then walk the round through its phases by the services, keeping
    a copy of each state (plain: an ordinary round; phase1: a Delphi round whose panel has
    rated; phase2: revising, e1 with LEFT tasks to go; closed: after phase 3). Returns the
    copies' URLs and what each step did."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import analyze, create_db_engine, session_scope
    from itsmreview.review.consensus.service import advance_phase, start_delphi

    out = {"build": build(url, tasks), "status mix": status_mix(url)}
    urls = {"plain": copy_database(url, f"{prefix}_plain")}
    engine = create_db_engine(url)

    def step(work):
        with session_scope(engine) as session:
            lead = user_by_username(session=session, username="lead")
            return work(session, lead)

    step(lambda s, lead: start_delphi(session=s, actor=lead, round_name=ROUND))
    engine.dispose()
    urls["phase1"] = copy_database(url, f"{prefix}_phase1")
    out["end phase 1"] = step(
        lambda s, lead: advance_phase(session=s, actor=lead, round_name=ROUND)
    )
    out["revise phase 2"] = step(lambda s, _: revise_in_bulk(s, 2, seed=2, move=0.6))
    step(lambda s, _: analyze(s, "delphi_answers", "ledger_entries"))
    engine.dispose()
    urls["phase2"] = copy_database(url, f"{prefix}_phase2")
    out["end phase 2"] = step(
        lambda s, lead: advance_phase(session=s, actor=lead, round_name=ROUND)
    )
    out["revise phase 3"] = step(lambda s, _: revise_in_bulk(s, 3, seed=3, move=0.4))
    engine.dispose()
    urls["phase3"] = copy_database(url, f"{prefix}_phase3")
    out["end phase 3"] = step(
        lambda s, lead: advance_phase(session=s, actor=lead, round_name=ROUND)
    )
    step(lambda s, _: analyze(s, "delphi_answers", "ledger_entries"))
    engine.dispose()
    urls["closed"] = copy_database(url, f"{prefix}_closed")
    return {"urls": urls, "steps": out}


# ---- the groups, each in a fresh process (`--group NAME URL...`) ----------------------------


def _median(values: list[float]) -> dict:
    warm = values[1:] or values
    return {
        "median_ms": statistics.median(warm) * 1000,
        "min_ms": min(warm) * 1000,
        "max_ms": max(warm) * 1000,
        "first_ms": values[0] * 1000,
        "n": len(warm),
    }


def _timed_on_copies(source: str, work, repeats: int, tag: str) -> list[float]:
    """`work(engine)` on a fresh copy of `source` per run; its seconds as it reports them."""
    from itsmreview.db import create_db_engine

    times = []
    for n in range(repeats + 1):
        url = copy_database(source, f"{tag}_{n}")
        engine = create_db_engine(url)
        try:
            times.append(work(engine))
        finally:
            engine.dispose()
            drop_database(url)
    return times


def _as_lead(session):
    from itsmreview.accounts.queries import user_by_username

    return user_by_username(session=session, username="lead")


def group_phase(phase1: str, phase2: str, phase3: str, repeats: int) -> dict:
    from itsmreview.db import session_scope
    from itsmreview.review.consensus.service import advance_phase
    from sqlalchemy import text

    def advance(engine) -> float:
        with session_scope(engine) as session:
            lead = _as_lead(session)
            session.commit()
            start = time.perf_counter()
            with session_scope(engine) as session:
                advance_phase(session=session, actor=lead, round_name=ROUND)
            return time.perf_counter() - start

    def floor(engine) -> float:
        # the least a phase change does: lock the round's Delphi row, count the task items
        # beyond the limit, move the phase, commit (bare SQL, no ledger entry)
        start = time.perf_counter()
        with session_scope(engine) as session:
            lock = "" if engine.dialect.name == "sqlite" else " FOR UPDATE"
            session.execute(text(f"SELECT phase FROM delphi_rounds WHERE round_id = 1{lock}"))
            session.execute(
                text("SELECT count(*) FROM delphi_spreads WHERE round_id = 1 AND iqr > 1")
            ).scalar()
            session.execute(text("UPDATE delphi_rounds SET phase = phase + 1 WHERE round_id = 1"))
        return time.perf_counter() - start

    return {
        "baseline: lock, count the spreads beyond the limit, move (bare SQL)": _median(
            _timed_on_copies(phase1, floor, repeats, "delphi_floor")
        ),
        "advance_phase, end of phase 1 (blind -> revising)": _median(
            _timed_on_copies(phase1, advance, repeats, "delphi_adv1")
        ),
        "advance_phase, end of phase 2 (-> revising)": _median(
            _timed_on_copies(phase2, advance, repeats, "delphi_adv2")
        ),
        "advance_phase, end of phase 3 (closes: decides the converged tasks)": _median(
            _timed_on_copies(phase3, advance, repeats, "delphi_adv3")
        ),
        "peak_mb": peak_mb(),
    }


def group_page(url: str, repeats: int, label: str) -> dict:
    """The Consensus page as e1 (AppTest, server time of a rerun), and the service calls it
    makes, on the database the process was started on."""
    os.environ["ITSMREVIEW_DATABASE_URL"] = url
    import itsmreview
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.consensus.service import reveal, rounds_to_revise
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(
        str(Path(itsmreview.__file__).parent / "streamlit_app.py"), default_timeout=600
    )
    at.run()
    at.text_input(key="login_username").input("e1")
    at.text_input(key="login_password").input(PASSWORD)
    at.button(key="FormSubmitter:login-Log in").click().run()
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        at.switch_page("views/consensus.py").run()
        times.append(time.perf_counter() - start)
        if at.exception:
            raise SystemExit(f"the Consensus page failed: {at.exception}")
    if label.startswith("baseline"):
        return {f"baseline: Consensus page as e1, {label[10:]}": _median(times)}
    out = {f"Consensus page as e1 ({label})": _median(times)}
    if at.dataframe:
        out["(shown)"] = at.get("progress")[0].proto.text
    with session_scope() as session:
        expert = user_by_username(session=session, username="e1")
    for name, call in (
        ("rounds_to_revise", lambda s: rounds_to_revise(session=s, actor=expert)),
        ("reveal", lambda s: reveal(session=s, actor=expert, round_name=ROUND)),
    ):
        calls = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            with session_scope() as session:
                call(session)
            calls.append(time.perf_counter() - start)
        out[f"  service: {name} ({label})"] = _median(calls)
    return out


def group_revise(phase2: str, repeats: int) -> dict:
    """e1 answers `REVISES` of their LEFT remaining tasks by `revise` (every other one changes
    an item, with a reason), each in its own transaction; then the same writes bare."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import create_db_engine, session_scope
    from itsmreview.review.consensus import queries
    from itsmreview.review.consensus.service import revise
    from itsmreview.review.models import DelphiAnswer, Rating, RatingScore
    from sqlalchemy import insert, select

    url = copy_database(phase2, "delphi_revise")
    engine = create_db_engine(url)
    try:
        with session_scope(engine) as session:
            expert = user_by_username(session=session, username="e1")
            mine = queries.blind_scores(session=session, round_id=1, expert_id=expert.id)
        tasks = sorted(mine["task_version_id"].unique())[-LEFT:]
        own = {
            v: dict(zip(r["item"], r["score"], strict=True))
            for v, r in mine.groupby("task_version_id")
        }
        times, bare = [], []
        for n, version in enumerate(tasks[: repeats + 1]):
            scores = dict(own[version])
            reasons = {}
            if n % 2:
                item = sorted(scores)[0]
                scores[item] = 5.0 if scores[item] < 5 else 4.0
                reasons[item] = REASONS[0]
            start = time.perf_counter()
            with session_scope(engine) as session:
                revise(
                    session=session,
                    actor=expert,
                    round_name=ROUND,
                    task_version_id=int(version),
                    scores=scores,
                    reasons=reasons,
                )
            times.append(time.perf_counter() - start)
        for version in tasks[repeats + 1 : 2 * (repeats + 1)]:
            start = time.perf_counter()
            with session_scope(engine) as session:
                previous = session.execute(  # phase 1's answers: the expert's rating
                    select(RatingScore.dimension, RatingScore.value)
                    .join(Rating, Rating.id == RatingScore.rating_id)
                    .where(
                        Rating.round_id == 1,
                        Rating.task_version_id == int(version),
                        Rating.expert_id == expert.id,
                        Rating.is_current,
                    )
                ).all()
                when = datetime.now(UTC)
                rows = [
                    {
                        "round_id": 1,
                        "task_version_id": int(version),
                        "expert_id": expert.id,
                        "phase": 2,
                        "item": item,
                        "score": float(score),
                        "changed": False,
                        "reason": "",
                        "created_at": when,
                    }
                    for item, score in previous
                ]
                session.execute(insert(DelphiAnswer.__table__), rows)
            bare.append(time.perf_counter() - start)
    finally:
        engine.dispose()
        drop_database(url)
    return {
        "baseline: one revision's data, bare (read the expert's answers, insert 10)": _median(bare),
        "revise: one task's answers of phase 2": _median(times),
    }


def group_report(plain: str, closed: str, repeats: int) -> dict:
    from itsmreview.db import create_db_engine, session_scope
    from itsmreview.review.consensus.service import delphi_report
    from itsmreview.review.gate.item_agreement import round_agreement

    out = {}
    for label, url, call in (
        (
            "baseline: round_agreement (1,000 bootstrap), same ratings, ordinary round",
            plain,
            lambda s: round_agreement(session=s, actor=_as_lead(s), round_name=ROUND),
        ),
        (
            "delphi_report, closed round of 3 phases",
            closed,
            lambda s: delphi_report(session=s, actor=_as_lead(s), round_name=ROUND),
        ),
    ):
        engine = create_db_engine(url)
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            with session_scope(engine) as session:
                call(session)
            times.append(time.perf_counter() - start)
        engine.dispose()
        out[label] = _median(times)
    binary = Path(sys.executable).with_name("itsmreview")
    for label, url in (
        ("baseline: `itsmreview agreement --round D`, ordinary round", plain),
        ("`itsmreview agreement --round D`, Delphi round (command)", closed),
    ):
        times = []
        for _ in range(min(repeats, 3) + 1):
            start = time.perf_counter()
            subprocess.run(
                [str(binary), "agreement", "--round", ROUND],
                check=True,
                capture_output=True,
                env={**os.environ, "ITSMREVIEW_DATABASE_URL": url},
            )
            times.append(time.perf_counter() - start)
        out[label] = _median(times)
    return out


GROUPS = {
    "phase": lambda urls, r: group_phase(urls["phase1"], urls["phase2"], urls["phase3"], r),
    "reveal": None,  # a process per database: the page reads the one of its settings
    "revise": lambda urls, r: group_revise(urls["phase2"], r),
    "report": lambda urls, r: group_report(urls["plain"], urls["closed"], r),
}
TARGETS = {"advance_phase": 200, "Consensus page as e1 (phase": 200, "delphi_report": 2000}


def run_group(name: str, urls: dict, repeats: int, folder: Path) -> dict:
    env = {**os.environ, "ITSMREVIEW_DATA_DIR": str(folder), "PYTHONSAFEPATH": "1"}
    if name == "reveal":  # the page reads the database of its process's settings
        out = {}
        for state, label in (("closed", "baseline: nothing to revise"), ("phase2", "phase 2")):
            out.update(_child(["--page", urls[state], label, str(repeats)], env))
        return out
    return _child(["--group", name, json.dumps(urls), str(repeats)], env)


def _child(args: list[str], env: dict) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def print_table(backend: str, results: dict) -> None:
    print(f"\n== {backend}: median of warm runs (min-max), first run of the process apart")
    print(f"{'contender':<78} {'median ms':>10} {'min-max':>15} {'first':>8} {'ratio':>7}")
    base = None
    for name, r in results.items():
        if not isinstance(r, dict):
            print(f"  {name}: {r}")
            continue
        if name.startswith("baseline"):
            base = r["median_ms"]
        ratio = f"{r['median_ms'] / base:6.2f}x" if base else ""
        target = next((t for key, t in TARGETS.items() if name.startswith(key)), None)
        verdict = (
            ""
            if target is None
            else f"  target {target} ms: " + ("met" if r["median_ms"] <= target else "MISSED")
        )
        print(
            f"{name[:78]:<78} {r['median_ms']:>10.1f} "
            f"{r['min_ms']:>7.1f}-{r['max_ms']:<7.1f} {r['first_ms']:>8.1f} {ratio:>7}{verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5, help="warm runs a contender")
    parser.add_argument("--backend", default="sqlite,postgresql")
    parser.add_argument("--groups", default=",".join(GROUPS))
    parser.add_argument("--group", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--page", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.group:
        name, urls, repeats = args.group
        print(json.dumps(GROUPS[name](json.loads(urls), int(repeats))))
        return
    if args.page:
        url, label, repeats = args.page
        print(json.dumps(group_page(url, int(repeats), label)))
        return
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores shared)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for backend in args.backend.split(","):
            if backend == "sqlite":
                url = f"sqlite:///{folder / 'delphi.db'}"
            else:
                url = fresh_postgres("delphi_work")
            started = time.perf_counter()
            built = build_states(url, args.tasks, f"delphi_{backend}")
            print(f"\n{backend}: built in {time.perf_counter() - started:.0f} s")
            for step, found in built["steps"].items():
                print(f"  {step}: {found}")
            results = {}
            for group in args.groups.split(","):
                results.update(run_group(group, built["urls"], args.repeats, folder))
            print_table(backend, results)
            for copy in (url, *built["urls"].values()):
                drop_database(copy)
            print(f"load average after {backend}: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
