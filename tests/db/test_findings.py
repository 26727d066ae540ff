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


def _experts(*names):
    with session_scope() as session:
        return [
            create_user(session=session, username=n, role="expert", password="pw-123456")[0]
            for n in names
        ]


def _vote(expert, finding_id, stands, reason=""):
    from itsmreview.review.ratings.findings import vote_on_finding

    with session_scope() as session:
        return vote_on_finding(
            session=session, actor=expert, finding_id=finding_id, stands=stands, reason=reason
        )


def _ledger(tmp_path, finding_id):
    assert run("ledger", "export", str(tmp_path / "ledger.jsonl")).exit_code == 0
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    return [
        (e["action"], e["payload"])
        for e in map(json.loads, lines)
        if e["artifact_type"] == "finding" and e["artifact_id"] == str(finding_id)
    ]


def test_the_panel_confirms_a_finding_when_three_quarters_of_its_votes_agree(people, tmp_path):
    from itsmreview.errors import Conflict

    a, b, c, d, e = _experts("v1", "v2", "v3", "v4", "v5")
    finding_id, _ = _add(people["expert"])
    with pytest.raises(InvalidInput, match="you reported this finding"):
        _vote(people["expert"], finding_id, True)
    with pytest.raises(InvalidInput, match="say why you judge"):
        _vote(a, finding_id, False)
    assert _vote(a, finding_id, True) == {
        "id": finding_id,
        "state": "open",
        "votes": {"for": 1, "against": 0},
    }
    with pytest.raises(Conflict, match="voted on finding .* already"):
        _vote(a, finding_id, False, "changed my mind")
    assert _vote(b, finding_id, False, "the caller does wait in turn 4")["state"] == "open"
    assert _vote(c, finding_id, True)["state"] == "open"  # 2 of 3: not three quarters
    settled = _vote(d, finding_id, True)
    assert settled == {"id": finding_id, "state": "confirmed", "votes": {"for": 3, "against": 1}}
    with pytest.raises(Conflict, match="confirmed already"):
        _vote(e, finding_id, True)
    with session_scope() as session:
        [listed] = list_findings(session=session, actor=people["lead"], external_id="waits-6")
    assert listed["state"] == "confirmed" and listed["votes"] == {"for": 3, "against": 1}
    assert listed["decision_reason"] == "the panel: 3 for, 1 against"
    actions = _ledger(tmp_path, finding_id)
    assert [a for a, _ in actions] == ["add", "vote", "vote", "vote", "vote", "confirmed"]
    assert actions[2][1] == {"stands": False, "reason": "the caller does wait in turn 4"}
    assert actions[-1][1]["by"] == "panel" and actions[-1][1]["votes"] == {"for": 3, "against": 1}
    assert run("ledger", "verify").exit_code == 0


def test_a_split_panel_leaves_the_finding_to_a_lead_and_the_panel_may_reject(people):
    a, b, c, d = _experts("w1", "w2", "w3", "w4")
    split, _ = _add(people["expert"])
    _vote(a, split, True)
    _vote(b, split, False, "not in this log")
    _vote(c, split, True)
    assert _vote(d, split, False, "the variant shows the wait")["state"] == "open"  # 2 of 4
    with session_scope() as session:
        decided = decide_finding(
            session=session, actor=people["lead"], finding_id=split, confirm=True
        )
        assert decided.state == "confirmed"
    rejected, _ = _add(people["expert"], description="The instruction hides the account id.")
    for expert in (a, b, c):
        outcome = _vote(expert, rejected, False, "the id is in the instruction")
    assert outcome["state"] == "rejected" and outcome["votes"] == {"for": 0, "against": 3}


def test_a_later_version_is_linked_as_the_fix_of_a_finding(people, tmp_path):
    from itsmreview.errors import Conflict
    from itsmreview.review.ratings.findings import link_fix

    finding_id, _ = _add(people["expert"])
    lead = people["lead"]
    with session_scope() as session, pytest.raises(InvalidInput, match="not one of its versions"):
        link_fix(session=session, actor=lead, finding_id=finding_id, version=2)
    bundle = tmp_path / "v2.json"
    revised = {
        "id": "waits-6",
        "title": "waits-6",
        "persona": "L1 service desk agent",
        "track": "simulated-actors",
        "instruction": "Handle the incident; the caller waits for a callback.",
        "source": {"log": "small"},
    }
    bundle.write_text(json.dumps({"tasks": [revised]}))
    assert run("tasks", "import", str(bundle)).exit_code == 0
    with session_scope() as session, pytest.raises(InvalidInput, match="not later"):
        link_fix(session=session, actor=lead, finding_id=finding_id, version=1)
    with session_scope() as session, pytest.raises(PermissionDenied):
        link_fix(session=session, actor=people["expert"], finding_id=finding_id, version=2)
    result = run("findings", "fix", str(finding_id), "--version", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"finding {finding_id} (open) is fixed in v2"
    again = run("findings", "fix", str(finding_id), "--version", "2")
    assert again.exit_code != 0 and "linked to its fix already" in again.output
    [listed] = json.loads(run("findings", "list", "--task", "waits-6", "--json").stdout)
    assert listed["fixed_in"] == 2 and listed["version"] == 1
    assert "fixed in v2" in run("findings", "list", "--task", "waits-6").stdout
    assert _ledger(tmp_path, finding_id)[-1] == (
        "fix",
        {"task": "waits-6", "found_on": 1, "fixed_in": 2},
    )
    with session_scope() as session, pytest.raises(Conflict):
        link_fix(session=session, actor=lead, finding_id=finding_id, version=2)
