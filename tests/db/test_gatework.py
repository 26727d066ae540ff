"""Submits queue their gate work; applying it, in any batch, by any applier, leaves the gate
exactly where a recomputation from scratch puts it (the slow path), on both databases."""

import json
import random

import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.models import TaskVersion
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.ledger.evidence.service import verify_ledger
from itsmreview.ledger.models import LedgerEntry
from itsmreview.review.gate import cache as gatecache
from itsmreview.review.gate import work as gatework
from itsmreview.review.gate.round_data import load_round
from itsmreview.review.gate.service import gate_decisions, queue_built_at
from itsmreview.review.models import Assignment, RoundCoincidence
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.repair import queries as repair_queries
from itsmreview.review.rounds.service import assign_round, create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from itsmreview.settings import get_settings
from sqlmodel import Session, select
from typer.testing import CliRunner

RUBRIC = load_rubric()


@pytest.fixture
def mode(monkeypatch):
    """Set the gate's apply mode for the test."""

    def set_mode(name: str) -> None:
        monkeypatch.setenv("ITSMREVIEW_GATE_APPLY", name)
        get_settings.cache_clear()

    yield set_mode
    get_settings.cache_clear()


def open_round(session, n_tasks: int, k: int, n_experts: int = 4):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    experts = [
        create_user(session=session, username=f"e{i}", role="expert", password="expert-pass")[0]
        for i in range(n_experts)
    ]
    bundle = [
        {
            "id": f"t{i}",
            "title": f"T{i}",
            "track": "single-agent",
            "instruction": "x",
            "persona": "L1",
        }
        for i in range(n_tasks)
    ]
    import_tasks(parse_bundle(bundle, "t"), session=session)
    versions = [v.id for v in session.exec(select(TaskVersion).order_by(TaskVersion.id)).all()]
    review_round = create_round(
        session=session,
        actor=lead,
        name="R",
        rubric=ensure_rubric(RUBRIC, session=session),
        task_version_ids=versions,
        k=k,
    )
    assign_round(session=session, actor=lead, review_round=review_round, experts=experts)
    session.commit()
    assignments = session.exec(select(Assignment).order_by(Assignment.id)).all()
    return review_round, {e.id: e for e in experts}, versions, assignments


def rate(session, expert, assignment_id, value, verdict="accept"):
    submit_rating(
        session=session,
        actor=expert,
        assignment_id=assignment_id,
        scores={d.key: value for d in RUBRIC.dimensions},
        verdict=verdict,
    )
    session.commit()


def stored_pairs(session, round_id) -> dict:
    session.expire_all()
    rows = session.exec(select(RoundCoincidence).where(RoundCoincidence.round_id == round_id))
    return {r.dimension: r.pairs for r in rows}


def assert_gate_as_recomputed(session, review_round) -> None:
    """The stored counts and every stored status equal a recomputation from every rating."""
    session.expire_all()
    data = load_round(session=session, round_name=review_round.id)
    assert stored_pairs(session, review_round.id) == gatecache.recomputed_pairs(
        session=session, review_round=data.review_round, rubric=data.rubric
    )
    tasks, decisions = gate_decisions(session=session, data=data)
    stored = dict(zip(tasks["task_version_id"], tasks["status"], strict=True))
    rated = set(data.ratings["task_version_id"])
    assert {v: s for v, s in stored.items() if v in rated} == {
        v: d.status for v, d in decisions.items() if v in rated
    }
    # a task nobody rated yet is decided by neither path one by one: in review until rated
    assert {s for v, s in stored.items() if v not in rated} <= {"in_review", "pending"}
    # the adjudication queue, started by the first decision, holds exactly the waiting tasks
    assert queue_built_at(session=session, round_id=review_round.id) is not None
    assert repair_queries.adjudication_queue_rows(session=session, round_id=review_round.id) == {
        v: "; ".join(d.reasons) for v, d in decisions.items() if d.status == "adjudication"
    }


