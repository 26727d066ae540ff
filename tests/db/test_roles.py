"""Roles are enforced in the service layer, not only by hiding menu entries."""

import pytest
from itsmreview.accounts.queries import user_by_username
from itsmreview.accounts.service import add_user, users_overview
from itsmreview.catalog.task_list import task_detail, task_filters, task_table
from itsmreview.coverage.overview import log_overview
from itsmreview.demo.loader import load_demo
from itsmreview.errors import PermissionDenied
from itsmreview.exports.service import export_choices, list_exports, preview
from itsmreview.ledger.evidence.service import (
    Reference,
    audit_for,
    ledger_page,
    realism_by_provenance,
    record_source,
    summary_for,
)
from itsmreview.realism.blind_tests import (
    answer,
    blind_report,
    blind_reports,
    close_blind_test,
    create_blind_test,
    next_fragment,
)
from itsmreview.realism.mapping import load_spec
from itsmreview.realism.service import (
    map_transcripts,
    mapped_sequences,
    simulator_report,
    simulators,
    transcript_messages,
    units_to_label,
    waive,
)
from itsmreview.review.assist.labels import propose_turn_labels
from itsmreview.review.consensus.service import (
    advance_phase,
    delphi_report,
    revision_trail,
    start_delphi,
)
from itsmreview.review.dashboard.service import dashboard
from itsmreview.review.gate.item_agreement import round_agreement
from itsmreview.review.models import Assignment
from itsmreview.review.ratings.checks import builtin_results
from itsmreview.review.ratings.completeness import add_activities, report, submit_review
from itsmreview.review.ratings.expert_view import assignment_view, expert_queue, rating_history
from itsmreview.review.ratings.findings import decide_finding
from itsmreview.review.ratings.service import save_draft
from itsmreview.review.repair.service import import_as
from itsmreview.review.rounds.assignment import claim_next, close_round, release_assignment
from itsmreview.review.rounds.service import (
    admit_experts,
    expert_names,
    open_round,
    preview_round,
    round_assignments,
    rounds_overview,
)
from itsmreview.review.rubrics.service import load_rubric

