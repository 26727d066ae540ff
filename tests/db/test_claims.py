"""Experts claim tasks: k per task even under concurrent claims, reservations lapse."""

from collections import Counter
from datetime import timedelta

import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, PermissionDenied
from itsmreview.ledger.service import verify_chain
from itsmreview.review.models import Assignment, AssignmentStatus, Rating
from itsmreview.review.ratings.expert_view import expert_queue
from itsmreview.review.ratings.queries import queue_frame
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.rounds.assignment import claim_next, close_round, reassign, release_expired
from itsmreview.review.rounds.service import create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from sqlmodel import Session, select


def setup_round(session, n_tasks, n_experts, k, personas=None):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    experts = [
        create_user(
            session=session,
            username=f"e{i}",
            role="expert",
            password="expert-pass",
            expertise=[personas[i]] if personas else (),
        )[0]
        for i in range(n_experts)
    ]
    tasks = [
        {
            "id": f"t{i}",
            "title": f"T{i}",
            "track": "single-agent",
            "instruction": "x",
            "persona": (personas or ["L1"])[i % len(personas or ["L1"])],
        }
        for i in range(n_tasks)
    ]
    import_tasks(parse_bundle(tasks, "t"), session=session)
    from itsmreview.catalog.models import TaskVersion

    versions = [v.id for v in session.exec(select(TaskVersion).order_by(TaskVersion.id)).all()]
    rubric = ensure_rubric(load_rubric(), session=session)
    review_round = create_round(
        session=session, actor=lead, name="R", rubric=rubric, task_version_ids=versions, k=k
    )
    session.commit()
    return lead, experts, review_round


def test_claims_fill_each_task_to_k_and_no_further(session):
    lead, experts, review_round = setup_round(session, n_tasks=2, n_experts=5, k=2)
    claimed = [claim_next(session=session, actor=e) for e in experts]
    assert [a is not None for a in claimed] == [True, True, True, True, False]
    assert claim_next(session=session, actor=experts[0]).id == claimed[0].id  # own reservation
    per_task = {}
    for a in claimed[:4]:
        per_task[a.task_version_id] = per_task.get(a.task_version_id, 0) + 1
    assert sorted(per_task.values()) == [2, 2]
    with pytest.raises(PermissionDenied):
        claim_next(session=session, actor=lead)


def test_expertise_is_matched_first(session):
    _, experts, _ = setup_round(
        session, n_tasks=2, n_experts=2, k=1, personas=["L1 service desk agent", "Incident manager"]
    )
    got = claim_next(session=session, actor=experts[1])
    from itsmreview.catalog.models import Task, TaskVersion

    task = session.exec(
        select(Task).join(TaskVersion).where(TaskVersion.id == got.task_version_id)
    ).one()
    assert task.persona == "Incident manager"


def test_lapsed_reservation_is_released_and_the_task_reclaimed(session):
    _, experts, review_round = setup_round(session, n_tasks=1, n_experts=2, k=1)
    first = claim_next(session=session, actor=experts[0])
    assert claim_next(session=session, actor=experts[1]) is None
    first.reserved_until = utcnow() - timedelta(minutes=1)
    session.flush()
    assert release_expired(session=session, round_id=review_round.id) == 1
    second = claim_next(session=session, actor=experts[1])
    assert second is not None and second.task_version_id == first.task_version_id
    scores = {d.key: 4 for d in load_rubric().dimensions}
    with pytest.raises(Conflict, match="reservation lapsed"):
        submit_rating(
            session=session,
            actor=experts[0],
            assignment_id=first.id,
            scores=scores,
            verdict="accept",
        )


def test_reassign_and_close(session):
    lead, experts, review_round = setup_round(session, n_tasks=1, n_experts=2, k=1)
    mine = claim_next(session=session, actor=experts[0])
    moved = reassign(session=session, actor=lead, assignment_id=mine.id, expert=experts[1])
    assert moved.expert_id == experts[1].id and mine.status == AssignmentStatus.released
    close_round(session=session, actor=lead, round_name="R")
    with pytest.raises(Conflict, match="closed"):
        claim_next(session=session, actor=experts[0])
    assert moved.status == AssignmentStatus.released


