from itsmreview.catalog.models import Task, TaskVersion, Transcript
from itsmreview.coverage.models import EventLog, LogVariant
from itsmreview.db import session_scope
from itsmreview.demo.loader import load_demo
from itsmreview.ledger.service import verify_chain
from itsmreview.review.models import Assignment, Rating, RatingScore, ReviewRound
from itsmreview.schema import metadata
from sqlalchemy import func
from sqlmodel import select


def _counts(engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            name: connection.execute(select(func.count()).select_from(table)).scalar_one()
            for name, table in metadata.tables.items()
        }


def test_demo_loads_and_a_second_run_changes_nothing(engine, tmp_path):
    with session_scope(engine) as session:
        first = load_demo(session=session, data_dir=tmp_path, cases=600)
    counts = _counts(engine)
    with session_scope(engine) as session:
        second = load_demo(session=session, data_dir=tmp_path, cases=600)
    assert _counts(engine) == counts
    assert first.log_created and not second.log_created
    assert first.tasks_created >= 24 and second.tasks_created == 0
    assert counts["users"] == 7
    assert counts["event_logs"] == 2  # the BPI 2013-shaped log and BPI 2014's four tables
    assert counts["team_mappings"] == 1
    with session_scope(engine) as session:
        assert verify_chain(session=session).ok
        tasks = session.exec(select(Task)).all()
        assert len({t.persona for t in tasks}) >= 4
        assert {t.track for t in tasks} == {"single-agent", "simulated-actors", "multi-agent-team"}
        versions = session.exec(select(TaskVersion)).all()
        provenance_kinds = {p["source"] for v in versions for p in v.provenance}
        assert provenance_kinds == {"logs", "external", "expert"}
        in_log = {}
        for log in session.exec(select(EventLog)).all():
            in_log[log.name] = {
                tuple(s)
                for s in session.exec(
                    select(LogVariant.sequence).where(
                        LogVariant.log_id == log.id, LogVariant.level == "raw"
                    )
                ).all()
            }
        assert {v.source["log"] for v in versions} == {"demo-vinst", "rabobank-demo"}
        for version in versions:
            for sequence in version.source["variants"]:
                assert tuple(sequence) in in_log[version.source["log"]]
        transcripts = session.exec(select(Transcript)).all()
        assert len(transcripts) == len(versions)
        roles = {m["role"] for t in transcripts for m in t.messages}
        assert roles == {"system", "user", "agent", "colleague", "tool"}
        round_ = session.exec(select(ReviewRound).where(ReviewRound.name == "Demo round 1")).one()
        per_task = session.exec(
            select(Assignment.task_version_id, func.count())
            .where(Assignment.round_id == round_.id)
            .group_by(Assignment.task_version_id)
        ).all()
        assert all(count == round_.k for _, count in per_task)
        submitted = session.exec(
            select(func.count()).select_from(Rating).where(Rating.round_id == round_.id)
        ).one()
        assert 0 < submitted < len(per_task) * round_.k, "the demo round is partly finished"
        assert session.exec(select(func.count()).select_from(RatingScore)).one() >= submitted * 5


def test_the_demo_has_drafts_a_released_round_and_covered_bpi2014_outcomes(engine, tmp_path):
    """Issue 35: the demo shows what a lead does next (drafts no round holds), a released
    round (closed, its approved tasks exported with a card that calls the log synthetic) and
    BPI 2014 tasks whose case outcomes the approved set covers."""
    from itsmreview.catalog.models import TaskStatus
    from itsmreview.coverage.report import coverage_report
    from itsmreview.demo.loader import DEMO_PILOT_ROUND, DEMO_RELEASE
    from itsmreview.exports.models import Export
    from itsmreview.review.models import RoundTask

    with session_scope(engine) as session:
        load_demo(session=session, data_dir=tmp_path, cases=600)
    with session_scope(engine) as session:
        held = set(session.exec(select(RoundTask.task_version_id)).all())
        drafts = session.exec(select(Task).where(Task.status == TaskStatus.draft)).all()
        assert len(drafts) >= 3
        draft_versions = session.exec(
            select(TaskVersion.id).where(TaskVersion.task_id.in_([t.id for t in drafts]))
        ).all()
        assert set(draft_versions).isdisjoint(held)
        pilot = session.exec(select(ReviewRound).where(ReviewRound.name == DEMO_PILOT_ROUND)).one()
        assert pilot.status == "closed"
        export = session.exec(select(Export).where(Export.name == DEMO_RELEASE)).one()
        statuses = {
            t.external_id: t.status
            for t in session.exec(select(Task).where(Task.external_id.like("demo-rb-%"))).all()
        }
        approved = sorted(k for k, v in statuses.items() if v == TaskStatus.approved)
        assert export.task_count == len(approved) >= 3
        assert {TaskStatus.needs_revision, TaskStatus.rejected} <= set(statuses.values())
        report, _ = coverage_report(
            session=session, log_name="rabobank-demo", task_filter="approved"
        )
        assert report.outcomes["closure_code"]["coverage"] > 0
    card = tmp_path / "exports" / DEMO_RELEASE / "tasks" / "hf" / "README.md"
    assert "derived from synthetic event logs" in card.read_text(encoding="utf-8")
