"""Benchmark-authoring evidence on both databases: the 100-point audit as a gate mode, rubric
versions, machine checks, the repair loop, alternative resolutions and the authoring fields."""

import json

import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.catalog.task_list import filter_choices, task_table
from itsmreview.errors import InvalidInput
from itsmreview.ledger.models import LedgerEntry
from itsmreview.ledger.service import verify_chain
from itsmreview.review.dashboard.service import audit_scores
from itsmreview.review.gate.service import recompute_statuses, set_gate
from itsmreview.review.models import Assignment, RoundTask, TaskRepair
from itsmreview.review.ratings import queries as ratings_queries
from itsmreview.review.ratings.checks import import_checks
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.repair import queries as repair_queries
from itsmreview.review.repair.service import (
    AcceptanceOutcome,
    acceptance_outcome,
    decide_proposal,
    feedback,
    import_path,
    propose_resolution,
    write_feedback,
)
from itsmreview.review.rounds import queries as rounds_queries
from itsmreview.review.rounds.service import assign_round, create_round
from itsmreview.review.rubrics.service import RubricDefinition, ensure_rubric, load_rubric
from sqlmodel import select

PASS, WARN, FAIL, BLOCKED = 3, 2, 1, 0
AUDIT = [
    "scenario_realism",
    "task_completeness",
    "instruction_clarity",
    "ground_truth_correctness",
    "evaluator_rubric_alignment",
]


def _task(n: int, **extra) -> dict:
    return {
        "id": f"t{n}",
        "title": f"Task {n}",
        "persona": "L1 service desk agent",
        "track": "single-agent",
        "instruction": f"Do {n}.",
        **extra,
    }


def _people(session, n_experts=3):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    experts = [
        create_user(session=session, username=f"e{i}", role="expert", password="expert-pass")[0]
        for i in range(n_experts)
    ]
    return lead, experts


def _open(session, lead, experts, rubric_name, n_tasks, k=3, name="R"):
    import_tasks(parse_bundle([_task(i) for i in range(n_tasks)], "x"), session=session)
    versions = [v.id for v in session.exec(select(TaskVersion).order_by(TaskVersion.id)).all()]
    rubric = ensure_rubric(load_rubric(rubric_name), session=session)
    review_round = create_round(
        session=session, actor=lead, name=name, rubric=rubric, task_version_ids=versions, k=k
    )
    assign_round(session=session, actor=lead, review_round=review_round, experts=experts)
    return review_round, versions


def _rate(session, expert, version_id, scores, verdict="accept", **more):
    assignment = session.exec(
        select(Assignment).where(
            Assignment.expert_id == expert.id, Assignment.task_version_id == version_id
        )
    ).one()
    return submit_rating(
        session=session,
        actor=expert,
        assignment_id=assignment.id,
        scores=scores,
        verdict=verdict,
        **more,
    )


# The documented fixture (docs/review.md, "The 100-point audit"): three raters, per task the
# codes each gave the five criteria, the score and the decision at the threshold 80.
AUDIT_FIXTURE = [
    # all Pass: 100, admitted
    ([[PASS] * 5, [PASS] * 5, [PASS] * 5], 100.0, "approved"),
    # one Warn per rater on clarity: 100 - 20 x 0.5 = 90, admitted
    ([[PASS, PASS, WARN, PASS, PASS]] * 3, 90.0, "approved"),
    # one rater fails completeness, the others pass: 100 - 20 / 3 = 93.33, admitted
    ([[PASS, FAIL, PASS, PASS, PASS], [PASS] * 5, [PASS] * 5], 93.333333, "approved"),
    # every rater Warns on two criteria: 100 - 2 x 10 = 80, admitted at exactly 80
    ([[WARN, PASS, WARN, PASS, PASS]] * 3, 80.0, "approved"),
    # everyone Warns on clarity and fails ground truth: 100 - 10 - 20 = 70, not admitted
    ([[PASS, PASS, WARN, FAIL, PASS]] * 3, 70.0, "needs_revision"),
    # completeness Blocked for two of three raters: 100 - 40/3 = 86.67, yet not admitted
    ([[PASS, BLOCKED, PASS, PASS, PASS]] * 2 + [[PASS] * 5], 86.666667, "needs_revision"),
]