def test_concurrent_claims_never_exceed_k_and_never_fail(engine, at_once):
    with Session(engine, expire_on_commit=False) as session:
        _, experts, _ = setup_round(session, n_tasks=1, n_experts=8, k=3)
    results = []

    def claim(expert):
        with Session(engine, expire_on_commit=False) as session:
            results.append(claim_next(session=session, actor=expert))
            session.commit()

    assert at_once(claim, experts) == []
    with Session(engine) as session:
        active = session.exec(
            select(Assignment).where(Assignment.status == AssignmentStatus.reserved)
        ).all()
    assert len(active) == 3
    assert sum(r is not None for r in results) == 3


def test_round_members_and_removal(session):
    lead, experts, _ = setup_round(session, n_tasks=2, n_experts=3, k=2)
    from itsmreview.review.rounds.assignment import set_round_experts

    set_round_experts(session=session, actor=lead, round_name="R", add=experts[:2])
    with pytest.raises(PermissionDenied, match="not among the experts"):
        claim_next(session=session, actor=experts[2])
    held = claim_next(session=session, actor=experts[0])
    set_round_experts(session=session, actor=lead, round_name="R", remove=[experts[0]])
    assert held.status == AssignmentStatus.released
    with pytest.raises(PermissionDenied):
        set_round_experts(session=session, actor=experts[1], round_name="R", add=[experts[2]])


def test_turn_notes_belong_to_the_experts_own_transcript(session):
    from itsmreview.catalog.models import Transcript
    from itsmreview.errors import InvalidInput
    from itsmreview.review.ratings.queries import turn_notes
    from itsmreview.review.ratings.service import add_turn_note

    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    a, _ = create_user(session=session, username="ea", role="expert", password="expert-pass")
    b, _ = create_user(session=session, username="eb", role="expert", password="expert-pass")
    task = {
        "id": "t",
        "title": "T",
        "persona": "L1",
        "track": "simulated-actors",
        "instruction": "x",
        "transcripts": [
            {
                "id": "r",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "agent", "content": "hello"},
                ],
            }
        ],
    }
    import_tasks(parse_bundle([task], "t"), session=session)
    from itsmreview.catalog.models import TaskVersion

    version = session.exec(select(TaskVersion)).one()
    rubric = ensure_rubric(load_rubric(), session=session)
    create_round(
        session=session, actor=lead, name="R", rubric=rubric, task_version_ids=[version.id], k=2
    )
    mine = claim_next(session=session, actor=a)
    transcript = session.exec(select(Transcript)).one()
    add_turn_note(
        session=session,
        actor=a,
        assignment_id=mine.id,
        transcript_id=transcript.id,
        turn=2,
        flag="unrealistic_actor",
        comment="Agents don't greet like that",
    )
    with pytest.raises(InvalidInput, match=r"turn 3 is outside 1..2"):
        add_turn_note(
            session=session,
            actor=a,
            assignment_id=mine.id,
            transcript_id=transcript.id,
            turn=3,
            comment="x",
        )
    with pytest.raises(PermissionDenied):
        add_turn_note(
            session=session,
            actor=b,
            assignment_id=mine.id,
            transcript_id=transcript.id,
            turn=1,
            comment="x",
        )
    notes = turn_notes(session=session, external_id="t")
    assert notes[["expert", "turn", "flag"]].values.tolist() == [["ea", 2, "unrealistic_actor"]]


def test_no_one_gets_a_task_they_authored_or_edited(session):
    from itsmreview.catalog.models import Task, TaskVersion

    lead, experts, review_round = setup_round(session, n_tasks=2, n_experts=2, k=2)
    versions = session.exec(select(TaskVersion).order_by(TaskVersion.id)).all()
    session.get(Task, versions[0].task_id).author_id = experts[0].id
    versions[1].edited_by_id = experts[0].id
    session.flush()
    assert claim_next(session=session, actor=experts[0]) is None
    assert claim_next(session=session, actor=experts[1]) is not None


def test_editing_a_rubric_makes_a_new_version_and_ratings_keep_theirs(session):
    lead, experts, review_round = setup_round(session, n_tasks=1, n_experts=1, k=1)
    first = ensure_rubric(load_rubric(), session=session)
    assert ensure_rubric(load_rubric(), session=session).id == first.id
    edited = load_rubric().model_copy(update={"title": "ITSM realism (2027)"})
    second = ensure_rubric(edited, session=session)
    assert (second.name, second.version) == (first.name, first.version + 1)
    mine = claim_next(session=session, actor=experts[0])
    scores = {d.key: 4 for d in load_rubric().dimensions}
    rating = submit_rating(
        session=session, actor=experts[0], assignment_id=mine.id, scores=scores, verdict="accept"
    )
    assert rating.rubric_id == review_round.rubric_id == first.id


