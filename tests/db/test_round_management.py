"""A lead's round, as the Rounds page and the CLI manage it: opened over a filter with members
and a gate, assignments reassigned and released, closed; each step in the ledger."""

import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.catalog.task_list import task_filters
from itsmreview.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from itsmreview.ledger.models import LedgerEntry
from itsmreview.ledger.service import verify_chain
from itsmreview.review.models import Assignment, AssignmentStatus
from itsmreview.review.rounds import queries
from itsmreview.review.rounds.assignment import claim_next, close_round, release_assignment
from itsmreview.review.rounds.service import (
    admit_experts,
    open_round,
    preview_round,
    reassign_to,
    round_assignments,
    rounds_overview,
)
from itsmreview.review.rubrics.service import load_rubric
from sqlmodel import select


@pytest.fixture
def catalog(session):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    experts = [
        create_user(session=session, username=f"e{i}", role="expert", password="expert-pass")[0]
        for i in range(4)
    ]
    tasks = [
        {
            "id": f"{persona[:3].lower()}-{i}",
            "title": f"{persona} task {i}",
            "track": "single-agent" if i % 2 else "simulated-actors",
            "instruction": "x",
            "persona": persona,
        }
        for persona in ("Service desk agent", "Change manager")
        for i in range(3)
    ]
    import_tasks(parse_bundle(tasks, "t"), session=session)
    session.commit()
    return lead, experts


def _entries(session, name):
    return [
        (e.action, e.payload)
        for e in session.exec(
            select(LedgerEntry)
            .where(LedgerEntry.artifact_type == "review_round", LedgerEntry.artifact_id == name)
            .order_by(LedgerEntry.seq)
        )
    ]


def test_a_round_over_a_filter_takes_exactly_the_matching_tasks(session, catalog):
    lead, _ = catalog
    chosen = task_filters(personas=["Change manager"], tracks=["single-agent"])
    preview = preview_round(session=session, actor=lead, filters=chosen)
    assert preview.matching == 1 and preview.in_open_rounds == 0
    assert list(preview.rows["id"]) == ["cha-1"]
    review_round, size = open_round(
        session=session,
        actor=lead,
        name="  Change pilot ",
        rubric=load_rubric(),
        filters=task_filters(personas=["Change manager"]),
        k=2,
        members=["e0", "e1"],
        gate={"dimension_min": 3.5, "alpha_min": 0.5},
    )
    session.commit()
    assert (review_round.name, size) == ("Change pilot", 3)  # the name is trimmed
    assert queries.member_usernames(session=session, round_id=review_round.id) == ["e0", "e1"]
    assert review_round.approval == {"dimension_min": 3.5, "alpha_min": 0.5}
    # what it holds is now in an open round: a second round over it would say so
    again = preview_round(session=session, actor=lead, filters=chosen)
    assert again.in_open_rounds == 1
    overview = rounds_overview(session=session, actor=lead).set_index("name")
    assert overview.at["Change pilot", "tasks"] == 3
    assert overview.at["Change pilot", "members"] == 2
    entries = _entries(session, "Change pilot")
    assert [a for a, _ in entries] == ["create", "members", "gate"]
    assert entries[0][1]["tasks"] == 3 and entries[0][1]["k"] == 2
    assert entries[0][1]["selection"] == {"filters": {"personas": ["Change manager"]}}
    assert entries[1][1] == {"added": ["e0", "e1"], "removed": []}
    assert verify_chain(session=session).ok


@pytest.mark.parametrize(
    ("name", "filters", "message"),
    [
        ("", task_filters(), "a round name is 1-128 characters"),
        ("x" * 129, task_filters(), "a round name is 1-128 characters"),
        ("R", task_filters(personas=["Nobody"]), "no task matches these filters"),
        ("R", task_filters(external_ids=["ser-0", "nope", "gone"]), "2 task id\\(s\\) not in"),
        # named and in the catalog, but another filter leaves them out
        ("R", task_filters(external_ids=["ser-0"], statuses=["approved"]), "no task matches"),
        ("R", task_filters(external_ids=[f"t{n}" for n in range(10_001)]), "at most 10,000"),
    ],
)
def test_a_round_that_cannot_be_opened_says_why_and_leaves_nothing(
    session, catalog, name, filters, message
):
    lead, _ = catalog
    with pytest.raises(InvalidInput, match=message):
        open_round(session=session, actor=lead, name=name, rubric=load_rubric(), filters=filters)
    session.rollback()
    assert rounds_overview(session=session, actor=lead).empty


def test_an_unknown_gate_value_undoes_the_whole_round(session, catalog):
    lead, _ = catalog
    with pytest.raises(InvalidInput, match="alpha_min must be between -1 and 1"):
        open_round(
            session=session,
            actor=lead,
            name="R",
            rubric=load_rubric(),
            filters=task_filters(),
            gate={"alpha_min": 3},
        )
    session.rollback()
    assert rounds_overview(session=session, actor=lead).empty


