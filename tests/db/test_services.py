import pytest
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import add_user, authenticate, create_user, require_role
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.errors import Conflict, InvalidInput, PermissionDenied
from itsmreview.ledger.models import LedgerEntry
from itsmreview.ledger.service import append_entry, verify_chain
from itsmreview.review.models import Assignment, Rating
from itsmreview.review.ratings.expert_view import assignment_view
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.rounds.service import assign_round, create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from sqlmodel import select, text

TASK = {
    "id": "t{n}",
    "title": "Task {n}",
    "persona": "L1 service desk agent",
    "track": "single-agent",
    "instruction": "Do {n}.",
}


def _tasks(n):
    return parse_bundle([{k: v.format(n=i) for k, v in TASK.items()} for i in range(n)], "x")


def test_users_passwords_and_roles(session):
    user, generated = create_user(session=session, username="eva", role="expert")
    assert generated and len(generated) >= 12
    assert authenticate(session=session, username="EVA ", password=generated).id == user.id
    with pytest.raises(PermissionDenied):
        authenticate(session=session, username="eva", password="wrong-password")
    with pytest.raises(Conflict, match="exists already"):
        create_user(session=session, username="eva", role="lead", password="long-enough")
    with pytest.raises(InvalidInput, match="role 'boss' is not one of expert, lead, admin"):
        create_user(session=session, username="bob", role="boss")
    with pytest.raises(InvalidInput, match="at least 8"):
        create_user(session=session, username="bob", role="lead", password="short")
    with pytest.raises(InvalidInput, match="username 'Bob Smith' is not valid"):
        create_user(session=session, username="Bob Smith", role="lead")
    with pytest.raises(PermissionDenied, match="needs the admin role"):
        add_user(session=session, actor=user, username="mallory", role="admin")
    assert require_role(user, Role.expert) is user


def _imports(session, n: int, payload=lambda i: {}) -> None:
    for i in range(n):
        append_entry(
            session=session,
            artifact_type="task",
            artifact_id=f"t{i}",
            action="import",
            source_kind="expert",
            payload=payload(i),
        )
    session.commit()


def test_ledger_detects_tampering(session):
    _imports(session, 5, lambda i: {"i": i, "tags": ("a", "b")})
    assert verify_chain(session=session).ok
    session.exec(text("UPDATE ledger_entries SET reference = 'forged' WHERE seq = 3"))
    session.commit()
    session.expire_all()
    report = verify_chain(session=session)
    assert (report.ok, report.broken_at) == (False, 3)
    with pytest.raises(ValueError, match="source_kind 'rumour'"):
        append_entry(
            session=session, artifact_type="x", artifact_id="1", action="a", source_kind="rumour"
        )


def test_entries_made_on_a_whole_second_or_a_half_verify(session, monkeypatch):
    """Creation times whose microseconds are zero or end in zeros (which PostgreSQL prints
    trimmed: '00:00:00', '00:00:00.5') hash as they were written."""
    from datetime import UTC, datetime

    import itsmreview.ledger.service as ledger_service

    times = iter(
        datetime(2026, 11, 1, 0, 0, second, micro, tzinfo=UTC)
        for second, micro in ((0, 0), (0, 500_000), (1, 120), (2, 999_999))
    )
    monkeypatch.setattr(ledger_service, "utcnow", lambda: next(times))
    _imports(session, 4)
    report = verify_chain(session=session)
    assert (report.ok, report.entries) == (True, 4)


def test_task_import_is_versioned_and_idempotent(session):
    first = import_tasks(_tasks(3), session=session)
    assert len(first.created) == 3
    again = import_tasks(_tasks(3), session=session)
    assert again.unchanged == ["t0", "t1", "t2"] and not again.created
    changed = parse_bundle(
        [{**{k: v.format(n=0) for k, v in TASK.items()}, "instruction": "Do it differently."}], "x"
    )
    assert import_tasks(changed, session=session).new_versions == ["t0"]
    provenance = session.exec(select(LedgerEntry).where(LedgerEntry.artifact_id == "t0@v2")).all()
    assert provenance


def _round(session, n_tasks=4, n_experts=4, k=3):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    experts = [
        create_user(session=session, username=f"e{i}", role="expert", password="expert-pass")[0]
        for i in range(n_experts)
    ]
    import_tasks(_tasks(n_tasks), session=session)
    from itsmreview.catalog.models import TaskVersion

    versions = [v.id for v in session.exec(select(TaskVersion).order_by(TaskVersion.id)).all()]
    rubric = ensure_rubric(load_rubric(), session=session)
    review_round = create_round(
        session=session, actor=lead, name="R1", rubric=rubric, task_version_ids=versions, k=k
    )
    assign_round(session=session, actor=lead, review_round=review_round, experts=experts)
    return lead, experts, review_round


def test_assignment_gives_each_task_k_experts_with_balanced_load(session):
    lead, experts, review_round = _round(session, n_tasks=8, n_experts=5, k=3)
    rows = session.exec(select(Assignment)).all()
    per_task = {}
    per_expert = {}
    for a in rows:
        per_task.setdefault(a.task_version_id, set()).add(a.expert_id)
        per_expert[a.expert_id] = per_expert.get(a.expert_id, 0) + 1
    assert all(len(e) == 3 for e in per_task.values())
    assert max(per_expert.values()) - min(per_expert.values()) <= 1
    assert (
        assign_round(session=session, actor=lead, review_round=review_round, experts=experts) == 0
    )
    with pytest.raises(PermissionDenied):
        create_round(
            session=session, actor=experts[0], name="R2", rubric=None, task_version_ids=[], k=1
        )


