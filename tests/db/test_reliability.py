"""Agreement and the approval gate on the demo round, on both databases."""

import json

import krippendorff
import numpy as np
import pytest
from itsmreview.accounts.models import User
from itsmreview.accounts.queries import user_by_username
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.demo.loader import load_demo
from itsmreview.errors import InvalidInput, PermissionDenied
from itsmreview.ledger.models import LedgerEntry
from itsmreview.review.gate.item_agreement import round_agreement
from itsmreview.review.gate.round_data import find_round
from itsmreview.review.gate.service import recompute_statuses
from itsmreview.review.models import Rating, RatingScore
from itsmreview.review.repair.adjudication import adjudicate, disagreements
from sqlmodel import select
from typer.testing import CliRunner


@pytest.fixture
def demo(session, tmp_path):
    load_demo(session=session, data_dir=tmp_path, cases=300)
    session.commit()
    return {
        name: user_by_username(session=session, username=name)
        for name in ("lead", "expert1", "admin")
    }


def _persona_fit_matrix(session, round_id: int):
    """Independent of the code under test: the raters x tasks matrix of the round's current
    submitted persona_fit scores, straight from the rating tables, and the rater ids (rows)."""
    rows = session.exec(
        select(Rating.expert_id, Rating.task_version_id, RatingScore.value)
        .join(RatingScore, RatingScore.rating_id == Rating.id)
        .where(
            RatingScore.dimension == "persona_fit",
            Rating.is_current,
            Rating.status == "submitted",
            Rating.round_id == round_id,
        )
    ).all()
    raters = sorted({r[0] for r in rows})
    units = sorted({r[1] for r in rows})
    matrix = np.full((len(raters), len(units)), np.nan)
    for rater, unit, value in rows:
        matrix[raters.index(rater), units.index(unit)] = value
    return matrix, raters


def test_round_alpha_equals_the_package_on_the_stored_ratings(session, demo):
    review_round, items = round_agreement(session=session, actor=demo["lead"], bootstrap=200)
    by_item = {i.item: i for i in items}
    matrix, _ = _persona_fit_matrix(session, review_round.id)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
    result = by_item["persona_fit"].alpha
    assert result.value == pytest.approx(expected)
    assert result.ci_low < result.value < result.ci_high
    assert by_item["flag:duplicate"].alpha.value is None
    assert set(by_item["persona_fit"].leave_one_out) <= {f"expert{i}" for i in range(1, 6)}


def test_gate_statuses_and_adjudication(session, demo):
    decisions = recompute_statuses(session=session)
    statuses = {t.status for t in session.exec(select(Task)).all()}
    assert {"pending", "adjudication"} <= statuses
    disputed = disagreements(session=session, actor=demo["lead"])
    conflicts = disputed[disputed["reasons"].str.contains("verdicts conflict")]
    assert len(conflicts) == 1
    assert disputed["reasons"].str.contains("blocking flag").any()
    version_id = int(conflicts["task_version_id"].iloc[0])
    with pytest.raises(InvalidInput, match="needs a reason"):
        adjudicate(
            session=session,
            actor=demo["lead"],
            task_version_id=version_id,
            decision="accept",
            reason=" ",
        )
    with pytest.raises(PermissionDenied):
        adjudicate(
            session=session,
            actor=demo["expert1"],
            task_version_id=version_id,
            decision="accept",
            reason="I say so",
        )
    result = adjudicate(
        session=session,
        actor=demo["lead"],
        task_version_id=version_id,
        decision="accept",
        reason="Ground truth checked against the policy.",
    )
    session.commit()
    assert result.status == "approved"
    task = session.exec(select(Task).join(TaskVersion).where(TaskVersion.id == version_id)).one()
    assert task.status == "approved"
    entry = session.exec(
        select(LedgerEntry).where(
            LedgerEntry.action == "status:approved",
            LedgerEntry.artifact_id
            == f"{task.external_id}@v{session.get(TaskVersion, version_id).version}",
        )
    ).all()
    assert entry and entry[-1].payload["from"] == "adjudication"
    assert decisions[version_id].status == "adjudication"
    _, _, (tasks, fresh) = _slow_statuses(session)  # only that task changed, as a full pass says
    stored = dict(zip(tasks["task_version_id"].astype(int), tasks["status"], strict=True))
    assert stored == {v: d.status for v, d in fresh.items()}


