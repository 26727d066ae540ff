"""Findings on both backends: the taxonomy, anchors checked against the task, the panel's
decision, the ledger's digests; the demo export's audit record, AUDIT.md and `export verify`
refusing a finding that differs from its ledger entry."""

import hashlib
import json

import pytest
from itsmreview.accounts.service import create_user
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.errors import InvalidInput, PermissionDenied
from itsmreview.ledger.chain import content_digest
from itsmreview.review.ratings.findings import (
    add_finding,
    decide_finding,
    finding_content,
    list_findings,
    parse_anchor,
)
from typer.testing import CliRunner

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


@pytest.fixture
def people(mapped):
    with session_scope() as session:
        expert = create_user(session=session, username="fx", role="expert", password="pw-123456")[0]
        lead = create_user(session=session, username="fl", role="lead", password="pw-123456")[0]
    return {"expert": expert, "lead": lead}


def _add(actor, **changes):
    options = {
        "category": "unrealistic_actor",
        "severity": "minor",
        "description": "The caller never waits.",
        "anchors": [parse_anchor("turn:waits-6-run:2"), parse_anchor("field:instruction")],
        "external_id": "waits-6",
    } | changes
    with session_scope() as session:
        found = add_finding(session=session, actor=actor, **options)
        return found.id, finding_content(found)


def test_a_finding_is_recorded_with_its_anchors_and_decided_once(people, tmp_path):
    finding_id, content = _add(people["expert"])
    listed = json.loads(run("findings", "list", "--task", "waits-6", "--json").stdout)
    assert [(f["id"], f["state"], f["author"]) for f in listed] == [(finding_id, "open", "fx")]
    assert listed[0]["anchors"] == [
        {"kind": "transcript_turn", "transcript": "waits-6-run", "turn": 2},
        {"kind": "task_field", "field": "instruction"},
    ]
    with session_scope() as session, pytest.raises(InvalidInput, match="say why"):
        decide_finding(session=session, actor=people["lead"], finding_id=finding_id, confirm=False)
    with session_scope() as session, pytest.raises(PermissionDenied):
        decide_finding(session=session, actor=people["expert"], finding_id=finding_id, confirm=True)
    assert run("findings", "decide", str(finding_id), "--confirm").exit_code == 0
    again = run("findings", "decide", str(finding_id), "--reject", "--reason", "no")
    assert again.exit_code == 1 and "was confirmed already" in again.output
    assert run("ledger", "export", str(tmp_path / "l.jsonl")).exit_code == 0
    entries = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
    mine = [e for e in entries if e["artifact_type"] == "finding"]
    assert [e["action"] for e in mine] == ["add", "confirmed"]
    assert mine[0]["payload"]["content_sha256"] == content_digest(content)
    assert mine[0]["payload"]["task"] == "waits-6@v1"
    assert run("ledger", "verify").exit_code == 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"category": "vague"}, "category 'vague' is not one of"),
        ({"severity": "critical"}, "severity is major or minor"),
        ({"description": "  "}, "say what is wrong"),
        ({"anchors": []}, "point at 1 to 20 places"),
        ({"anchors": [parse_anchor("turn:waits-6-run:99")]}, "turn 99 is outside 1.."),
        ({"anchors": [parse_anchor("turn:other:1")]}, "the task has no transcript 'other'"),
        ({"anchors": [parse_anchor("field:secrets")]}, "field 'secrets' is not one of"),
        ({"anchors": [parse_anchor("step:40")]}, "step 40 is outside 1.."),
        ({"anchors": [parse_anchor("state:incident")]}, "changes no record incident"),
        ({"external_id": "never-0", "anchors": [parse_anchor("step:1")]}, "declares no log"),
    ],
)
def test_a_bad_finding_is_refused_with_the_reason(people, changes, message):
    with pytest.raises(InvalidInput, match=message):
        _add(people["expert"], **changes)
    with session_scope() as session:
        assert list_findings(session=session, actor=people["lead"]) == []


def test_anchor_short_forms_are_parsed_or_explained():
    assert parse_anchor("case:1-364285768") == {"kind": "log_case", "case_id": "1-364285768"}
    assert parse_anchor("step:3") == {"kind": "variant_step", "step": 3}
    with pytest.raises(InvalidInput, match="write turn:TRANSCRIPT:N"):
        parse_anchor("turn:x:three")
    categories = json.loads(run("findings", "categories", "--json").stdout)
    assert categories["incorrect_expected_actions"]["source"] == "tau3 task fixes"
    assert len(categories) == 14


def test_the_demo_export_carries_audit_records_that_verify_checks(demo_configured, tmp_path):
    out = tmp_path / "set"
    assert run("export", str(out), "--round", "Demo round 1").exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["findings"] == 3
    records = [json.loads(x) for x in (out / "evidence" / "audit.jsonl").read_text().splitlines()]
    by_task = {r["task"]: r for r in records}
    reopened = by_task["demo-l1-06-reopened"]["findings"]
    assert sorted(f["state"] for f in reopened) == ["confirmed", "rejected"]
    assert all(f["found_by"].startswith("finder-") for f in reopened)
    audit = (out / "AUDIT.md").read_text()
    assert "| Specification gaps | agent benchmark audit | 1 | 0 | 0 | 1 | 0 |" in audit
    assert "**demo-l1-07-team-handoff** v1: Unrealistic simulated actor (minor)" in audit
    assert run("export", "verify", str(out)).exit_code == 0
    # a finding rewritten and the manifest re-signed to match: the ledger entry still differs
    lines = (out / "evidence" / "audit.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["findings"][0]["severity"] = (
        "minor" if first["findings"][0]["severity"] == "major" else "major"
    )
    lines[0] = json.dumps(first)
    tampered = "\n".join(lines) + "\n"
    (out / "evidence" / "audit.jsonl").write_text(tampered)
    manifest["files"]["evidence/audit.jsonl"] = hashlib.sha256(tampered.encode()).hexdigest()
    manifest["sizes"]["evidence/audit.jsonl"] = len(tampered.encode())
    (out / "manifest.json").write_text(json.dumps(manifest))
    refused = run("export", "verify", str(out))
    assert refused.exit_code == 1
    assert "differs from its ledger entry" in " ".join(refused.output.split())
