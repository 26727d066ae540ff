"""Fixtures of the export tests (test_exports.py, test_export_peers.py): a reviewed round of
native, Harbor and tau2 tasks."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from itsmreview.accounts.service import create_user
from itsmreview.catalog.importing import import_path
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.coverage import queries as coverage_queries
from itsmreview.coverage.service import import_log, latest_log
from itsmreview.coverage.synthetic import generate_log, write_csv
from itsmreview.db import session_scope
from itsmreview.exports.service import export_set
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.rounds.assignment import claim_next
from itsmreview.review.rounds.service import create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from sqlmodel import select

AT = datetime(2026, 12, 1, tzinfo=UTC)
TAU2_TASK = {
    "id": "tau2-1",
    "description": {"purpose": "Mobile data does not work abroad"},
    "user_scenario": {"instructions": {"reason_for_call": "No data in Spain", "domain": "telecom"}},
    "initial_state": {"roaming": False},
    "evaluation_criteria": {
        "actions": [{"name": "enable_roaming", "arguments": {"line": "L1"}}],
        "env_assertions": [],
    },
}


def _harbor(root: Path) -> Path:
    folder = root / "harbor-reset"
    for part in ("tests", "solution", "environment"):
        (folder / part).mkdir(parents=True)
    (folder / "task.toml").write_text('[task]\nname = "harbor-reset"\n')
    (folder / "instruction.md").write_text("Reset the VPN token of user 4711.\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/sh\ngrep -q reset /state\n")
    (folder / "solution" / "solve.sh").write_text("#!/bin/sh\necho reset > /state\n")
    (folder / "environment" / "Dockerfile").write_text("FROM alpine:3.20\n")
    return folder


def _rate(session, experts, scores_of):
    """Each expert claims and rates every task; scores_of(expert, version) -> (score, verdict)."""
    rubric = load_rubric()
    for expert in experts:
        while (assignment := claim_next(session=session, actor=expert)) is not None:
            score, verdict = scores_of(expert.username, assignment.task_version_id)
            submit_rating(
                session=session,
                actor=expert,
                assignment_id=assignment.id,
                scores={d.key: score for d in rubric.dimensions},
                verdict=verdict,
            )


@pytest.fixture
def reviewed(configured, tmp_path):
    """A round of five tasks rated by three experts who nearly agree (e3 rates native-b one
    point higher): native-a, native-b, harbor and tau2 approved; native-bad rejected;
    native-a then re-imported as an unreviewed v2."""
    log_path = write_csv(generate_log(150, seed=3), tmp_path / "synth.csv")
    with session_scope() as session:
        lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
        experts = [
            create_user(session=session, username=f"e{i}", role="expert", password="expert-pass")[0]
            for i in range(1, 4)
        ]
        log = import_log(log_path, session=session, preset="bpi2013", name="synth").log
        variants = coverage_queries.variants_frame(session=session, log_id=log.id)
        sequence = list(variants["sequence"].iloc[0])
    source = {"log": "synth", "variants": [sequence]}
    natives = [
        {
            "id": f"native-{n}",
            "title": f"Task {n}",
            "persona": "L1 service desk agent",
            "track": "single-agent",
            "instruction": f"Handle incident {n}",
            "source": source,
        }
        for n in ("a", "b", "bad")
    ]
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps({"tasks": natives}))
    tau2_file = tmp_path / "tau2.json"
    tau2_file.write_text(json.dumps([TAU2_TASK]))
    with session_scope() as session:
        import_path(bundle, session=session)
        import_path(_harbor(tmp_path / "harbor"), session=session)
        import_path(tau2_file, session=session)
        versions = {
            t.external_id: v.id
            for t, v in session.exec(select(Task, TaskVersion).join(TaskVersion)).all()
        }
        rubric = ensure_rubric(load_rubric(), session=session)
        create_round(
            session=session,
            actor=lead,
            name="R1",
            rubric=rubric,
            task_version_ids=sorted(versions.values()),
            k=3,
        )
    by_version = {v: k for k, v in versions.items()}
    grades = {
        "native-a": (5, "accept"),
        "native-b": (4, "accept"),
        "harbor-reset": (5, "accept"),
        "tau2-1": (4, "accept"),
        "native-bad": (1, "reject"),
    }
    with session_scope() as session:
        _rate(
            session,
            [session.merge(e) for e in experts],
            lambda who, v: (
                (5, "accept")
                if (who, by_version[v]) == ("e3", "native-b")
                else grades[by_version[v]]
            ),
        )
    natives[0]["instruction"] = "Handle incident a, now with the CMDB record"
    bundle.write_text(json.dumps({"tasks": natives[:1]}))
    with session_scope() as session:
        import_path(bundle, session=session)  # native-a v2: newer, unreviewed
    return {
        "lead": lead,
        "tmp": tmp_path,
        "bundle": bundle,
        "tau2": tau2_file,
        "export": lambda out, **options: export_as_lead(lead, out, **options),
    }


def export_as_lead(lead, out, **options):
    with session_scope() as session:
        options = {"at": AT, "bootstrap": 200, **options}
        return export_set(out, session=session, actor=session.merge(lead), **options)


# simulated transcripts mapped to a synthetic log (tests/db/test_realism_*.py) -------------

MAPPING_SPEC = """
spec: desk
version: 1
log: small
start_group: Desk
rules:
  - name: status
    tool: set_status
    argument: status
    activity: "{status}"
    rewrite: [["^(\\\\w+) - ", "\\\\1-"]]
  - name: handover
    role: agent
    text: "^Over to (?P<team>.+)$"
    activity: Queued-Awaiting Assignment
    group: "{team}"
  - name: chat
    role: [user, agent]
    activity: null