def test_an_expert_cannot_read_round_agreement(session, demo):
    with pytest.raises(PermissionDenied):
        round_agreement(session=session, actor=demo["expert1"])


def test_agreement_and_alpha_cli(configured, tmp_path):
    with session_scope() as session:
        load_demo(session=session, data_dir=tmp_path, cases=300)
    result = CliRunner().invoke(app, ["agreement", "--json", "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["round"] == "Demo round 1"
    first = data["items"][0]
    for key in ("alpha", "ci_low", "ci_high", "units", "pairable_values"):
        assert key in first
    csv = tmp_path / "r.csv"
    csv.write_text("rater,a,b,c,d\nx,1,2,3,3\ny,1,2,3,4\nz,,2,3,4\n")
    result = CliRunner().invoke(
        app, ["alpha", str(csv), "--level", "interval", "--bootstrap", "100", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    expected = krippendorff.alpha(
        reliability_data=[[1, 2, 3, 3], [1, 2, 3, 4], [np.nan, 2, 3, 4]],
        level_of_measurement="interval",
    )
    assert out["alpha"] == pytest.approx(expected) and out["ci_low"] <= out["ci_high"]
    bad = CliRunner().invoke(app, ["alpha", str(csv), "--level", "fuzzy"])
    assert bad.exit_code == 1 and "not one of nominal" in bad.output


def test_drafts_never_count_and_submit_replaces_them(session, demo):
    from itsmreview.review.models import Assignment, AssignmentStatus, Rating
    from itsmreview.review.ratings.service import save_draft, submit_rating

    expert = demo["expert1"]
    open_one = session.exec(
        select(Assignment).where(
            Assignment.expert_id == expert.id, Assignment.status == AssignmentStatus.reserved
        )
    ).first()
    _, before = round_agreement(session=session, actor=demo["lead"], bootstrap=0)
    save_draft(
        session=session,
        actor=expert,
        assignment_id=open_one.id,
        scores={"persona_fit": 1},
        verdict="reject",
    )
    _, during = round_agreement(session=session, actor=demo["lead"], bootstrap=0)
    assert [i.alpha.value for i in during] == [i.alpha.value for i in before]
    with pytest.raises(PermissionDenied):
        save_draft(session=session, actor=demo["lead"], assignment_id=open_one.id, scores={})
    scores = {
        d: 4
        for d in (
            "scenario_realism",
            "task_completeness",
            "spoiler_free",
            "persona_fit",
            "instruction_clarity",
            "ground_truth_correctness",
            "verifier_alignment",
            "log_fidelity",
        )
    }
    submit_rating(
        session=session, actor=expert, assignment_id=open_one.id, scores=scores, verdict="accept"
    )
    ratings = session.exec(select(Rating).where(Rating.assignment_id == open_one.id)).all()
    assert [(r.status, r.revision) for r in ratings] == [("submitted", 1)]


def test_alpha_over_time_ends_at_the_round_alpha(session, demo):
    from datetime import timedelta

    from itsmreview.review.gate.item_agreement import alpha_over_time
    from itsmreview.review.models import Rating

    review_round, _ = round_agreement(session=session, actor=demo["lead"], bootstrap=0)
    ratings = session.exec(
        select(Rating)
        .where(Rating.status == "submitted", Rating.round_id == review_round.id)
        .order_by(Rating.id)
    ).all()
    for rating in ratings[: len(ratings) // 2]:
        rating.submitted_at = rating.submitted_at - timedelta(days=2)
    session.commit()
    series = alpha_over_time(session=session, actor=demo["lead"], item="persona_fit")
    assert list(series["ratings"]) == [len(ratings) // 2, len(ratings)]
    _, items = round_agreement(session=session, actor=demo["lead"], bootstrap=0)
    final = next(i for i in items if i.item == "persona_fit").alpha.value
    assert series["alpha"].iloc[-1] == pytest.approx(final)
    with pytest.raises(InvalidInput, match="is not an item"):
        alpha_over_time(session=session, actor=demo["lead"], item="charisma")


def test_model_raters_are_reported_apart_and_never_gate(session, demo):
    from itsmreview.accounts.service import create_user
    from itsmreview.review.models import Assignment, Rating, RatingScore

    review_round, before = round_agreement(session=session, actor=demo["lead"], bootstrap=0)
    statuses = {t.external_id: t.status for t in session.exec(select(Task)).all()}
    model, _ = create_user(
        session=session, username="judge-model", role="expert", password="model-pass-1"
    )
    rated = session.exec(
        select(Rating).where(
            Rating.status == "submitted",
            Rating.rater_kind == "human",
            Rating.round_id == review_round.id,
        )
    ).all()
    versions = sorted({r.task_version_id for r in rated})
    round_id = review_round.id
    for index, version in enumerate(versions):
        assignment = Assignment(
            round_id=round_id, task_version_id=version, expert_id=model.id, status="model"
        )
        session.add(assignment)
        session.flush()
        rating = Rating(
            assignment_id=assignment.id,
            round_id=round_id,
            task_version_id=version,
            expert_id=model.id,
            rubric_id=rated[0].rubric_id,
            status="submitted",
            verdict="reject",
            rater_kind="model",
        )
        session.add(rating)
        session.flush()
        session.add(
            RatingScore(rating_id=rating.id, dimension="persona_fit", value=float(1 + index % 5))
        )
    session.commit()
    recompute_statuses(session=session)
    assert {t.external_id: t.status for t in session.exec(select(Task)).all()} == statuses
    _, after = round_agreement(session=session, actor=demo["lead"], bootstrap=0)
    fit_before = next(i for i in before if i.item == "persona_fit")
    fit = next(i for i in after if i.item == "persona_fit")
    assert fit.alpha.value == fit_before.alpha.value  # humans only
    matrix, raters = _persona_fit_matrix(session, round_id)
    both = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
    assert fit.models["humans_and_models"]["alpha"] == pytest.approx(both)
    assert fit.models["humans"]["alpha"] == pytest.approx(fit.alpha.value)
    humans = np.delete(matrix, raters.index(model.id), axis=0)
    with np.errstate(all="ignore"):
        consensus = np.nanmedian(humans, axis=0)
    consensus[(~np.isnan(humans)).sum(axis=0) < 2] = np.nan  # one expert is no consensus
    paired = np.vstack([consensus, matrix[raters.index(model.id)]])
    expected = krippendorff.alpha(reliability_data=paired, level_of_measurement="ordinal")
    found = fit.models["models"][str(model.id)]
    assert found["rater"] == "judge-model"
    assert found["vs_consensus"]["alpha"] == pytest.approx(expected)
    low, high = found["vs_consensus"]["ci_low"], found["vs_consensus"]["ci_high"]
    assert low is None or low <= expected <= high


def test_dashboard_reuses_agreement_until_the_ratings_change(session, demo, monkeypatch):
    from itsmreview.review.dashboard import service as dashboard_module
    from itsmreview.review.dashboard.service import dashboard
    from itsmreview.review.gate.item_agreement import computed_round_agreement
    from itsmreview.review.models import Assignment, AssignmentStatus
    from itsmreview.review.ratings.service import submit_rating

    computed = []

    def counted(**kwargs):
        computed.append(1)
        return computed_round_agreement(**kwargs)

    monkeypatch.setattr(dashboard_module, "computed_round_agreement", counted)
    first = dashboard(session=session, actor=demo["lead"], bootstrap=50)
    again = dashboard(session=session, actor=demo["lead"], bootstrap=50)
    assert len(computed) == 1  # nothing changed: not recomputed
    assert [a.alpha for a in again.agreement] == [a.alpha for a in first.agreement]
    expert = demo["expert1"]
    open_one = session.exec(
        select(Assignment).where(
            Assignment.expert_id == expert.id, Assignment.status == AssignmentStatus.reserved
        )
    ).first()
    scores = {d: 1 for d in ("scenario_realism", "persona_fit", "instruction_clarity")}
    scores |= {d: 1 for d in ("ground_truth_correctness", "verifier_alignment", "log_fidelity")}
    scores |= {d: 1 for d in ("task_completeness", "spoiler_free")}
    submit_rating(
        session=session, actor=expert, assignment_id=open_one.id, scores=scores, verdict="reject"
    )
    after = dashboard(session=session, actor=demo["lead"], bootstrap=50)
    assert len(computed) == 2
    fresh = round_agreement(session=session, actor=demo["lead"], bootstrap=50)[1]
    assert [a.alpha for a in after.agreement] == [a.alpha for a in fresh]


def test_a_lead_changes_the_gate_and_every_task_is_re_decided(session, demo):
    from itsmreview.review.gate.service import set_gate

    lead = demo["lead"]
    before = recompute_statuses(session=session, actor_id=lead.id)
    config, after = set_gate(
        session=session,
        actor=lead,
        round_name="Demo round 1",
        changes={"k_min": 1, "alpha_min": -1.0, "dimension_min": 1.0},
    )
    assert (config.k_min, config.alpha_min, config.dimension_min) == (1, -1.0, 1.0)
    pending = lambda decisions: sum(d.status == "pending" for d in decisions.values())  # noqa: E731
    assert pending(after) < pending(before)  # one rating is enough now
    stored = dict(session.exec(select(TaskVersion.id, Task.status).join(Task)).all())
    assert {v: d.status for v, d in after.items()} == {v: stored[v] for v in after}
    gate_entries = session.exec(select(LedgerEntry).where(LedgerEntry.action == "gate")).all()
    assert [e.payload["to"]["alpha_min"] for e in gate_entries] == [-1.0]
    for changes, message in [
        ({"alpha_min": 1.5}, "alpha_min must be between -1 and 1"),
        ({"dimension_min": 9}, "dimension_min must be on the rubric's scale, 1-5"),
        ({"gating_dimensions": ["vibes"]}, "vibes not in rubric"),
        ({"quorum": 2}, "unknown gate setting"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            set_gate(session=session, actor=lead, round_name="Demo round 1", changes=changes)
    with pytest.raises(PermissionDenied):
        set_gate(session=session, actor=demo["expert1"], round_name="Demo round 1", changes={})


def test_round_gate_command(session, demo, configured):
    session.commit()
    runner = CliRunner()
    shown = runner.invoke(app, ["round", "gate", "Demo round 1", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["alpha_min"] == 0.667
    changed = runner.invoke(app, ["round", "gate", "Demo round 1", "--k-min", "2", "--json"])
    assert changed.exit_code == 0, changed.output
    result = json.loads(changed.output)
    assert result["k_min"] == 2 and sum(result["statuses"].values()) == 24
    bad = runner.invoke(app, ["round", "gate", "Demo round 1", "--k-min", "0"])
    assert bad.exit_code == 1 and "k_min must be at least 1" in bad.output


def test_counts_from_the_database_equal_the_slow_path_for_every_item(session, demo):
    """round_counts (grouped in SQL, streamed in batches) against the raters x tasks matrix
    of the wide ratings (the slow path), for every dimension, the verdict and each flag."""
    from itsmreview.review.gate.agreement import value_counts
    from itsmreview.review.gate.round_data import (
        gate_items,
        load_round,
        reliability_matrix,
        round_counts,
    )

    data = load_round(session=session)
    counts = round_counts(session=session, round_id=data.review_round.id, rubric=data.rubric)
    checked = 0
    for item, _, _ in gate_items(data.rubric):
        matrix, _, units = reliability_matrix(data, item)
        if not matrix.size:
            assert counts[item].empty
            continue
        expected, values = value_counts(matrix)
        assert counts[item].units.tolist() == [int(u) for u in units], item
        assert counts[item].values.tolist() == values.tolist(), item
        assert counts[item].counts.tolist() == expected.tolist(), item
        checked += 1
    assert checked >= len(data.rubric.dimensions) + 1


def _slow_statuses(session):
    """Every task's decision from the round's ratings, recomputed from scratch."""
    from itsmreview.review.gate.round_data import load_round, round_counts
    from itsmreview.review.gate.service import gate_decisions

    data = load_round(session=session)
    counts = round_counts(session=session, round_id=data.review_round.id, rubric=data.rubric)
    return data, counts, gate_decisions(session=session, data=data)


def _open_assignments(session, expert_ids):
    from itsmreview.review.models import Assignment, AssignmentStatus

    return session.exec(
        select(Assignment)
        .where(Assignment.status == AssignmentStatus.reserved)
        .where(Assignment.expert_id.in_(expert_ids))
        .order_by(Assignment.id)
    ).all()


def test_submits_keep_the_stored_alpha_and_statuses_equal_to_a_full_recompute(session, demo):
    """A submit moves the round's stored coincidence counts by one task and re-decides only
    that task; after every submit and revision, alpha and every stored status equal what the
    full recomputation from all ratings gives."""
    from itsmreview.review.gate import cache as gatecache
    from itsmreview.review.gate.agreement import alpha_of_counts
    from itsmreview.review.gate.service import set_gate
    from itsmreview.review.models import Assignment, AssignmentStatus
    from itsmreview.review.ratings.service import submit_rating

    data, _, _ = _slow_statuses(session)
    dimensions = [d.key for d in data.rubric.dimensions]
    experts = {u.id: u for u in session.exec(select(User).where(User.role == "expert")).all()}
    submitted = session.exec(
        select(Assignment).where(Assignment.status == AssignmentStatus.submitted)
    ).all()
    plan = [(a, "first") for a in _open_assignments(session, list(experts))[:12]]
    plan += [(a, "revision") for a in submitted[:6]]
    assert len(plan) >= 10

    def submit(assignment, step):
        score = 1 + (assignment.id * 7 + step) % 5
        submit_rating(
            session=session,
            actor=experts[assignment.expert_id],
            assignment_id=assignment.id,
            scores={d: score for d in dimensions},
            verdict="accept" if score >= 3 else "revise",
        )

    def check():
        fresh, counts, (tasks, decisions) = _slow_statuses(session)
        stored = gatecache.gate_alphas(
            session=session,
            review_round=fresh.review_round,
            rubric=fresh.rubric,
            dimensions=tuple(dimensions),
        )
        for d in dimensions:
            slow = (
                alpha_of_counts(
                    counts[d].counts, counts[d].values, fresh.rubric.dimension(d).level
                ).value
                if not counts[d].empty
                else None
            )
            assert stored[d] == pytest.approx(slow), d
        assert {
            int(v): s for v, s in zip(tasks["task_version_id"], tasks["status"], strict=True)
        } == {v: d.status for v, d in decisions.items()}
        return stored

    for step, (assignment, _) in enumerate(plan):
        submit(assignment, step)
        check()
    # a submit that carries the round's alpha across the gate re-decides every task
    gating = data.rubric.dimensions[0].key
    before = check()[gating]
    assignment, _ = plan[0]
    with session.begin_nested() as trial:
        submit(assignment, 99)
        after = check()[gating]
        trial.rollback()
    assert before is not None and after is not None and before != after
    set_gate(
        session=session,
        actor=demo["lead"],
        round_name=data.review_round.name,
        changes={"gating_dimensions": [gating], "alpha_min": (before + after) / 2, "k_min": 1},
    )
    approved_before = {
        v for v, s in session.exec(select(TaskVersion.id, TaskVersion.status)) if s == "approved"
    }
    submit(assignment, 99)
    check()
    approved_after = {
        v for v, s in session.exec(select(TaskVersion.id, TaskVersion.status)) if s == "approved"
    }
    assert approved_before != approved_after  # many tasks flipped, not just the rated one
    assert len(approved_before ^ approved_after) > 1


def test_packed_scores_give_what_the_score_rows_give(session, demo, monkeypatch):
    """Agreement read from each rating's packed scores equals agreement read from its score
    rows (the path for ratings written without packed scores), item by item."""
    from itsmreview.review.gate.queries import reads as gate_queries
    from itsmreview.review.scorevector import pack, unpack

    _, fast = round_agreement(session=session, actor=demo["lead"], bootstrap=100)
    rating = session.exec(select(Rating).where(Rating.status == "submitted")).first()
    scores = {
        s.dimension: s.value
        for s in session.exec(select(RatingScore).where(RatingScore.rating_id == rating.id))
    }
    keys = list(scores)  # packed in the rubric's order: the same values, key by key
    assert unpack([rating.score_vector], len(keys)).shape == (1, len(keys))
    assert sorted(unpack([rating.score_vector], len(keys))[0]) == sorted(
        unpack([pack(keys, scores)], len(keys))[0]
    )
    monkeypatch.setattr(gate_queries, "packed_ratings", lambda **_: None)
    _, slow = round_agreement(session=session, actor=demo["lead"], bootstrap=100)
    assert [i.as_dict() for i in fast] == [i.as_dict() for i in slow]
    assert any(i.leave_one_out for i in fast) and any(i.bias for i in fast)


def _assert_queue_as_recomputed(session, lead) -> int:
    """The stored adjudication queue holds exactly the tasks a decision from scratch sends to
    a lead, each with the gate's reasons; returns how many wait."""
    from itsmreview.review.gate.round_data import find_round, load_round
    from itsmreview.review.gate.service import gate_decisions, queue_built_at
    from itsmreview.review.repair import queries as repair_queries
    from itsmreview.review.repair.adjudication import adjudication_queue

    session.expire_all()
    review_round = find_round(session, None)
    _, decisions = gate_decisions(
        session=session, data=load_round(session=session, round_name=review_round.id)
    )
    expected = {v: "; ".join(d.reasons) for v, d in decisions.items() if d.status == "adjudication"}
    assert queue_built_at(session=session, round_id=review_round.id) is not None
    assert (
        repair_queries.adjudication_queue_rows(session=session, round_id=review_round.id)
        == expected
    )
    shown = adjudication_queue(session=session, actor=lead, per_page=10_000)
    assert shown.total == len(expected)
    assert dict(zip(shown.rows["task_version_id"], shown.rows["reasons"], strict=True)) == expected
    return len(expected)


def _revise(session, version_id: int, value: int, verdict: str) -> None:
    """The first human rater of a task submits a new revision with every dimension at
    `value` (a submit, as the expert's page makes it)."""
    from itsmreview.review.ratings.service import submit_rating
    from itsmreview.review.rubrics.service import load_rubric

    rating = session.exec(
        select(Rating)
        .where(
            Rating.task_version_id == version_id,
            Rating.is_current,
            Rating.status == "submitted",
            Rating.rater_kind == "human",
        )
        .order_by(Rating.id)
    ).first()
    submit_rating(
        session=session,
        actor=session.get(User, rating.expert_id),
        assignment_id=rating.assignment_id,
        scores={d.key: value for d in load_rubric().dimensions},
        verdict=verdict,
    )
    session.commit()


def test_the_adjudication_queue_stays_what_a_recomputation_gives(
    session, engine, demo, tmp_path, monkeypatch
):
    """After each kind of change that decides tasks, the materialised queue equals the gate's
    decisions made from scratch: a whole-round decision, a rebuild of a lost queue, an
    inline submit, a queued one applied by the worker, an adjudication, a machine check and
    a gate change."""
    from itsmreview.review.dashboard.service import dashboard
    from itsmreview.review.gate import work as gatework
    from itsmreview.review.gate.service import set_gate
    from itsmreview.review.ratings.checks import import_checks
    from itsmreview.settings import get_settings
    from itsmreview.summaries.models import QueuedAdjudication, Summary

    lead = demo["lead"]
    waiting = _assert_queue_as_recomputed(session, lead)  # the demo's recompute_statuses
    assert waiting >= 2

    # lost (or a round decided before the queue was kept): the Dashboard builds it again
    for row in session.exec(select(QueuedAdjudication)).all():
        session.delete(row)
    for row in session.exec(select(Summary).where(Summary.kind == "adjudication-queue")).all():
        session.delete(row)
    session.commit()
    board = dashboard(session=session, actor=lead, bootstrap=0, per_page=1)
    assert board.queue is not None and board.queue.total == waiting
    assert len(board.disagreements) == 1  # one page of one task
    assert _assert_queue_as_recomputed(session, lead) == waiting

    statuses = {v.id: v.status for v in session.exec(select(TaskVersion)).all()}
    rated = session.exec(
        select(Rating.task_version_id).where(
            Rating.is_current, Rating.status == "submitted", Rating.rater_kind == "human"
        )
    ).all()
    calm = sorted(  # tasks the gate decided without a lead, with all their ratings
        v
        for v, s in statuses.items()
        if s in ("approved", "needs_revision") and rated.count(v) >= 3
    )
    # an inline submit that sends a task to a lead (its rater now rejects everything)
    _revise(session, calm[0], 1, "reject")
    assert session.get(TaskVersion, calm[0]).status == "adjudication"
    assert _assert_queue_as_recomputed(session, lead) == waiting + 1

    # a queued submit changes nothing until the gate worker applies it
    monkeypatch.setenv("ITSMREVIEW_GATE_APPLY", "queue")
    get_settings.cache_clear()
    try:
        _revise(session, calm[1], 1, "reject")
        assert gatework.apply_pending(engine=engine) == 1
    finally:
        monkeypatch.delenv("ITSMREVIEW_GATE_APPLY")
        get_settings.cache_clear()
    assert _assert_queue_as_recomputed(session, lead) == waiting + 2

    # a submit that changes a waiting task's ratings again: its reasons follow
    _revise(session, calm[0], 3, "revise")
    now = _assert_queue_as_recomputed(session, lead)

    # an adjudication decides a waiting task
    adjudicate(
        session=session,
        actor=lead,
        task_version_id=calm[1],
        decision="revise",
        reason="Checked.",
    )
    session.commit()
    assert _assert_queue_as_recomputed(session, lead) == now - 1
    waiting = now - 1

    # a failed machine check sends a waiting task back for revision
    queued = sorted(
        v
        for v, s in ((v.id, v.status) for v in session.exec(select(TaskVersion)))
        if s == "adjudication"
    )
    task = session.exec(select(Task).join(TaskVersion).where(TaskVersion.id == queued[0])).one()
    checks = tmp_path / "checks.json"
    checks.write_text(
        json.dumps({"checks": [{"task": task.external_id, "check": "structure", "status": "fail"}]})
    )
    import_checks(checks, session=session, actor=lead)
    session.commit()
    assert _assert_queue_as_recomputed(session, lead) == waiting - 1

    # a gate change re-decides the whole round: a narrower spread sends more to a lead
    set_gate(
        session=session,
        actor=lead,
        round_name=find_round(session, None).name,
        changes={"disagreement_range": 1.0},
    )
    session.commit()
    assert _assert_queue_as_recomputed(session, lead) > waiting - 1


def test_the_dashboard_pages_and_searches_the_queue(session, demo):
    from itsmreview.review.dashboard.service import dashboard

    lead = demo["lead"]
    first = dashboard(session=session, actor=lead, bootstrap=0, per_page=1)
    total = first.queue.total
    assert total >= 2 and len(first.disagreements) == 1
    second = dashboard(session=session, actor=lead, bootstrap=0, per_page=1, queue_page=1)
    assert second.disagreements["external_id"].iloc[0] > first.disagreements["external_id"].iloc[0]
    beyond = dashboard(session=session, actor=lead, bootstrap=0, per_page=1, queue_page=10**6)
    assert len(beyond.disagreements) == 1  # past the end: the last page
    wanted = first.disagreements["external_id"].iloc[0]
    found = dashboard(session=session, actor=lead, bootstrap=0, queue_search=wanted.upper())
    assert wanted in set(found.disagreements["external_id"])
    assert found.queue.matching < total or total == 1
    conflict = dashboard(session=session, actor=lead, bootstrap=0, queue_search="verdicts conflict")
    assert conflict.queue.matching >= 1
    assert conflict.disagreements["reasons"].str.contains("verdicts conflict").all()
    none = dashboard(session=session, actor=lead, bootstrap=0, queue_search="no such task 100%_")
    assert none.queue.matching == 0 and none.disagreements.empty and none.queue.total == total