def test_an_audit_round_gives_the_documented_scores_and_admissions(session):
    lead, experts = _people(session)
    review_round, versions = _open(session, lead, experts, "audit-100", len(AUDIT_FIXTURE))
    set_gate(session=session, actor=lead, round_name="R", changes={"alpha_min": -1.0})
    for version_id, (raters, _, _) in zip(versions, AUDIT_FIXTURE, strict=True):
        for expert, codes in zip(experts, raters, strict=True):
            _rate(session, expert, version_id, dict(zip(AUDIT, codes, strict=True)))
    decisions = recompute_statuses(session=session, round_name="R")
    for version_id, (_, score, status) in zip(versions, AUDIT_FIXTURE, strict=True):
        decision = decisions[version_id]
        assert decision.status == status, decision.reasons
        assert f"score {score:g} of 100" in decision.reasons[0]
    scores = audit_scores(session=session, review_round=review_round)
    # independent: each rater's own sum of weight x credit, averaged over raters
    credit = {PASS: 1.0, WARN: 0.5, FAIL: 0.0, BLOCKED: 0.0}
    for version_id, (raters, _, _) in zip(versions, AUDIT_FIXTURE, strict=True):
        own = [sum(20 * credit[c] for c in codes) for codes in raters]
        assert scores[version_id] == pytest.approx(sum(own) / len(own))
    status_of = {v.id: v.status for v in session.exec(select(TaskVersion)).all()}
    assert [status_of[v] for v in versions] == [s for _, _, s in AUDIT_FIXTURE]


def test_the_threshold_is_configurable_and_the_mode_needs_a_scoring_rubric(session):
    lead, experts = _people(session)
    _open(session, lead, experts, "audit-100", 1)
    version_id = session.exec(select(TaskVersion.id)).one()
    set_gate(session=session, actor=lead, round_name="R", changes={"alpha_min": -1.0})
    for expert in experts:
        _rate(
            session,
            expert,
            version_id,
            dict(zip(AUDIT, [PASS, PASS, WARN, FAIL, PASS], strict=True)),
        )
    assert recompute_statuses(session=session, round_name="R")[version_id].status == (
        "needs_revision"
    )
    _, decisions = set_gate(session=session, actor=lead, round_name="R", changes={"threshold": 70})
    assert decisions[version_id].status == "approved"
    with pytest.raises(InvalidInput, match="threshold must be between 0 and 100"):
        set_gate(session=session, actor=lead, round_name="R", changes={"threshold": 120})
    rubric = ensure_rubric(load_rubric(), session=session)
    create_round(
        session=session,
        actor=lead,
        name="Realism",
        rubric=rubric,
        task_version_ids=[version_id],
        k=1,
    )
    with pytest.raises(InvalidInput, match="needs a rubric with a 100-point scoring"):
        set_gate(session=session, actor=lead, round_name="Realism", changes={"mode": "audit-100"})
    with pytest.raises(InvalidInput, match="mode must be one of median, audit-100"):
        set_gate(session=session, actor=lead, round_name="Realism", changes={"mode": "vibes"})
    with pytest.raises(InvalidInput, match="unknown gate setting"):
        set_gate(session=session, actor=lead, round_name="R", changes={"weights": {}})


def test_a_new_rubric_version_leaves_old_ratings_on_theirs(session):
    lead, experts = _people(session, n_experts=1)
    old = load_rubric()
    old = RubricDefinition.model_validate(
        {
            **old.model_dump(),
            "dimensions": [
                d.model_dump()
                for d in old.dimensions
                if d.key not in ("task_completeness", "spoiler_free")
            ],
        }
    )
    first = ensure_rubric(old, session=session)
    import_tasks(parse_bundle([_task(0)], "x"), session=session)
    version_id = session.exec(select(TaskVersion.id)).one()
    round_one = create_round(
        session=session, actor=lead, name="Old", rubric=first, task_version_ids=[version_id], k=1
    )
    assign_round(session=session, actor=lead, review_round=round_one, experts=experts)
    old_scores = {d.key: 4 for d in old.dimensions}
    rating = _rate(session, experts[0], version_id, old_scores)
    current = ensure_rubric(load_rubric(), session=session)
    assert (first.version, current.version) == (1, 2)
    assert current.name == first.name and rating.rubric_id == first.id
    # the old round still validates against its own version: no new dimension is required
    assignment = session.get(Assignment, rating.assignment_id)
    again = submit_rating(
        session=session,
        actor=experts[0],
        assignment_id=assignment.id,
        scores=old_scores,
        verdict="accept",
    )
    assert again.revision == 2 and again.rubric_id == first.id
    # a round on the new version asks for task completeness and spoiler-freeness
    round_two = create_round(
        session=session, actor=lead, name="New", rubric=current, task_version_ids=[version_id], k=1
    )
    assign_round(session=session, actor=lead, review_round=round_two, experts=experts)
    fresh = session.exec(select(Assignment).where(Assignment.round_id == round_two.id)).one()
    with pytest.raises(InvalidInput, match="Task completeness' is required"):
        submit_rating(
            session=session,
            actor=experts[0],
            assignment_id=fresh.id,
            scores=old_scores,
            verdict="accept",
        )


