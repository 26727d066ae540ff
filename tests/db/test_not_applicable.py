"""A rubric dimension that does not apply to a task (fidelity to the source variant of a task
that declares none) stays empty: never required, stored empty if sent, missing in alpha."""

import krippendorff
import numpy as np
import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks, latest_version_ids
from itsmreview.errors import InvalidInput
from itsmreview.review.gate.item_agreement import round_agreement
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.rounds.assignment import claim_next
from itsmreview.review.rounds.service import create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from itsmreview.review.scorevector import unpack

FIDELITY = "log_fidelity"


def _round(session, with_variant: list[bool]):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    experts = [
        create_user(session=session, username=f"e{i}", role="expert", password="expert-pass")[0]
        for i in range(3)
    ]
    tasks = [
        {
            "id": f"t{i}",
            "title": f"T{i}",
            "track": "single-agent",
            "instruction": "x",
            "persona": "L1",
            **({"source": {"log": "bpi", "variants": [["Accepted", "Completed"]]}} if has else {}),
        }
        for i, has in enumerate(with_variant)
    ]
    import_tasks(parse_bundle(tasks, "t"), session=session)
    rubric = ensure_rubric(load_rubric(), session=session)
    create_round(
        session=session,
        actor=lead,
        name="R",
        rubric=rubric,
        task_version_ids=latest_version_ids(session=session),
        k=3,
    )
    session.commit()
    return lead, experts


def _scores(value: float, *, fidelity: float | None) -> dict:
    scores = {d.key: value for d in load_rubric().dimensions if d.required}
    scores[FIDELITY] = fidelity
    return scores


def _task_of(session, assignment) -> str:
    version = session.get(TaskVersion, assignment.task_version_id)
    return session.get(Task, version.task_id).external_id


def test_the_default_rubric_asks_fidelity_only_of_tasks_with_a_source_variant():
    fidelity = load_rubric().dimension(FIDELITY)
    assert fidelity.required and fidelity.applies_when == "source_variant"
    assert fidelity.applies(has_source_variant=True)
    assert not fidelity.applies(has_source_variant=False)
    assert all(d.applies_when == "always" for d in load_rubric().dimensions if d.key != FIDELITY)


def test_fidelity_is_left_empty_without_a_variant_and_required_with_one(session):
    _, experts = _round(session, [False, True])
    first = claim_next(session=session, actor=experts[0])
    second_expert_first = claim_next(session=session, actor=experts[1])
    session.commit()
    by_task = {_task_of(session, a): a for a in (first, second_expert_first)}
    assert set(by_task) == {"t0", "t1"}, "two experts, two tasks, least-covered first"
    without, with_variant = by_task["t0"], by_task["t1"]
    owner = {first.id: experts[0], second_expert_first.id: experts[1]}
    with pytest.raises(InvalidInput, match="Fidelity to the source log variant' is required"):
        submit_rating(
            session=session,
            actor=owner[with_variant.id],
            assignment_id=with_variant.id,
            scores=_scores(4, fidelity=None),
            verdict="accept",
        )
    session.rollback()
    # a score sent for it anyway (a script sending every key) is stored empty
    rating = submit_rating(
        session=session,
        actor=owner[without.id],
        assignment_id=without.id,
        scores=_scores(4, fidelity=4),
        verdict="accept",
    )
    keys = [d.key for d in load_rubric().dimensions]
    vector = unpack([rating.score_vector], len(keys))[0]
    assert np.isnan(vector[keys.index(FIDELITY)])
    assert vector[keys.index("scenario_realism")] == 4


def test_a_dimension_that_does_not_apply_is_missing_in_alpha(session):
    """Four tasks, three experts; t0 and t2 declare no variant. Fidelity's alpha comes from
    t1 and t3 alone, as krippendorff computes it with those cells missing."""
    _, experts = _round(session, [False, True, False, True])
    given = {  # task -> each expert's (realism score, fidelity score)
        "t0": [(5, None), (4, None), (5, None)],
        "t1": [(2, 2), (3, 2), (2, 1)],
        "t2": [(4, None), (4, None), (3, None)],
        "t3": [(1, 5), (2, 4), (1, 5)],
    }
    for _ in range(4):
        for index, expert in enumerate(experts):
            assignment = claim_next(session=session, actor=expert)
            task = _task_of(session, assignment)
            realism, fidelity = given[task][index]
            scores = _scores(4, fidelity=fidelity)
            scores["scenario_realism"] = realism
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=assignment.id,
                scores=scores,
                verdict="accept",
            )
            session.commit()
    lead = create_user(session=session, username="lead2", role="lead", password="lead-pass")[0]
    _, items = round_agreement(session=session, actor=lead, round_name="R", bootstrap=0)
    alpha = {item.item: item.alpha for item in items}
    tasks = sorted(given)
    fidelity = np.array(
        [[np.nan if given[t][e][1] is None else given[t][e][1] for t in tasks] for e in range(3)],
        dtype=float,
    )
    realism = np.array([[given[t][e][0] for t in tasks] for e in range(3)], dtype=float)
    assert alpha[FIDELITY].units == 2 and alpha[FIDELITY].pairable_values == 6
    assert alpha[FIDELITY].value == pytest.approx(
        krippendorff.alpha(fidelity, level_of_measurement="ordinal")
    )
    assert alpha["scenario_realism"].units == 4
    assert alpha["scenario_realism"].value == pytest.approx(
        krippendorff.alpha(realism, level_of_measurement="ordinal")
    )