LEAD_ONLY = [
    lambda s, u: dashboard(session=s, actor=u, bootstrap=0),
    lambda s, u: log_overview(session=s, actor=u, name="demo-vinst"),
    lambda s, u: ledger_page(session=s, actor=u),
    lambda s, u: summary_for(session=s, actor=u),
    lambda s, u: audit_for(session=s, actor=u),
    lambda s, u: realism_by_provenance(session=s, actor=u),
    lambda s, u: record_source(
        session=s,
        actor=u,
        about="world:w",
        field_name="f",
        kind="external",
        reference=Reference("r"),
    ),
    lambda s, u: export_choices(session=s, actor=u),
    lambda s, u: preview(session=s, actor=u),
    lambda s, u: list_exports(session=s, actor=u),
    lambda s, u: round_agreement(session=s, actor=u, bootstrap=0),
    lambda s, u: task_table(session=s, actor=u),
    lambda s, u: task_detail(session=s, actor=u, external_id="demo-l1-01-password-reset"),
    lambda s, u: rating_history(session=s, actor=u, external_id="demo-l1-01-password-reset"),
    lambda s, u: close_round(session=s, actor=u, round_name="Demo round 1"),
    lambda s, u: add_activities(session=s, actor=u, persona="x", activities=["y"]),
    lambda s, u: report(session=s, actor=u),
    lambda s, u: import_as("nowhere.json", session=s, actor=u),  # leads import too
    lambda s, u: preview_round(session=s, actor=u, filters=task_filters()),
    lambda s, u: open_round(
        session=s, actor=u, name="X", rubric=load_rubric(), filters=task_filters()
    ),
    lambda s, u: rounds_overview(session=s, actor=u),
    lambda s, u: round_assignments(session=s, actor=u, round_name="Demo round 1"),
    lambda s, u: admit_experts(session=s, actor=u, round_name="Demo round 1", usernames=[]),
    lambda s, u: release_assignment(session=s, actor=u, assignment_id=1),
    lambda s, u: expert_names(session=s, actor=u),
    lambda s, u: simulators(session=s, actor=u),
    lambda s, u: simulator_report(session=s, actor=u, simulator="hand-written demo"),
    lambda s, u: mapped_sequences(session=s, actor=u, simulator="x", spec="y"),
    lambda s, u: transcript_messages(session=s, actor=u, transcript_id=1),
    lambda s, u: map_transcripts(session=s, actor=u, spec=load_spec("demo-itsm")),
    lambda s, u: waive(session=s, actor=u, simulator="hand-written demo", reason="r"),
    lambda s, u: create_blind_test(session=s, actor=u, name="b", simulator="hand-written demo"),
    lambda s, u: blind_report(session=s, actor=u, name="b"),
    lambda s, u: blind_reports(session=s, actor=u, simulator="hand-written demo"),
    lambda s, u: close_blind_test(session=s, actor=u, name="b"),
    lambda s, u: units_to_label(session=s, actor=u, spec="demo-itsm"),
    lambda s, u: propose_turn_labels(session=s, actor=u, spec="demo-itsm"),
    lambda s, u: decide_finding(session=s, actor=u, finding_id=1, confirm=True),
    lambda s, u: builtin_results(session=s, actor=u),
    lambda s, u: start_delphi(session=s, actor=u, round_name="Demo round 1"),
    lambda s, u: advance_phase(session=s, actor=u, round_name="Demo round 1"),
    lambda s, u: delphi_report(session=s, actor=u, round_name="Demo round 1"),
    lambda s, u: revision_trail(session=s, actor=u, round_name="Demo round 1"),
]
ADMIN_ONLY = [
    lambda s, u: users_overview(session=s, actor=u),
    lambda s, u: add_user(session=s, actor=u, username="zed", role="expert"),
]
EXPERT_ONLY = [
    lambda s, u: expert_queue(session=s, actor=u),
    lambda s, u: claim_next(session=s, actor=u),
    lambda s, u: submit_review(
        session=s, actor=u, persona="L2 resolver", captured_ids=[], missing=[]
    ),
    lambda s, u: next_fragment(session=s, actor=u, name="b"),
    lambda s, u: answer(session=s, actor=u, name="b", fragment_id=1, judged="real", confidence=3),
]


@pytest.fixture
def demo(session, tmp_path):
    load_demo(session=session, data_dir=tmp_path, cases=300)
    session.commit()
    return {
        n: user_by_username(session=session, username=n)
        for n in ("lead", "admin", "expert1", "expert2")
    }


def test_every_guarded_service_refuses_the_wrong_role(session, demo):
    for call in LEAD_ONLY + ADMIN_ONLY:
        with pytest.raises(PermissionDenied):
            call(session, demo["expert1"])
    for call in ADMIN_ONLY:
        with pytest.raises(PermissionDenied):
            call(session, demo["lead"])
    for call in EXPERT_ONLY:
        with pytest.raises(PermissionDenied):
            call(session, demo["lead"])


def test_blind_an_expert_never_sees_another_experts_rating(session, demo):
    from itsmreview.review.models import Rating
    from sqlmodel import select

    pairs = [
        (rating, mine)
        for rating in session.exec(
            select(Rating).where(
                Rating.expert_id == demo["expert2"].id, Rating.status == "submitted"
            )
        ).all()
        for mine in session.exec(
            select(Assignment).where(
                Assignment.task_version_id == rating.task_version_id,
                Assignment.expert_id == demo["expert1"].id,
            )
        ).all()
    ]
    assert pairs, "the demo round has tasks both experts rate"
    theirs, shared = pairs[0]
    view = assignment_view(session=session, actor=demo["expert1"], assignment_id=shared.id)
    assert view.own_rating is None or view.own_rating.expert_id == demo["expert1"].id
    assert view.own_rating is None or view.own_rating.id != theirs.id
    their_assignment = session.get(Assignment, theirs.assignment_id)
    with pytest.raises(PermissionDenied):
        assignment_view(session=session, actor=demo["expert1"], assignment_id=their_assignment.id)
    with pytest.raises(PermissionDenied):
        save_draft(
            session=session, actor=demo["expert1"], assignment_id=their_assignment.id, scores={}
        )