"""


def _realism_run(*args):
    from itsmreview.cli import app
    from typer.testing import CliRunner

    return CliRunner().invoke(app, list(args))


def _call(n: int, status: str) -> dict:
    return {
        "role": "agent",
        "content": "",
        "tool_calls": [{"id": f"c{n}", "name": "set_status", "arguments": {"status": status}}],
    }


def _transcript(task: str, backbone: str, statuses: list[str], handover: bool) -> dict:
    messages = [{"role": "user", "content": "My laptop will not boot"}]
    for n, status in enumerate(statuses):
        messages.append(_call(n, status))
        messages.append({"role": "tool", "content": "ok", "tool_call_id": f"c{n}"})
        if handover and n == 0:
            messages.append({"role": "agent", "content": "Over to Hardware L2"})
    messages.append({"role": "user", "content": "thanks"})
    return {"id": f"{task}-run", "simulator": {"backbone": backbone}, "messages": messages}


@pytest.fixture
def mapped(configured, tmp_path):
    """A 300-case synthetic log `small`; six tasks whose simulator never waits and two whose
    simulator does (they declare the log's most frequent variant); the spec file."""
    rows = generate_log(300, seed=12)
    log_file = write_csv(rows, tmp_path / "small.csv")
    assert (
        _realism_run(
            "log", "import", str(log_file), "--preset", "bpi2013", "--name", "small"
        ).exit_code
        == 0
    )
    with session_scope() as session:
        log = latest_log(session=session, name="small")
        variants = coverage_queries.variants_frame(session=session, log_id=log.id)
        top = variants.sort_values("rank").iloc[0]
    tasks = []
    for n in range(6):
        statuses = ["Accepted - In Progress", "Completed - Resolved"][: 1 + n % 2]
        tasks.append(("never", "never-waits", statuses, n % 3 == 0, None))
    for _ in range(2):
        statuses = ["Accepted - In Progress", "Accepted - Wait - User", "Completed - Resolved"]
        tasks.append(("waits", "waits", statuses, False, [list(top["sequence"])]))
    natives = []
    for n, (prefix, backbone, statuses, handover, declared) in enumerate(tasks):
        task_id = f"{prefix}-{n}"
        natives.append(
            {
                "id": task_id,
                "title": task_id,
                "persona": "L1 service desk agent",
                "track": "simulated-actors",
                "instruction": "Handle the incident.",
                "source": {"log": "small", **({"variants": declared} if declared else {})},
                "transcripts": [_transcript(task_id, backbone, statuses, handover)],
            }
        )
    bundle = tmp_path / "tasks.json"
    bundle.write_text(json.dumps({"tasks": natives}))
    assert _realism_run("tasks", "import", str(bundle)).exit_code == 0
    spec = tmp_path / "desk.yaml"
    spec.write_text(MAPPING_SPEC)
    result = _realism_run("realism", "map", "--spec", str(spec), "--json")
    assert result.exit_code == 0, result.output
    return {"rows": rows, "spec": spec, "map": json.loads(result.stdout), "top": top}