def _checks_file(tmp_path, records, name="checks.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"checks": records}))
    return path


def test_a_failed_machine_check_blocks_approval_until_it_passes(session, tmp_path):
    lead, experts = _people(session)
    _, versions = _open(session, lead, experts, "itsm-realism", 2)
    set_gate(session=session, actor=lead, round_name="R", changes={"alpha_min": -1.0})
    rubric = load_rubric()
    for version_id in versions:
        for expert in experts:
            _rate(session, expert, version_id, {d.key: 5 for d in rubric.dimensions})
    statuses = recompute_statuses(session=session, round_name="R")
    assert {d.status for d in statuses.values()} == {"approved"}
    failing = _checks_file(
        tmp_path,
        [
            {"task": "t0", "check": "reproducibility", "status": "failed", "summary": "diff"},
            {"task": "t1", "check": "structure", "status": "pass", "tool": "lint 1.0"},
        ],
    )
    report = import_checks(failing, session=session, actor=lead)
    assert report["by_status"] == {"fail": 1, "pass": 1}
    status_of = {v.id: v.status for v in session.exec(select(TaskVersion)).all()}
    assert status_of[versions[0]] == "needs_revision" and status_of[versions[1]] == "approved"
    decisions = recompute_statuses(session=session, round_name="R")
    assert decisions[versions[0]].reasons == ["machine check failed: reproducibility"]
    import_checks(
        _checks_file(tmp_path, [{"task": "t0", "check": "reproducibility", "status": "pass"}]),
        session=session,
        actor=lead,
    )
    assert session.get(TaskVersion, versions[0]).status == "approved"
    session.commit()  # a submit's ledger entries are chained when it commits
    entries = session.exec(
        select(LedgerEntry).where(LedgerEntry.artifact_type == "machine_check")
    ).all()
    assert len(entries) == 3 and {e.source_kind for e in entries} == {"external"}
    assert verify_chain(session=session).ok


def test_a_bad_checks_file_names_every_problem_and_stores_nothing(session, tmp_path):
    lead, experts = _people(session)
    _open(session, lead, experts, "itsm-realism", 1)
    bad = _checks_file(
        tmp_path,
        [
            {"task": "t0", "check": "structure", "status": "maybe"},
            {"task": "t0", "check": "Bad Name", "status": "pass"},
            {"task": "t0", "check": "structure", "status": "pass", "colour": "red"},
        ],
    )
    with pytest.raises(InvalidInput) as raised:
        import_checks(bad, session=session, actor=lead)
    message = str(raised.value)
    assert "$[0].status" in message and "'maybe' is not one of pass, warn, fail, error" in message
    assert "$[1].check" in message and "$[2].colour" in message
    unknown = _checks_file(
        tmp_path,
        [
            {"task": "t0", "check": "structure", "status": "pass"},
            {"task": "nope", "check": "structure", "status": "pass"},
            {"task": "t0", "version": 9, "check": "structure", "status": "pass"},
        ],
    )
    with pytest.raises(InvalidInput) as raised:
        import_checks(unknown, session=session, actor=lead)
    assert "check 2: no task 'nope'" in str(raised.value)
    assert "check 3: task 't0' has no version 9" in str(raised.value)
    assert ratings_queries.checks_of(session=session, task_version_id=1) == []
    huge = _checks_file(tmp_path, [{"task": "t0", "check": "s", "status": "pass"}] * 3, "big.json")
    from itsmreview.review.ratings import checks as checks_module

    limit = checks_module.MAX_CHECKS_BYTES
    checks_module.MAX_CHECKS_BYTES = 40
    try:
        with pytest.raises(InvalidInput, match=r"big.json: the checks file is \d+ bytes, over"):
            import_checks(huge, session=session, actor=lead)
    finally:
        checks_module.MAX_CHECKS_BYTES = limit
    with pytest.raises(Exception, match="needs the lead role"):
        import_checks(unknown, session=session, actor=experts[0])


def test_the_repair_loop_feeds_back_requeues_and_counts(session, tmp_path):
    lead, experts = _people(session)
    review_round, versions = _open(session, lead, experts, "itsm-realism", 2)
    set_gate(session=session, actor=lead, round_name="R", changes={"alpha_min": -1.0})
    rubric = load_rubric()
    low = {d.key: 5 for d in rubric.dimensions} | {"task_completeness": 2}
    for n, expert in enumerate(experts):
        rating = _rate(
            session,
            expert,
            versions[0],
            low,
            verdict="revise",
            comment=f"The CMDB record is missing <b>{n}</b>" if n == 0 else "",
        )
        _rate(session, expert, versions[1], {d.key: 5 for d in rubric.dimensions})
    propose_resolution(
        session=session,
        actor=experts[2],
        assignment_id=rating.assignment_id,
        description="Closing as a duplicate of the parent incident is also right.",
        changes=[{"entity": "incident", "key": "INC1", "change": "changed", "after": {"s": 7}}],
    )
    recompute_statuses(session=session, round_name="R")
    items = feedback(session=session, actor=lead, round_name="R")
    assert [i["task"] for i in items] == ["t0"]
    item = items[0]
    assert item["failing_criteria"][0]["criterion"] == "task_completeness"
    assert item["failing_criteria"][0]["median"] == 2
    assert "median task_completeness is 2, below 4" in item["reasons"]
    assert item["comments"] == [{"comment": "The CMDB record is missing <b>0</b>", "flags": []}]
    assert item["proposed_resolutions"][0]["status"] == "proposed"
    assert item["repair_iterations"] == 0
    assert "e0" not in json.dumps(item)  # the author does not learn who rated
    jsonl, markdown = write_feedback(items, tmp_path / "feedback")
    assert json.loads(jsonl.read_text().splitlines()[0])["task"] == "t0"
    text = markdown.read_text()
    assert "missing \\<b\\>0\\</b\\>" in text and "Task completeness (median 2, needs 4)" in text
    # the author fixes the task: the new version goes back into the round by itself
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps([_task(0, environment="CMDB: the printer's CI record.")]))
    result = import_path(fixed, session=session, actor_id=lead.id)
    assert result.requeued == ["t0@v2 -> R"]
    task = session.exec(select(Task).where(Task.external_id == "t0")).one()
    newest = session.exec(
        select(TaskVersion).where(TaskVersion.task_id == task.id, TaskVersion.version == 2)
    ).one()
    assert newest.status == "in_review" and task.status == "in_review"
    assert session.exec(
        select(RoundTask).where(
            RoundTask.round_id == review_round.id, RoundTask.task_version_id == newest.id
        )
    ).one()
    repairs = session.exec(select(TaskRepair)).all()
    assert [(r.iteration, r.from_version_id, r.to_version_id) for r in repairs] == [
        (1, versions[0], newest.id)
    ]
    assert repair_queries.repair_counts(session=session, task_ids=[task.id, task.id + 1]) == {
        task.id: 1
    }
    # importing the same file again changes nothing and requeues nothing
    assert import_path(fixed, session=session, actor_id=lead.id).requeued == []
    # a dry run never requeues
    fixed.write_text(json.dumps([_task(0, environment="Another fix.")]))
    assert import_path(fixed, session=session, dry_run=True).requeued == []