def statuses(session) -> dict[int, str]:
    session.expire_all()
    return {v.id: v.status for v in session.exec(select(TaskVersion)).all()}


@pytest.mark.parametrize("apply_mode", ["inline", "queue"])
def test_queued_or_inline_the_gate_ends_where_a_recomputation_puts_it(
    session, engine, mode, apply_mode
):
    mode(apply_mode)
    review_round, experts, _, assignments = open_round(session, n_tasks=8, k=3)
    chance = random.Random(7)
    before = stored_pairs(session, review_round.id)
    for a in assignments:
        base = 2 + a.task_version_id % 4
        value = min(5, max(1, base + chance.choice((-1, 0, 0, 1))))
        rate(session, experts[a.expert_id], a.id, value, "accept" if value >= 4 else "revise")
    waiting, _ = gatework.pending(session=session)
    if apply_mode == "queue":
        assert waiting == len(assignments)
        assert stored_pairs(session, review_round.id) == before  # the submits left them alone
        assert set(statuses(session).values()) == {"in_review"}
        assert gatework.apply_pending(engine=engine) == len(assignments)
    assert gatework.pending(session=session) == (0, None)
    assert len(set(statuses(session).values())) > 1  # the gate decided, not all alike
    assert_gate_as_recomputed(session, review_round)


def test_revisions_applied_one_rating_a_batch_stay_exact_after_every_batch(session, engine, mode):
    mode("queue")
    review_round, experts, versions, assignments = open_round(session, n_tasks=3, k=2)
    first, second = (a for a in assignments if a.task_version_id == versions[0])
    rate(session, experts[first.expert_id], first.id, 5)
    rate(session, experts[first.expert_id], first.id, 2)  # a revision, queued after its original
    rate(session, experts[second.expert_id], second.id, 3)
    other = next(a for a in assignments if a.task_version_id == versions[1])
    rate(session, experts[other.expert_id], other.id, 4)
    rate(session, experts[first.expert_id], first.id, 3)  # replaces a revision still queued
    applied = []
    while count := gatework.apply_batch(engine=engine, round_id=review_round.id, limit=1):
        applied.append(count)
        # what is applied so far, with the rest still queued: exactly the counts of the ratings
        # as they were before the queued ones came
        assert stored_pairs(session, review_round.id) == gatecache.recomputed_pairs(
            session=session, review_round=review_round, rubric=RUBRIC
        )
    assert applied == [1] * 5
    assert_gate_as_recomputed(session, review_round)
    # the first task's two current ratings agree on 3: one pairable unit of (3, 3)
    dimension = RUBRIC.dimensions[0].key
    assert stored_pairs(session, review_round.id)[dimension] == {"2": {"3.0|3.0": 2}}


def test_a_batch_that_takes_alpha_across_the_gate_redecides_every_task(session, engine, mode):
    mode("inline")
    review_round, experts, versions, assignments = open_round(session, n_tasks=4, k=2)
    by_task = {v: [a for a in assignments if a.task_version_id == v] for v in versions}
    for version, values in zip(versions[:2], ((5, 4), (4, 5)), strict=True):
        for assignment, value in zip(by_task[version], values, strict=True):
            rate(session, experts[assignment.expert_id], assignment.id, value)
    held_back = statuses(session)[versions[0]]
    assert held_back != "approved"  # two tasks that disagree: alpha is below the gate
    mode("queue")
    for version, value in zip(versions[2:], (1, 1), strict=True):  # alpha 0.56 -> 0.81
        for assignment in by_task[version]:
            rate(session, experts[assignment.expert_id], assignment.id, value, "revise")
    assert statuses(session)[versions[0]] == held_back  # queued: nothing moved yet
    assert gatework.apply_pending(engine=engine) == 4
    # the batch rated two other tasks, and the first task, not in it, is approved now
    assert statuses(session)[versions[0]] == "approved"
    assert_gate_as_recomputed(session, review_round)


