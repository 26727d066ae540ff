import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.errors import InvalidInput, PermissionDenied
from itsmreview.review.ratings.completeness import (
    activities_of,
    add_activities,
    checklist,
    remove_activity,
    report,
    submit_review,
)


def test_completeness_report_counts_majorities_and_missing(session):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    experts = [
        create_user(session=session, username=f"e{i}", role="expert", password="expert-pass")[0]
        for i in range(3)
    ]
    import_tasks(
        parse_bundle(
            [
                {
                    "id": "t",
                    "title": "T",
                    "persona": "L2 resolver",
                    "track": "single-agent",
                    "instruction": "x",
                }
            ],
            "t",
        ),
        session=session,
    )
    assert (
        add_activities(
            session=session,
            actor=lead,
            persona="L2 resolver",
            activities=["Diagnose", "Vendor case", "Escalate", "Diagnose"],
        )
        == 3
    )
    with pytest.raises(PermissionDenied):
        add_activities(session=session, actor=experts[0], persona="L2 resolver", activities=["x"])
    ids = [a.id for a in activities_of(session, "L2 resolver")]
    submit_review(
        session=session,
        actor=experts[0],
        persona="L2 resolver",
        captured_ids=ids[:2],
        missing=["Patch a server"],
    )
    submit_review(
        session=session,
        actor=experts[1],
        persona="L2 resolver",
        captured_ids=ids[:1],
        missing=["Patch a server", "Restore a backup"],
    )
    submit_review(
        session=session,
        actor=experts[2],
        persona="L2 resolver",
        captured_ids=[ids[0], ids[2]],
        missing=[],
    )
    with pytest.raises(InvalidInput, match="not on the list"):
        submit_review(
            session=session,
            actor=experts[2],
            persona="L2 resolver",
            captured_ids=[99999],
            missing=[],
        )
    (persona_report,) = report(session=session, actor=lead)
    shares = dict(
        zip(persona_report.activities["activity"], persona_report.activities["share"], strict=True)
    )
    assert shares == pytest.approx({"Diagnose": 1.0, "Vendor case": 1 / 3, "Escalate": 1 / 3})
    assert persona_report.share_captured == pytest.approx(1 / 3)
    missing = dict(
        zip(persona_report.missing["activity"], persona_report.missing["experts"], strict=True)
    )
    assert missing == {"Patch a server": 2, "Restore a backup": 1}
    # a new judgement replaces the expert's earlier one
    submit_review(
        session=session, actor=experts[1], persona="L2 resolver", captured_ids=ids, missing=[]
    )
    (persona_report,) = report(session=session, actor=lead)
    assert persona_report.experts == 3
    assert persona_report.share_captured == pytest.approx(1.0)
    remove_activity(session=session, actor=lead, activity_id=ids[2])
    assert len(checklist(session=session, actor=experts[0], persona="L2 resolver").activities) == 2


def test_experts_never_see_a_tasks_review_status(session):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    expert, _ = create_user(session=session, username="e1", role="expert", password="expert-pass")
    task = {"id": "t", "title": "T", "persona": "P", "track": "single-agent", "instruction": "x"}
    import_tasks(parse_bundle([task], "t"), session=session)
    seen_by_expert = checklist(session=session, actor=expert, persona="P").tasks
    seen_by_lead = checklist(session=session, actor=lead, persona="P").tasks
    assert "status" not in seen_by_expert.columns
    assert list(seen_by_expert["id"]) == ["t"]
    assert "status" in seen_by_lead.columns