def test_a_lead_accepts_a_proposed_resolution_into_the_next_version(session):
    lead, experts = _people(session)
    _, versions = _open(session, lead, experts, "itsm-realism", 1)
    assignment = session.exec(select(Assignment).where(Assignment.expert_id == experts[0].id)).one()
    with pytest.raises(InvalidInput, match="describe the other acceptable end state"):
        propose_resolution(
            session=session, actor=experts[0], assignment_id=assignment.id, description="  "
        )
    with pytest.raises(InvalidInput, match="record change"):
        propose_resolution(
            session=session,
            actor=experts[0],
            assignment_id=assignment.id,
            description="x",
            changes=[{"entity": "incident", "change": "added", "before": {"a": 1}}],
        )
    first = propose_resolution(
        session=session, actor=experts[0], assignment_id=assignment.id, description="Resolve."
    )
    second = propose_resolution(
        session=session, actor=experts[0], assignment_id=assignment.id, description="No."
    )
    decide_proposal(session=session, actor=lead, proposal_id=second.id, accept=False)
    # told before it is done: version 2, in review in the round
    told = acceptance_outcome(session=session, actor=lead, proposal_id=first.id)
    assert told == AcceptanceOutcome(task="t0", version=1, new_version=2, rounds=["R"])
    decide_proposal(session=session, actor=lead, proposal_id=first.id, accept=True, reason="ok")
    task = session.exec(select(Task)).one()
    newest = session.exec(select(TaskVersion).where(TaskVersion.version == 2)).one()
    assert newest.extra["alternatives"] == [
        {"id": f"proposal-{first.id}", "description": "Resolve.", "changes": [], "source": "expert"}
    ]
    # the task was in review: its new version carries the review on, in the round
    assert first.accepted_version_id == newest.id
    assert (newest.status, task.status) == ("in_review", "in_review")
    assert repair_queries.round_task_row(
        session=session, round_id=assignment.round_id, task_version_id=newest.id
    )
    frame = repair_queries.proposals_frame(session=session)
    assert dict(zip(frame["id"], frame["status"], strict=True)) == {
        first.id: "accepted",
        second.id: "dismissed",
    }
    with pytest.raises(Exception, match="accepted already"):
        decide_proposal(session=session, actor=lead, proposal_id=first.id, accept=True)