# An expert marks an optional dimension not applicable, with a reason (issue 35).

COLLEAGUE = "simulated_colleague_realism"
NO_COLLEAGUE = "no simulated colleague takes part in this task"


def _rate(session, expert, *, colleague=None, marks=None, revise=None):
    """The expert's next task rated 4 on every required item (or their assignment `revise`
    rated again), the colleague item scored or marked."""
    assignment = revise or claim_next(session=session, actor=expert)
    scores = _scores(4, fidelity=4)
    scores[COLLEAGUE] = colleague
    rating = submit_rating(
        session=session,
        actor=expert,
        assignment_id=assignment.id,
        scores=scores,
        verdict="accept",
        not_applicable=marks,
    )
    session.commit()
    return assignment, rating


def test_a_mark_is_kept_in_the_draft_and_the_rating_with_its_score_empty(session):
    from itsmreview.review.ratings.expert_view import assignment_view
    from itsmreview.review.ratings.service import save_draft

    _, experts = _round(session, [True])
    expert = experts[0]
    assignment = claim_next(session=session, actor=expert)
    save_draft(
        session=session,
        actor=expert,
        assignment_id=assignment.id,
        scores={"scenario_realism": 4},
        not_applicable={COLLEAGUE: "no colleague"},
    )
    session.commit()
    view = assignment_view(session=session, actor=expert, assignment_id=assignment.id)
    assert view.draft.not_applicable == {COLLEAGUE: "no colleague"}
    assert view.draft_scores == {"scenario_realism": 4}
    _, rating = _rate(session, expert, marks={COLLEAGUE: f"  {NO_COLLEAGUE} "}, revise=assignment)
    session.expire_all()
    view = assignment_view(session=session, actor=expert, assignment_id=assignment.id)
    assert view.draft is None, "the submit replaced the draft"
    assert view.own_rating.not_applicable == {COLLEAGUE: NO_COLLEAGUE}, "the reason, trimmed"
    assert view.own_scores[COLLEAGUE] is None
    keys = [d.key for d in load_rubric().dimensions]
    assert np.isnan(unpack([rating.score_vector], len(keys))[0][keys.index(COLLEAGUE)])


@pytest.mark.parametrize(
    ("scores", "marks", "message"),
    [
        ({}, {"scenario_realism": "it is not"}, "'Scenario realism' is required: it cannot"),
        ({}, {COLLEAGUE: "  "}, "marked not applicable without a reason"),
        ({COLLEAGUE: 3}, {COLLEAGUE: NO_COLLEAGUE}, "has a score and is marked not applicable"),
        ({}, {"tone": "no"}, "unknown rubric dimension\\(s\\) marked not applicable: tone"),
    ],
)
def test_a_mark_is_refused_on_a_required_or_scored_item_or_without_a_reason(
    session, scores, marks, message
):
    _, experts = _round(session, [True])
    assignment = claim_next(session=session, actor=experts[0])
    session.commit()
    sent = {**_scores(4, fidelity=4), **scores}
    if "scenario_realism" in marks:
        sent["scenario_realism"] = None
    with pytest.raises(InvalidInput, match=message):
        submit_rating(
            session=session,
            actor=experts[0],
            assignment_id=assignment.id,
            scores=sent,
            verdict="accept",
            not_applicable=marks,
        )