def test_experts_claiming_and_rating_at_once_all_succeed(engine, at_once):
    with Session(engine, expire_on_commit=False) as session:
        _, experts, _ = setup_round(session, n_tasks=6, n_experts=6, k=1)
    scores = {d.key: 4 for d in load_rubric().dimensions}

    def work(expert):
        with Session(engine, expire_on_commit=False) as session:
            assignment = claim_next(session=session, actor=expert)
            session.commit()
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=assignment.id,
                scores=scores,
                verdict="accept",
            )
            session.commit()

    assert at_once(work, experts) == []
    with Session(engine) as session:
        submitted = session.exec(
            select(Assignment).where(Assignment.status == AssignmentStatus.submitted)
        ).all()
        assert len({a.task_version_id for a in submitted}) == len(experts)
        assert verify_chain(session=session).ok


def _lapse(session, *assignments):
    for assignment in assignments:
        assignment.reserved_until = utcnow() - timedelta(minutes=1)
    session.flush()


def test_k_holds_when_reservations_lapse_without_any_release_call(session):
    """k=2: two experts claim, both reservations lapse, two more claim; of the four submits
    only the two holders' are stored, the lapsed ones are refused with a clear message."""
    _, experts, review_round = setup_round(session, n_tasks=1, n_experts=4, k=2)
    first = [claim_next(session=session, actor=e) for e in experts[:2]]
    assert all(a is not None for a in first)
    assert claim_next(session=session, actor=experts[2]) is None
    _lapse(session, *first)
    queue = queue_frame(session=session, expert_id=experts[0].id)
    assert queue.empty  # a lapsed reservation is not shown as the expert's
    second = [claim_next(session=session, actor=e) for e in experts[2:]]
    assert all(a is not None for a in second)
    scores = {d.key: 4 for d in load_rubric().dimensions}
    for expert, assignment in zip(experts[2:], second, strict=True):
        submit_rating(
            session=session,
            actor=expert,
            assignment_id=assignment.id,
            scores=scores,
            verdict="accept",
        )
    for expert, assignment in zip(experts[:2], first, strict=True):
        with pytest.raises(Conflict, match="reservation lapsed"):
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=assignment.id,
                scores=scores,
                verdict="accept",
            )
    session.commit()
    submitted = session.exec(
        select(Assignment).where(Assignment.status == AssignmentStatus.submitted)
    ).all()
    assert sorted(a.expert_id for a in submitted) == sorted(e.id for e in experts[2:])
    assert len(session.exec(select(Rating).where(Rating.status == "submitted")).all()) == 2


def test_a_lapsed_reservation_still_free_can_be_submitted(session):
    _, experts, _ = setup_round(session, n_tasks=1, n_experts=2, k=2)
    mine = claim_next(session=session, actor=experts[0])
    _lapse(session, mine)
    scores = {d.key: 4 for d in load_rubric().dimensions}
    rating = submit_rating(
        session=session, actor=experts[0], assignment_id=mine.id, scores=scores, verdict="accept"
    )
    assert rating.id is not None and mine.status == AssignmentStatus.submitted


def test_submits_on_one_task_at_once_keep_the_stored_alpha_exact(engine, at_once):
    """Six experts claim two tasks (k=3) and submit at the same moment, with different
    scores: the round's stored coincidence counts equal the ones recounted from the ratings
    (a submit that committed meanwhile on the same task is never counted twice)."""
    from itsmreview.review.gate import cache as gatecache
    from itsmreview.review.gate.round_data import round_counts
    from itsmreview.review.gate.service import current_gate

    with Session(engine, expire_on_commit=False) as session:
        _, experts, review_round = setup_round(session, n_tasks=2, n_experts=6, k=3)
        claimed = {}
        for expert in experts:
            claimed[expert.id] = claim_next(session=session, actor=expert).id
        session.commit()
    keys = [d.key for d in load_rubric().dimensions]

    def work(expert):
        with Session(engine, expire_on_commit=False) as session:
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=claimed[expert.id],
                scores={k: 1 + (expert.id + i) % 5 for i, k in enumerate(keys)},
                verdict="accept",
            )
            session.commit()

    assert at_once(work, experts) == []
    with Session(engine) as session:
        _, rubric = current_gate(session=session, round_name=review_round.id)
        stored = {
            row.dimension: row.pairs
            for row in session.exec(
                select(gatecache.RoundCoincidence).where(
                    gatecache.RoundCoincidence.round_id == review_round.id
                )
            )
        }
        counts = round_counts(
            session=session, round_id=review_round.id, rubric=rubric, dimensions_only=True
        )
        for key in keys:
            expected: dict = {}
            for row in counts[key].counts:
                gatecache._apply(
                    expected,
                    Counter({v: int(n) for v, n in zip(counts[key].values, row, strict=True) if n}),
                    +1,
                )
            assert stored[key] == expected, key