def test_accepting_after_the_round_closed_is_told_to_make_a_draft_and_makes_one(session):
    from itsmreview.review.rounds.assignment import close_round

    lead, experts = _people(session)
    _open(session, lead, experts, "itsm-realism", 1)
    assignment = session.exec(select(Assignment).where(Assignment.expert_id == experts[0].id)).one()
    proposal = propose_resolution(
        session=session, actor=experts[0], assignment_id=assignment.id, description="Resolve."
    )
    close_round(session=session, actor=lead, round_name="R")
    told = acceptance_outcome(session=session, actor=lead, proposal_id=proposal.id)
    assert told == AcceptanceOutcome(task="t0", version=1, new_version=2, rounds=[])
    decide_proposal(session=session, actor=lead, proposal_id=proposal.id, accept=True)
    newest = session.exec(select(TaskVersion).where(TaskVersion.version == 2)).one()
    assert newest.status == "draft"
    assert not session.exec(select(RoundTask).where(RoundTask.task_version_id == newest.id)).all()
    with pytest.raises(Exception, match="accepted already"):
        acceptance_outcome(session=session, actor=lead, proposal_id=proposal.id)


def test_difficulty_user_type_and_backbone_are_stored_for_filters(session):
    tasks = [
        _task(0, difficulty="L3", user_type="Entangled requests"),
        _task(
            1,
            difficulty="easy",
            transcripts=[
                {
                    "id": "r1",
                    "simulator": {"user": {"backbone": "gpt-4.1"}, "user_type": "rookie"},
                    "messages": [{"role": "user", "content": "hi"}],
                }
            ],
        ),
        _task(2),
    ]
    import_tasks(parse_bundle(tasks, "x"), session=session)
    stored = {
        t.external_id: (t.difficulty, t.user_type, t.simulator_backbone)
        for t in session.exec(select(Task)).all()
    }
    assert stored == {
        "t0": ("hard", "entangled_requests", None),
        "t1": ("easy", "rookie", "gpt-4.1"),
        "t2": (None, None, None),
    }
    with pytest.raises(ValueError, match="difficulty 'L9' is not one of"):
        parse_bundle([_task(3, difficulty="L9")], "x")
    lead, _ = _people(session, n_experts=0)
    hard = task_table(session=session, actor=lead, difficulties=["hard", "easy"])
    assert sorted(hard.rows["id"]) == ["t0", "t1"] and hard.matching == 2
    by_backbone = task_table(session=session, actor=lead, backbones=["gpt-4.1"])
    assert by_backbone.rows["id"].tolist() == ["t1"]
    assert by_backbone.rows["simulator_backbone"].tolist() == ["gpt-4.1"]
    assert task_table(session=session, actor=lead, user_types=["rookie"]).matching == 1
    choices = filter_choices(session=session, actor=lead)
    assert (choices["difficulty"], choices["user_type"]) == (
        ["easy", "hard"],
        ["entangled_requests", "rookie"],
    )