def test_rating_revisions_permissions_and_validation(session):
    _, experts, _ = _round(session)
    mine = session.exec(select(Assignment).where(Assignment.expert_id == experts[0].id)).first()
    scores = {d.key: 4 for d in load_rubric().dimensions}
    with pytest.raises(InvalidInput, match="outside the scale 1..5"):
        submit_rating(
            session=session,
            actor=experts[0],
            assignment_id=mine.id,
            scores={**scores, "persona_fit": 7},
            verdict="accept",
        )
    with pytest.raises(InvalidInput, match="'Scenario realism' is required"):
        submit_rating(
            session=session,
            actor=experts[0],
            assignment_id=mine.id,
            scores={k: v for k, v in scores.items() if k != "scenario_realism"},
            verdict="accept",
        )
    other = next(e for e in experts if e.id != mine.expert_id)
    with pytest.raises(PermissionDenied, match="assigned to another expert"):
        submit_rating(
            session=session, actor=other, assignment_id=mine.id, scores=scores, verdict="accept"
        )
    with pytest.raises(PermissionDenied):
        assignment_view(session=session, actor=other, assignment_id=mine.id)
    first = submit_rating(
        session=session, actor=experts[0], assignment_id=mine.id, scores=scores, verdict="accept"
    )
    second = submit_rating(
        session=session,
        actor=experts[0],
        assignment_id=mine.id,
        scores={**scores, "persona_fit": 2},
        verdict="revise",
        flags=["ambiguous_instruction"],
    )
    session.commit()
    ratings = session.exec(
        select(Rating).where(Rating.assignment_id == mine.id).order_by(Rating.revision)
    ).all()
    assert [(r.revision, r.is_current) for r in ratings] == [(1, False), (2, True)]
    assert (first.id, second.id) == (ratings[0].id, ratings[1].id)
    view = assignment_view(session=session, actor=experts[0], assignment_id=mine.id)
    assert view.own_scores["persona_fit"] == 2 and view.own_rating.verdict == "revise"


def test_single_sign_on_identities_map_to_local_accounts_by_email(session):
    from itsmreview.accounts.service import user_for_identity

    user, _ = create_user(
        session=session, username="maria", role="expert", email=" Maria@Example.org "
    )
    assert user.email == "maria@example.org"
    assert user_for_identity(session=session, email="MARIA@example.org").id == user.id
    with pytest.raises(PermissionDenied, match="no itsmreview account for x@example.org"):
        user_for_identity(session=session, email="x@example.org")
    with pytest.raises(Conflict, match="another user has the e-mail address"):
        create_user(session=session, username="maria2", role="lead", email="maria@example.org")
    with pytest.raises(InvalidInput, match="is not an e-mail address"):
        create_user(session=session, username="bob", role="lead", email="bob")


def test_a_new_round_gets_each_tasks_uncovered_log_weight_as_priority(session, tmp_path):
    """create_round (bulk insert, priorities loaded through a temporary table): each task's
    priority is the summed share of cases of its declared variants that no approved task
    covers, counted here from the log's variants by hand; tasks without a log get 0."""
    from itsmreview.catalog.models import TaskVersion
    from itsmreview.catalog.queries import latest_version_ids
    from itsmreview.coverage import queries as coverage_queries
    from itsmreview.coverage.report import coverage_report
    from itsmreview.coverage.variants import sequence_key
    from itsmreview.demo.loader import load_demo
    from itsmreview.review.models import RoundTask

    load_demo(session=session, data_dir=tmp_path, cases=300)
    lead = session.exec(select(User).where(User.username == "lead")).one()
    rubric = ensure_rubric(load_rubric(), session=session)
    review_round = create_round(
        session=session,
        actor=lead,
        name="everything",
        rubric=rubric,
        task_version_ids=latest_version_ids(session=session),
    )
    stored = dict(
        session.exec(
            select(RoundTask.task_version_id, RoundTask.priority).where(
                RoundTask.round_id == review_round.id
            )
        ).all()
    )
    expected = {}
    for version in session.exec(select(TaskVersion).where(TaskVersion.id.in_(list(stored)))):
        source = version.source or {}
        if not source.get("log") or not source.get("variants"):
            expected[version.id] = 0.0
            continue
        log = coverage_queries.latest_log(session=session, name=source["log"])
        frame = coverage_queries.variants_frame(session=session, log_id=log.id)
        shares = {k: s for k, s in zip(frame["sequence_key"], frame["share"], strict=True)}
        report, _ = coverage_report(session=session, log_name=source["log"], task_filter="approved")
        keys = {sequence_key(v) for v in source["variants"]}
        expected[version.id] = sum(shares.get(k, 0.0) for k in keys - report.declared_keys)
    assert stored.keys() == expected.keys()
    assert stored == pytest.approx(expected)
    assert any(p > 0 for p in stored.values()) and any(p == 0 for p in stored.values())