@pytest.mark.parametrize("apply_mode", ["inline", "queue"])
def test_the_adjudication_queue_follows_every_batch(session, engine, mode, apply_mode):
    """Tasks whose experts disagree enter the adjudication queue when their ratings are
    applied and leave it when a revision settles them: after every batch it holds the tasks
    stored as waiting, and at the end what a recomputation from scratch sends to a lead."""
    mode(apply_mode)
    review_round, experts, versions, assignments = open_round(session, n_tasks=4, k=2)
    by_task = {v: [a for a in assignments if a.task_version_id == v] for v in versions}
    plan = [(versions[0], 1), (versions[0], 5), (versions[1], 4), (versions[1], 4)]
    plan += [(versions[2], 2), (versions[2], 5), (versions[3], 3), (versions[3], 3)]
    for n, (version, value) in enumerate(plan):
        assignment = by_task[version][n % 2]
        verdict = "accept" if value >= 4 else "reject" if value == 1 else "revise"
        rate(session, experts[assignment.expert_id], assignment.id, value, verdict)
    first = by_task[versions[0]][0]
    rate(session, experts[first.expert_id], first.id, 4, "accept")  # settles the first task
    while gatework.apply_batch(engine=engine, round_id=review_round.id, limit=1):
        # part applied: the queue holds the tasks whose stored status waits for a lead
        waiting = repair_queries.adjudication_queue_rows(session=session, round_id=review_round.id)
        assert set(waiting) == {v for v, s in statuses(session).items() if s == "adjudication"}
    assert_gate_as_recomputed(session, review_round)
    waiting = repair_queries.adjudication_queue_rows(session=session, round_id=review_round.id)
    assert set(waiting) == {versions[2]}  # 2 and 5: a spread of 3
    assert "span 3 points" in waiting[versions[2]]


def test_counts_rebuilt_while_ratings_wait_leave_them_for_their_turn(session, engine, mode):
    mode("queue")
    review_round, experts, _, assignments = open_round(session, n_tasks=4, k=2)
    for a in assignments[:4]:
        rate(session, experts[a.expert_id], a.id, 3 + a.id % 3)
    gatework.apply_pending(engine=engine)
    for a in assignments[4:]:
        rate(session, experts[a.expert_id], a.id, 2 + a.id % 2)
    rate(session, experts[assignments[0].expert_id], assignments[0].id, 1)
    for row in session.exec(select(RoundCoincidence)).all():  # lost: built again when needed
        session.delete(row)
    session.commit()
    assert gatework.apply_pending(engine=engine) == len(assignments) - 4 + 1
    assert_gate_as_recomputed(session, review_round)


def test_a_queued_ratings_ledger_entry_is_chained_when_it_is_applied(session, engine, mode):
    mode("queue")
    review_round, experts, _, assignments = open_round(session, n_tasks=2, k=2)
    for a in assignments:
        rate(session, experts[a.expert_id], a.id, 4)
    rate(session, experts[assignments[0].expert_id], assignments[0].id, 5)  # a revision
    report = verify_ledger(session=session)
    # waiting, not missing: their entries travel with them in the queue
    assert report.ok and report.queued == len(assignments) + 1
    assert not rating_entries(session)
    gatework.apply_pending(engine=engine)
    report = verify_ledger(session=session)
    assert report.ok and report.queued == 0
    actions = rating_entries(session)
    assert [a for _, a in actions] == ["submit"] * len(assignments) + ["revise"]
    assert [r for r, _ in actions] == sorted(r for r, _ in actions)  # in the order submitted
    session.expire_all()
    entries = session.exec(select(LedgerEntry).order_by(LedgerEntry.seq)).all()
    first_status = next(e.seq for e in entries if e.action.startswith("status:"))
    first_rating = next(e.seq for e in entries if e.artifact_type == "rating")
    assert first_rating < first_status  # a batch chains its ratings before its decisions