def test_the_cli_runs_an_audit_round_from_import_to_feedback(configured, tmp_path):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.cli import app
    from itsmreview.db import session_scope
    from typer.testing import CliRunner

    runner = CliRunner()

    def run(*args):
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    bundle = tmp_path / "tasks.json"
    bundle.write_text(json.dumps([_task(0, difficulty="L2"), _task(1, difficulty="L3")]))
    run("tasks", "import", str(bundle))
    for name in ("e0", "e1", "e2"):
        run("users", "add", name, "--role", "expert")
    run("round", "create", "Audit", "--rubric", "audit-100", "--k", "3")
    shown = json.loads(run("round", "gate", "Audit", "--json"))
    assert (shown["mode"], shown["threshold"]) == ("audit-100", 80.0)
    assert shown["audit"]["weights"]["task_completeness"] == 20.0
    run("round", "gate", "Audit", "--alpha-min", "-1")
    with session_scope() as session:
        experts = [user_by_username(session=session, username=f"e{i}") for i in range(3)]
        lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
        review_round = rounds_queries.round_by_name(session=session, name="Audit")
        assign_round(session=session, actor=lead, review_round=review_round, experts=experts)
        versions = [v.id for v in session.exec(select(TaskVersion).order_by(TaskVersion.id))]
        for expert in experts:
            for version_id, codes in zip(
                versions, ([PASS] * 5, [PASS, PASS, WARN, FAIL, PASS]), strict=True
            ):
                _rate(session, expert, version_id, dict(zip(AUDIT, codes, strict=True)))
    gate = json.loads(run("round", "gate", "Audit", "--threshold", "75", "--json"))
    assert gate["statuses"] == {"approved": 1, "needs_revision": 1}
    listed = json.loads(run("tasks", "list", "--difficulty", "L3", "--json"))
    assert [(t["external_id"], t["status"]) for t in listed] == [("t1", "needs_revision")]
    checks = tmp_path / "checks.jsonl"
    checks.write_text(json.dumps({"task": "t0", "check": "structure", "status": "error"}) + "\n")
    out = run("checks", "import", str(checks))
    assert "imported 1 result(s): 1 error" in out and "Audit:" in out and "needs_revision" in out
    out = run("round", "feedback", "Audit", str(tmp_path / "fb"))
    assert "2 task(s) need revision" in out
    lines = [json.loads(line) for line in (tmp_path / "fb.jsonl").read_text().splitlines()]
    assert lines[0]["failed_checks"] == [{"check": "structure", "status": "error", "summary": ""}]
    assert "score 70 of 100, below the threshold 75" in lines[1]["reasons"]
    assert {c["criterion"] for c in lines[1]["failing_criteria"]} == {
        "instruction_clarity",
        "ground_truth_correctness",
    }
    assert json.loads(run("proposals", "list", "--json")) == []
    failed = runner.invoke(app, ["checks", "import", str(tmp_path / "missing.json")])
    assert failed.exit_code == 1 and "missing.json" in failed.output


def test_feedback_markdown_shows_an_imported_check_summary_as_written():
    from itsmreview.review.repair.service import feedback_markdown

    item = {
        "task": "t0",
        "title": "T",
        "version": 1,
        "round": "R",
        "repair_iterations": 0,
        "reasons": ["machine check failed: structure"],
        "failing_criteria": [],
        "failed_checks": [
            {"check": "structure", "status": "fail", "summary": "<img src=x>\n# not a heading"}
        ],
        "comments": [],
        "turn_notes": [],
        "proposed_resolutions": [],
    }
    text = feedback_markdown([item])
    assert "- structure (fail): \\<img src=x\\> \\# not a heading" in text
    assert "<img" not in text.replace("\\<img", "")


@pytest.mark.parametrize("one_by_one", [500, 0], ids=["per-task", "whole-round"])
def test_checks_re_decide_the_same_one_task_at_a_time_or_in_one_pass(
    session, tmp_path, monkeypatch, one_by_one
):
    from itsmreview.review.ratings import checks as checks_module

    monkeypatch.setattr(checks_module, "REDECIDE_ONE_BY_ONE", one_by_one)
    lead, experts = _people(session)
    _, versions = _open(session, lead, experts, "itsm-realism", 3)
    report = import_checks(
        _checks_file(
            tmp_path,
            [
                {"task": "t0", "check": "structure", "status": "fail"},
                {"task": "t0", "check": "verifiability", "status": "pass"},
                {"task": "t2", "check": "structure", "status": "pass"},
            ],
        ),
        session=session,
        actor=lead,
    )
    assert report["redecided"] == {
        f"R:{versions[0]}": "needs_revision",
        f"R:{versions[2]}": "pending",
    }
    statuses = [session.get(TaskVersion, v).status for v in versions]
    # the whole-round pass also stamps the unchecked, unrated task pending
    assert statuses[0] == "needs_revision" and set(statuses[1:]) <= {"in_review", "pending"}