def _held_counts_agree(session, round_id) -> None:
    """The kept `places_held` of every round task equals a count of its assignments."""
    from itsmreview.review.models import RoundTask

    session.flush()
    counted = Counter(
        a.task_version_id
        for a in session.exec(select(Assignment).where(Assignment.round_id == round_id)).all()
        if a.status in (AssignmentStatus.reserved, AssignmentStatus.submitted)
    )
    session.expire_all()
    kept = {
        rt.task_version_id: rt.places_held
        for rt in session.exec(select(RoundTask).where(RoundTask.round_id == round_id)).all()
    }
    assert kept == {v: counted.get(v, 0) for v in kept}


def test_places_held_follows_every_change_of_an_assignment(session):
    """Claims find tasks short of k by a kept count: it must match the assignments after a
    claim, a lapse and its release, a reassignment, a removed member, a resumed submit, a
    lead's assignment and the close of the round."""
    from itsmreview.review.rounds.assignment import set_round_experts
    from itsmreview.review.rounds.service import assign_round

    lead, experts, review_round = setup_round(session, n_tasks=4, n_experts=6, k=2)
    rid = review_round.id
    scores = {d.key: 4 for d in load_rubric().dimensions}
    claimed = [claim_next(session=session, actor=e) for e in experts[:4]]
    _held_counts_agree(session, rid)
    _lapse(session, claimed[0], claimed[1])
    assert release_expired(session=session, round_id=rid) == 2
    _held_counts_agree(session, rid)
    submit_rating(  # resumes a released reservation while places are free
        session=session,
        actor=experts[0],
        assignment_id=claimed[0].id,
        scores=scores,
        verdict="accept",
    )
    _held_counts_agree(session, rid)
    reassign(session=session, actor=lead, assignment_id=claimed[2].id, expert=experts[4])
    _held_counts_agree(session, rid)
    set_round_experts(session=session, actor=lead, round_name="R", remove=[experts[3]])
    _held_counts_agree(session, rid)
    assign_round(session=session, actor=lead, review_round=review_round, experts=experts)
    _held_counts_agree(session, rid)
    close_round(session=session, actor=lead, round_name="R")
    _held_counts_agree(session, rid)


def test_claims_take_the_best_task_as_a_full_count_would(session):
    """The claim's SQL order (expertise, priority, fewest places, id) against the order
    computed in Python from every round task and every assignment, over a mixed round."""
    import random

    from itsmreview.catalog.models import Task, TaskVersion
    from itsmreview.review.models import RoundTask

    personas = ["L1", "L2", "CAB"] * 3
    _, experts, review_round = setup_round(session, n_tasks=24, n_experts=9, k=2, personas=personas)
    chance = random.Random(7)
    for rt in session.exec(select(RoundTask)).all():
        rt.priority = chance.choice([0.0, 0.25, 0.5])
    session.flush()
    for step in range(30):
        expert = experts[step % len(experts)]
        rows = session.exec(
            select(RoundTask, Task.persona)
            .join(TaskVersion, TaskVersion.id == RoundTask.task_version_id)
            .join(Task, Task.id == TaskVersion.task_id)
        ).all()
        assignments = session.exec(select(Assignment)).all()
        held = Counter(
            a.task_version_id
            for a in assignments
            if a.status in (AssignmentStatus.reserved, AssignmentStatus.submitted)
        )
        had = {a.task_version_id for a in assignments if a.expert_id == expert.id}
        open_tasks = [
            (persona not in expert.expertise, -rt.priority, held[rt.task_version_id], rt.id, rt)
            for rt, persona in rows
            if held[rt.task_version_id] < review_round.k and rt.task_version_id not in had
        ]
        expected = min(open_tasks, key=lambda row: row[:4])[4] if open_tasks else None
        mine = claim_next(session=session, actor=expert)
        if expected is None:
            assert mine is None
            continue
        assert mine.task_version_id == expected.task_version_id
        if step % 3 == 0:
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=mine.id,
                scores={d.key: 3 for d in load_rubric().dimensions},
                verdict="accept",
            )
        else:
            _lapse(session, mine)
            release_expired(session=session, round_id=review_round.id)