def test_only_leads_manage_rounds(session, catalog):
    _, experts = catalog
    with pytest.raises(PermissionDenied):
        open_round(
            session=session,
            actor=experts[0],
            name="R",
            rubric=load_rubric(),
            filters=task_filters(),
        )
    with pytest.raises(PermissionDenied):
        preview_round(session=session, actor=experts[0], filters=task_filters())


def test_assignments_are_reassigned_released_and_the_round_closed_with_ledger_entries(
    session, catalog
):
    lead, experts = catalog
    open_round(
        session=session,
        actor=lead,
        name="R",
        rubric=load_rubric(),
        filters=task_filters(external_ids=["ser-0"]),
        k=2,
    )
    admit_experts(session=session, actor=lead, round_name="R", usernames=["e0", "e1", "e2"])
    first = claim_next(session=session, actor=experts[0])
    second = claim_next(session=session, actor=experts[1])
    assert claim_next(session=session, actor=experts[2]) is None  # k = 2 places taken
    session.commit()
    open_now = round_assignments(session=session, actor=lead, round_name="R")
    assert sorted(open_now["expert"]) == ["e0", "e1"]

    moved = reassign_to(session=session, actor=lead, assignment_id=first.id, username="e2")
    assert (moved.expert_id, first.status) == (experts[2].id, AssignmentStatus.released)
    with pytest.raises(Conflict, match="e2 already has this task"):
        reassign_to(session=session, actor=lead, assignment_id=second.id, username="e2")
    release_assignment(session=session, actor=lead, assignment_id=second.id)
    with pytest.raises(Conflict, match="released already"):
        release_assignment(session=session, actor=lead, assignment_id=second.id)
    with pytest.raises(NotFound):
        release_assignment(session=session, actor=lead, assignment_id=10_000)
    # the released place is free again, and not handed back to the expert who had it
    assert claim_next(session=session, actor=experts[1]) is None
    with pytest.raises(PermissionDenied, match="not among the experts"):
        claim_next(session=session, actor=experts[3])
    admit_experts(session=session, actor=lead, round_name="R", usernames=["e2", "e3"])
    assert session.get(Assignment, moved.id).status == AssignmentStatus.reserved  # e2 stays
    assert claim_next(session=session, actor=experts[3]) is not None
    close_round(session=session, actor=lead, round_name="R")
    with pytest.raises(Conflict, match="closed already"):
        close_round(session=session, actor=lead, round_name="R")
    session.commit()
    entries = _entries(session, "R")
    assert [a for a, _ in entries] == [
        "create",
        "members",
        "reassign",
        "release",
        "members",
        "close",
    ]
    assert entries[2][1] == {"assignment": first.id, "to": "e2", "new_assignment": moved.id}
    assert entries[4][1] == {"added": ["e3"], "removed": ["e0", "e1"]}
    assert entries[5][1] == {"released": 2}  # e2's and e3's reservations
    assert verify_chain(session=session).ok


def test_many_named_tasks_are_recorded_as_a_count_and_a_digest(session, catalog):
    from itsmreview.ledger.chain import content_digest

    lead, _ = catalog
    more = [
        {
            "id": f"bulk-{n}",
            "title": "B",
            "track": "single-agent",
            "instruction": "x",
            "persona": "Service desk agent",
        }
        for n in range(60)
    ]
    import_tasks(parse_bundle(more, "t"), session=session)
    few = ["ser-0", "ser-1", "cha-0"]
    open_round(
        session=session,
        actor=lead,
        name="Few",
        rubric=load_rubric(),
        filters=task_filters(external_ids=few),
    )
    many = [t["id"] for t in more]
    _, size = open_round(
        session=session,
        actor=lead,
        name="Many",
        rubric=load_rubric(),
        filters=task_filters(external_ids=many),
    )
    assert size == 60
    [(_, listed)] = [e for e in _entries(session, "Few") if e[0] == "create"]
    assert listed["selection"] == {"filters": {"external_ids": few}}
    [(_, digested)] = [e for e in _entries(session, "Many") if e[0] == "create"]
    assert digested["selection"] == {
        "filters": {"external_ids": {"count": 60, "sha256": content_digest(sorted(many))}}
    }


def test_a_model_raters_assignment_is_neither_released_nor_reassigned(session, catalog):
    lead, experts = catalog
    review_round, _ = open_round(
        session=session, actor=lead, name="R", rubric=load_rubric(), filters=task_filters()
    )
    model = Assignment(
        round_id=review_round.id,
        task_version_id=queries.round_task_ids(session=session, round_id=review_round.id)[0],
        expert_id=experts[3].id,
        status=AssignmentStatus.model,
    )
    session.add(model)
    session.flush()
    with pytest.raises(Conflict, match="not an expert's open reservation"):
        release_assignment(session=session, actor=lead, assignment_id=model.id)
    with pytest.raises(Conflict, match="not an expert's open reservation"):
        reassign_to(session=session, actor=lead, assignment_id=model.id, username="e0")
    assert session.get(Assignment, model.id).status == AssignmentStatus.model
