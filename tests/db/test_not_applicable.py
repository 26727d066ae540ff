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