def test_a_claim_looks_past_tasks_whose_count_is_behind(session):
    """Twelve of thirteen tasks are full but their kept counts say empty (as a count read a
    moment before others filled them would): the claim checks each exactly under its lock,
    corrects the counts and still finds the open task."""
    from itsmreview.review.models import RoundTask
    from sqlalchemy import update

    _, experts, review_round = setup_round(session, n_tasks=13, n_experts=14, k=1)
    taken = [claim_next(session=session, actor=e) for e in experts[:12]]
    open_task = (
        {rt.task_version_id for rt in session.exec(select(RoundTask)).all()}
        - {a.task_version_id for a in taken}
    ).pop()
    session.exec(update(RoundTask).values(places_held=0))
    session.expire_all()
    mine = claim_next(session=session, actor=experts[12])
    assert mine is not None and mine.task_version_id == open_task
    _held_counts_agree(session, review_round.id)
    assert claim_next(session=session, actor=experts[13]) is None


def test_experts_claiming_at_once_take_different_tasks(engine, at_once):
    with Session(engine, expire_on_commit=False) as session:
        _, experts, _ = setup_round(session, n_tasks=6, n_experts=6, k=1)
    taken = []

    def claim(expert):
        with Session(engine, expire_on_commit=False) as session:
            taken.append(claim_next(session=session, actor=expert))
            session.commit()

    assert at_once(claim, experts) == []
    assert all(a is not None for a in taken)
    assert len({a.task_version_id for a in taken}) == 6


def test_queue_lists_open_tasks_then_the_latest_rated_and_counts_all(session):
    _, experts, _ = setup_round(session, n_tasks=6, n_experts=1, k=1)
    expert = experts[0]
    scores = {d.key: 4 for d in load_rubric().dimensions}
    rated = []
    for _ in range(5):
        assignment = claim_next(session=session, actor=expert)
        submit_rating(
            session=session,
            actor=expert,
            assignment_id=assignment.id,
            scores=scores,
            verdict="accept",
        )
        rated.append(assignment.id)
    open_one = claim_next(session=session, actor=expert)
    queue = expert_queue(session=session, actor=expert, rated_shown=2)
    assert (queue.held, queue.rated) == (6, 5)
    assert queue.rows["assignment_id"].tolist() == [open_one.id, rated[4], rated[3]]
    assert queue.rows["status"].tolist() == ["reserved", "submitted", "submitted"]
    whole = queue_frame(session=session, expert_id=expert.id)
    assert sorted(whole["assignment_id"]) == sorted([*rated, open_one.id])


def test_a_count_fallen_behind_never_puts_a_task_over_k(session):
    """The kept count of places says a full task has room (as if a write had forgotten to
    recount): the claim finds the task's places taken by its assignments, corrects the count
    and takes the next task."""
    from itsmreview.review.models import RoundTask
    from sqlalchemy import update

    _, experts, review_round = setup_round(session, n_tasks=2, n_experts=2, k=1)
    first = claim_next(session=session, actor=experts[0])
    session.commit()
    session.exec(
        update(RoundTask)
        .where(RoundTask.task_version_id == first.task_version_id)
        .values(places_held=0)
    )
    session.commit()
    second = claim_next(session=session, actor=experts[1])
    session.commit()
    assert second is not None and second.task_version_id != first.task_version_id
    held = dict(
        session.exec(
            select(RoundTask.task_version_id, RoundTask.places_held).where(
                RoundTask.round_id == review_round.id
            )
        ).all()
    )
    assert held == {first.task_version_id: 1, second.task_version_id: 1}
    holders = Counter(
        a.task_version_id
        for a in session.exec(
            select(Assignment).where(Assignment.status == AssignmentStatus.reserved)
        ).all()
    )
    assert holders == {first.task_version_id: 1, second.task_version_id: 1}
