"""The audit record beside every exported task, on both databases: the Hugging Face rows'
`audit_*` columns (read with `datasets`), Harbor's `[metadata.itsmreview_audit]` (read with
Harbor, in its own Python), native's `itsmreview.audit`, the tau2 sidecar; a fix's field
diff with the values before and after; `export verify` refusing a tampered value. The demo's
findings give the counts; a task fixed after a finding gives the diff."""

import hashlib
import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest
from itsmreview.accounts.models import User
from itsmreview.catalog.importing import import_path
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.exports.bundle import verify_folder
from itsmreview.review.gate.service import set_gate
from itsmreview.review.ratings.findings import add_finding, decide_finding, parse_anchor
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.rounds.assignment import claim_next
from itsmreview.review.rounds.service import create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric
from sqlmodel import select
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
PEERS_PYTHON = Path(os.environ.get("ITSMREVIEW_PEERS_PYTHON", ROOT / ".venv-peers/bin/python"))
EVERYTHING = ["native", "harbor", "hf", "tau2"]
STATE = {
    "changes": [
        {"entity": "incident", "key": "INC1", "change": "changed", "after": {"state": "Resolved"}}
    ]
}
FIXED = "Handle incident a; the CMDB record names the resolver group"


def _lines(path: Path) -> dict[str, tuple[dict, str]]:
    """evidence/audit.jsonl by task: each record and the sha256 of its line."""
    out = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line:
            record = json.loads(line)
            out[record["task"]] = (record, hashlib.sha256(line.encode()).hexdigest())
    return out