def rating_entries(session) -> list[tuple[int, str]]:
    session.expire_all()
    return [
        (int(e.artifact_id), e.action)
        for e in session.exec(
            select(LedgerEntry)
            .where(LedgerEntry.artifact_type == "rating")
            .order_by(LedgerEntry.seq)
        ).all()
    ]


def test_the_background_worker_applies_a_submit_once_it_commits(database_url, engine, mode):
    mode("background")
    with Session(engine, expire_on_commit=False) as session:
        review_round, experts, _, assignments = open_round(session, n_tasks=2, k=2)
        for a in assignments:
            rate(session, experts[a.expert_id], a.id, 4)
        try:
            assert gatework.worker(database_url).wait_idle(30)
        finally:
            gatework.stop_worker(database_url)
        assert gatework.pending(session=session) == (0, None)
        assert set(statuses(session).values()) != {"in_review"}
        assert_gate_as_recomputed(session, review_round)


def test_a_background_worker_applies_what_was_queued_before_it_started(
    database_url, engine, mode, monkeypatch
):
    mode("queue")  # a server that only queued, then stopped
    with Session(engine, expire_on_commit=False) as session:
        review_round, experts, _, assignments = open_round(session, n_tasks=2, k=2)
        for a in assignments:
            rate(session, experts[a.expert_id], a.id, 4)
        monkeypatch.setenv("ITSMREVIEW_DATABASE_URL", database_url)
        monkeypatch.setenv("ITSMREVIEW_GATE_POLL_S", "0.1")
        mode("background")  # the next server starts with no submit of its own
        started = gatework.start_worker_if_background()
        try:
            assert started is not None and started.wait_idle(30)
        finally:
            gatework.stop_worker(database_url)
        assert gatework.pending(session=session) == (0, None)
        assert_gate_as_recomputed(session, review_round)
    mode("inline")
    assert gatework.start_worker_if_background() is None  # no thread unless asked for


# SQLite has one writer at a time: a second applier waits for the first instead
@pytest.mark.parametrize("backend", [pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_an_applier_holding_the_round_makes_another_look_later(session, engine, mode):
    mode("queue")
    review_round, experts, _, assignments = open_round(session, n_tasks=2, k=2)
    rate(session, experts[assignments[0].expert_id], assignments[0].id, 4)
    with Session(engine) as holder:
        gatework.pending_queries.lock_gate(session=holder, round_id=review_round.id)
        assert gatework.apply_batch(engine=engine, round_id=review_round.id) is None
        assert gatework.pending(session=session)[0] == 1
    assert gatework.apply_batch(engine=engine, round_id=review_round.id) == 1


def test_apply_queued_command(configured, mode):
    mode("queue")
    with session_scope() as session:
        review_round, experts, _, assignments = open_round(session, n_tasks=2, k=2)
        for a in assignments:
            rate(session, experts[a.expert_id], a.id, 4)
    result = CliRunner().invoke(app, ["round", "apply-queued", "R", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"applied": len(assignments), "queued": 0}
    result = CliRunner().invoke(app, ["round", "apply-queued"])
    assert result.exit_code == 0, result.output
    assert "applied 0 queued rating(s) to the gate; 0 still queued" in result.output
    with session_scope() as session:
        assert_gate_as_recomputed(session, review_round)


def test_an_export_applies_what_is_queued_before_choosing_approved_tasks(
    configured, mode, tmp_path
):
    mode("queue")
    with session_scope() as session:
        review_round, experts, versions, assignments = open_round(session, n_tasks=4, k=2)
        for a in assignments:  # agreement is perfect; two tasks reach the gate's median
            value = 5 if versions.index(a.task_version_id) % 2 == 0 else 1
            rate(session, experts[a.expert_id], a.id, value, "accept" if value == 5 else "revise")
        assert set(statuses(session).values()) == {"in_review"}  # nothing applied yet
    result = CliRunner().invoke(app, ["export", "create", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tasks"] == 2
    with session_scope() as session:
        assert gatework.pending(session=session) == (0, None)