def test_a_marked_item_is_missing_in_alpha_as_krippendorff_computes_it(session):
    """Three tasks, three experts; the colleague item is marked not applicable on t1 by all
    three and on t2 by one: its alpha is krippendorff's with those cells NaN."""
    _, experts = _round(session, [True, True, True])
    given = {  # task -> each expert's colleague score (None: marked not applicable)
        "t0": [4, 5, 4],
        "t1": [None, None, None],
        "t2": [2, None, 1],
    }
    for _ in range(3):
        for index, expert in enumerate(experts):
            assignment = claim_next(session=session, actor=expert)
            value = given[_task_of(session, assignment)][index]
            _rate(
                session,
                expert,
                colleague=value,
                marks=None if value is not None else {COLLEAGUE: NO_COLLEAGUE},
                revise=assignment,
            )
    lead = create_user(session=session, username="lead2", role="lead", password="lead-pass")[0]
    _, items = round_agreement(session=session, actor=lead, round_name="R", bootstrap=0)
    colleague = next(item.alpha for item in items if item.item == COLLEAGUE)
    data = np.array(
        [[np.nan if given[t][e] is None else given[t][e] for t in sorted(given)] for e in range(3)],
        dtype=float,
    )
    assert colleague.units == 2 and colleague.pairable_values == 5
    assert colleague.value == pytest.approx(
        krippendorff.alpha(data, level_of_measurement="ordinal")
    )


def test_the_gate_ignores_a_marked_item_and_the_ledger_commits_to_the_mark(session):
    """Colleague scores 5, 5 and 1 span 4 points: the task goes to a lead. The third expert
    revises: the item does not apply. The gate drops the spread; `ledger verify` passes, and
    fails once the stored reason is changed behind the ledger's back."""
    from itsmreview.ledger.evidence.audit import verify_ledger
    from itsmreview.review.gate.round_data import load_round
    from itsmreview.review.gate.service import gate_decisions
    from itsmreview.review.models import GatePending, Rating
    from sqlmodel import select

    _, experts = _round(session, [True])
    _rate(session, experts[0], colleague=5)
    _rate(session, experts[1], colleague=5)
    third, _ = _rate(session, experts[2], colleague=1)

    def decision():
        _, decisions = gate_decisions(session=session, data=load_round(session=session))
        (only,) = decisions.values()
        return only

    assert decision().status == "adjudication"
    assert any(COLLEAGUE in reason for reason in decision().reasons)
    _, revised = _rate(session, experts[2], marks={COLLEAGUE: NO_COLLEAGUE}, revise=third)
    assert revised.revision == 2
    assert not any(COLLEAGUE in reason for reason in decision().reasons)
    assert decision().status != "adjudication"
    assert session.exec(select(GatePending)).all() == [], "applied, not held as changed"
    assert verify_ledger(session=session).ok
    stored = session.get(Rating, revised.id)
    stored.not_applicable = {COLLEAGUE: "changed afterwards"}
    session.add(stored)
    session.commit()
    report = verify_ledger(session=session)
    assert not report.ok
    assert any(str(revised.id) in str(finding) for finding in report.findings)


def test_an_export_carries_the_mark_with_the_value_empty(reviewed, monkeypatch):
    """One expert revises a rating: the colleague item does not apply. ratings.csv and
    ratings.jsonl give the item no value and the reason beside it; the Hugging Face config
    `ratings` loads with the marked row among unmarked ones."""
    import csv
    import json

    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.models import Assignment
    from sqlmodel import select

    with session_scope() as session:
        expert = user_by_username(session=session, username="e1")
        version = session.exec(
            select(TaskVersion.id).join(Task).where(Task.external_id == "harbor-reset")
        ).one()
        assignment = session.exec(
            select(Assignment).where(
                Assignment.expert_id == expert.id, Assignment.task_version_id == version
            )
        ).one()
        scores = {d.key: 5 for d in load_rubric().dimensions}
        scores[COLLEAGUE] = None
        submit_rating(
            session=session,
            actor=expert,
            assignment_id=assignment.id,
            scores=scores,
            verdict="accept",
            not_applicable={COLLEAGUE: NO_COLLEAGUE},
        )
    out = reviewed["tmp"] / "set"
    reviewed["export"](out, formats=["native", "hf"])
    rows = [json.loads(line) for line in (out / "evidence/ratings.jsonl").read_text().splitlines()]
    [marked] = [r for r in rows if r["not_applicable"]]
    assert (marked["task"], marked["revision"]) == ("harbor-reset", 2)
    assert marked["not_applicable"] == {COLLEAGUE: NO_COLLEAGUE} and marked[COLLEAGUE] is None
    assert all(r[COLLEAGUE] == 5 for r in rows if r is not marked and r["task"] == "harbor-reset")
    with open(out / "evidence/ratings.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    [cell] = [r for r in table if r["not_applicable"]]
    assert json.loads(cell["not_applicable"]) == {COLLEAGUE: NO_COLLEAGUE}
    assert cell[COLLEAGUE] == ""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    loaded = datasets.load_dataset(
        str(out / "tasks/hf"), "ratings", cache_dir=str(reviewed["tmp"] / "cache")
    )["train"]
    assert len(loaded) == 12
    assert [m for m in loaded["not_applicable"] if m] == [{COLLEAGUE: NO_COLLEAGUE}]