def _resign(out: Path, relative: str, text: str) -> None:
    """Rewrite a file of an export and its manifest's digest and size, as a forger would."""
    (out / relative).write_text(text, encoding="utf-8")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"][relative] = hashlib.sha256(text.encode()).hexdigest()
    manifest["sizes"][relative] = len(text.encode())
    (out / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def fixed(reviewed):
    """On top of `reviewed`: a finding on native-a v1, confirmed; native-a v3 fixes its
    instruction and adds an expected end state; round R2 approves v3 (and rejects native-c
    of the same log, so that every dimension's agreement is defined). native-b has an open
    finding on its exported v1."""
    tmp = reviewed["tmp"]
    with session_scope() as session:
        lead = session.merge(reviewed["lead"])
        experts = session.exec(select(User).where(User.username.in_(["e1", "e2", "e3"]))).all()
        first = add_finding(
            session=session,
            actor=experts[0],
            category="specification_gaps",
            severity="major",
            description="The instruction does not say which group resolves it.",
            anchors=[parse_anchor("field:instruction")],
            external_id="native-a",
            version=1,
        )
        decide_finding(session=session, actor=lead, finding_id=first.id, confirm=True)
        source = session.exec(
            select(TaskVersion.source)
            .join(Task)
            .where(Task.external_id == "native-a", TaskVersion.version == 1)
        ).one()
        add_finding(
            session=session,
            actor=experts[1],
            category="wrong_routing",
            severity="minor",
            description="Goes to the desk first.",
            anchors=[parse_anchor("field:instruction")],
            external_id="native-b",
        )
    bundle = tmp / "fix.json"
    base = {"persona": "L1 service desk agent", "track": "single-agent"}
    bundle.write_text(
        json.dumps(
            {
                "tasks": [
                    {
                        **base,
                        "id": "native-a",
                        "title": "Task a",
                        "instruction": FIXED,
                        "source": source,
                        "state": STATE,
                    },
                    {
                        **base,
                        "id": "native-c",
                        "title": "Task c",
                        "instruction": "Guess",
                        "source": source,
                    },
                ]
            }
        )
    )
    with session_scope() as session:
        import_path(bundle, session=session)
        ids = dict(
            session.exec(
                select(Task.external_id, TaskVersion.id)
                .join(TaskVersion)
                .where(Task.external_id.in_(["native-a", "native-c"]))
                .order_by(TaskVersion.version)
            ).all()
        )  # the newest version of each
        create_round(
            session=session,
            actor=session.merge(reviewed["lead"]),
            name="R2",
            rubric=ensure_rubric(load_rubric(), session=session),
            task_version_ids=sorted(ids.values()),
            k=3,
        )
    grades = {ids["native-a"]: (5, "accept"), ids["native-c"]: (1, "reject")}
    rubric = load_rubric()
    with session_scope() as session:
        for expert in session.exec(select(User).where(User.role == "expert")).all():
            while (assignment := claim_next(session=session, actor=expert)) is not None:
                score, verdict = grades[assignment.task_version_id]
                submit_rating(
                    session=session,
                    actor=expert,
                    assignment_id=assignment.id,
                    scores={d.key: score for d in rubric.dimensions},
                    verdict=verdict,
                )
    with session_scope() as session:  # the gate decides again with the round's final alpha
        set_gate(
            session=session,
            actor=session.merge(reviewed["lead"]),
            round_name="R2",
            changes={"alpha_min": 0.6},
        )
    return reviewed


def test_every_format_carries_each_tasks_audit_summary(fixed, monkeypatch, requirement):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = fixed["tmp"] / "set"
    result = fixed["export"](out, formats=EVERYTHING, org="itsm")
    assert result.tasks == 4
    records = _lines(out / "evidence/audit.jsonl")
    assert sorted(records) == ["harbor-reset", "native-a", "native-b", "tau2-1"]
    record, digest = records["native-a"]
    # the fix: v3 against v1, the version the finding was made on, value by value
    assert (record["version"], record["fixed_since"]) == (3, 1)
    assert record["fixed_fields"] == ["instruction", "expected end state"]
    instruction, end_state = record["fixed"]
    assert (instruction["before"], instruction["after"]) == ("Handle incident a", FIXED)
    assert f"-Handle incident a\n+{FIXED}\n" in instruction["diff"]
    assert end_state["before"] == ""  # v1 had none: the stored, normalised state after
    assert json.loads(end_state["after"])["changes"][0]["after"] == {"state": "Resolved"}
    assert '+        "state": "Resolved"\n' in end_state["diff"]
    # HF: one column a key, one type in every row, as `datasets` reads the folder
    train = datasets.load_dataset(str(out / "tasks/hf"), cache_dir=str(fixed["tmp"] / "c"))
    train = train["train"]
    features = train.features
    assert features["audit_findings_confirmed"].dtype == "int64"
    assert features["audit_fixed_since"].dtype == "int64"
    assert features["audit_sha256"].dtype == "string"
    rows = {r["id"]: r for r in train}
    a, b, harbor = rows["native-a"], rows["native-b"], rows["harbor-reset"]
    assert a["audit_sha256"] == digest
    assert (a["audit_findings"], a["audit_findings_confirmed"], a["audit_findings_major"]) == (
        1,
        1,
        1,
    )
    assert a["audit_confirmed_categories"] == ["specification_gaps"]
    assert (a["audit_fixed_since"], a["audit_fixed_fields"]) == (
        1,
        ["instruction", "expected end state"],
    )
    assert (b["audit_findings_open"], b["audit_findings_minor"], b["audit_fixed_since"]) == (
        1,
        1,
        None,
    )
    assert b["audit_confirmed_categories"] == [] and b["audit_sha256"] == records["native-b"][1]
    assert harbor["audit_findings"] == 0 and harbor["audit_consensus_phases"] == 0
    assert "`audit_sha256`" in (out / "tasks/hf/README.md").read_text()
    # native: the export record (which an import ignores) holds the same summary
    native = [json.loads(x) for x in (out / "tasks/native.jsonl").read_text().splitlines()]
    by_id = {t["id"]: t["itsmreview"]["audit"] for t in native}
    assert by_id["native-a"]["sha256"] == digest and by_id["native-a"]["fixed_since"] == 1
    # tau2: the tasks as imported; the summary in the sidecar beside them
    assert json.loads((out / "tasks/tau2/tasks.json").read_text()) == json.loads(
        fixed["tau2"].read_text()
    )
    [entry] = json.loads((out / "tasks/tau2/itsmreview.json").read_text())["tasks"]
    assert entry["id"] == "tau2-1" and entry["audit"]["sha256"] == records["tau2-1"][1]
    # Harbor: its own loader reads the summary from the task's metadata
    assert PEERS_PYTHON.is_file() or requirement(False, f"Harbor's Python {PEERS_PYTHON}")
    checked = subprocess.run(
        [str(PEERS_PYTHON), str(ROOT / "tests/peers/harbor_check.py"), str(out / "tasks/harbor")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    [task] = report["tasks"]
    assert task["digest"] == task["harbor_digest"] and report["sync_unchanged"]
    metadata = task["metadata"]["itsmreview_audit"]
    assert metadata["sha256"] == records["harbor-reset"][1]
    assert metadata["findings"] == 0 and "fixed_since" not in metadata
    # the ledger slice holds the version the fix starts from, so verify can check it
    ledger = (out / "evidence/ledger.jsonl").read_text()
    assert '"artifact_id": "native-a@v1"' in ledger and '"artifact_id": "native-a@v3"' in ledger
    assert verify_folder(out).ok
    ok = CliRunner().invoke(app, ["export", "verify", str(out)])
    assert ok.exit_code == 0, ok.output
    assert "(since v1; changed: instruction, expected end state)" in (out / "AUDIT.md").read_text()


@pytest.mark.parametrize(
    "forge, message",
    [
        # a fixed field's value before the fix rewritten in the audit record
        ("before", "instruction before or after the fix differs from its sha256"),
        # a confirmed finding hidden in the Hugging Face row
        ("hf", "the audit summary of task native-a v3 differs from its line"),
        # the summary in Harbor's task.toml
        ("harbor", "the audit summary of task harbor-reset v1 differs"),
        # the tau2 sidecar
        ("tau2", "the audit summary of task tau2-1 v1 differs"),
        # the fix said to start from another version
        ("since", "with content hashes the ledger slice does not record"),
    ],
)
def test_verify_refuses_a_tampered_audit_value(fixed, forge, message):
    out = fixed["tmp"] / "set"
    fixed["export"](out, formats=EVERYTHING, org="itsm")
    if forge in ("before", "since"):
        lines = (out / "evidence/audit.jsonl").read_text().split("\n")
        number = next(i for i, x in enumerate(lines) if '"task": "native-a"' in x)
        record = json.loads(lines[number])
        if forge == "before":
            record["fixed"][0]["before"] = "Handle incident a well"
        else:
            record["fixed_since"] = 2
        lines[number] = json.dumps(record, sort_keys=True, ensure_ascii=False)
        _resign(out, "evidence/audit.jsonl", "\n".join(lines))
    elif forge == "hf":
        relative = "tasks/hf/data/train.jsonl"
        rows = [json.loads(x) for x in (out / relative).read_text().splitlines()]
        for row in rows:
            if row["id"] == "native-a":
                row["audit_findings_confirmed"] = 0
                row["audit_confirmed_categories"] = []
        _resign(out, relative, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    elif forge == "harbor":
        relative = "tasks/harbor/harbor-reset/task.toml"
        text = (out / relative).read_text()
        assert tomllib.loads(text)["metadata"]["itsmreview_audit"]["findings"] == 0
        _resign(out, relative, text.replace("\nfindings = 0\n", "\nfindings = 3\n"))
    else:
        relative = "tasks/tau2/itsmreview.json"
        sidecar = json.loads((out / relative).read_text())
        sidecar["tasks"][0]["audit"]["failed_checks"] = ["structure"]
        _resign(out, relative, json.dumps(sidecar))
    assert verify_folder(out).ok  # every digest matches the re-signed manifest ...
    refused = CliRunner().invoke(app, ["export", "verify", str(out)])
    assert refused.exit_code == 1  # ... and the audit does not
    assert message in " ".join(refused.output.split())


def test_the_demo_exports_its_findings_beside_each_task(demo_configured, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "set"
    result = CliRunner().invoke(
        app, ["export", str(out), "--round", "Demo round 1", "--format", "native,hf"]
    )
    assert result.exit_code == 0, result.output
    records = _lines(out / "evidence/audit.jsonl")
    train = datasets.load_dataset(str(out / "tasks/hf"), cache_dir=str(tmp_path / "c"))["train"]
    rows = {r["id"]: r for r in train}
    assert set(rows) == set(records)
    reopened = rows["demo-l1-06-reopened"]
    assert reopened["audit_sha256"] == records["demo-l1-06-reopened"][1]
    assert (
        reopened["audit_findings"],
        reopened["audit_findings_confirmed"],
        reopened["audit_findings_rejected"],
        reopened["audit_findings_major"],
        reopened["audit_findings_minor"],
    ) == (2, 1, 1, 1, 1)
    assert reopened["audit_confirmed_categories"] == ["specification_gaps"]
    handoff = rows["demo-l1-07-team-handoff"]
    assert handoff["audit_confirmed_categories"] == ["unrealistic_actor"]
    # the demo's three findings on exported tasks, and no more, in the columns
    assert sum(train["audit_findings"]) == 3
    assert all(r["audit_fixed_since"] is None for r in train)
    assert CliRunner().invoke(app, ["export", "verify", str(out)]).exit_code == 0
    relative = "tasks/hf/data/train.jsonl"
    text = (out / relative).read_text()
    forged = text.replace('"audit_findings_rejected": 1', '"audit_findings_rejected": 0')
    assert forged != text
    _resign(out, relative, forged)
    refused = CliRunner().invoke(app, ["export", "verify", str(out)])
    assert refused.exit_code == 1
    assert "task demo-l1-06-reopened v1 differs from its line" in " ".join(refused.output.split())


def test_a_findings_votes_and_its_linked_fix_reach_the_audit_record(fixed):
    from itsmreview.review.ratings.findings import link_fix, list_findings, vote_on_finding

    with session_scope() as session:
        lead = session.merge(fixed["lead"])
        found = {f["task"]: f["id"] for f in list_findings(session=session, actor=lead)}
        link_fix(session=session, actor=lead, finding_id=found["native-a"], version=3)
        voter = session.exec(select(User).where(User.username == "e3")).one()
        vote_on_finding(session=session, actor=voter, finding_id=found["native-b"], stands=True)
    out = fixed["tmp"] / "set"
    fixed["export"](out)
    records = _lines(out / "evidence/audit.jsonl")
    [earlier] = records["native-a"][0]["earlier_findings"]
    assert earlier["fixed_in"] == 3 and earlier["votes"] == {"for": 0, "against": 0}
    [open_one] = records["native-b"][0]["findings"]
    assert open_one["votes"] == {"for": 1, "against": 0} and open_one["fixed_in"] is None
    markdown = (out / "AUDIT.md").read_text()
    assert f"a lead linked #{found['native-a']} to the fix" in markdown
    assert CliRunner().invoke(app, ["export", "verify", str(out)]).exit_code == 0
    # the vote and the fix are in the ledger slice beside the finding
    ledger = [json.loads(line) for line in (out / "evidence/ledger.jsonl").read_text().splitlines()]
    actions = {(e["artifact_id"], e["action"]) for e in ledger if e["artifact_type"] == "finding"}
    assert (str(found["native-a"]), "fix") in actions
    assert (str(found["native-b"]), "vote") in actions
