"""A round whose gate requires simulator realism: its export is refused while a simulator of
its tasks departs from the log beyond the noise floor, until a lead's waiver (in the ledger)
covers that very mapping; every export carries the simulators' reports as evidence, the same
figures the CLI prints, under the manifest's digests."""

import json

from itsmreview.cli import app
from itsmreview.demo.loader import DEMO_ROUND
from typer.testing import CliRunner

runner = CliRunner()
SIMULATOR = "hand-written demo"


def run(*args):
    return runner.invoke(app, list(args))


def _ledger(tmp_path, kind: str) -> list[dict]:
    path = tmp_path / "ledger.jsonl"
    assert run("ledger", "export", str(path)).exit_code == 0
    entries = map(json.loads, path.read_text().splitlines())
    return [e for e in entries if e["artifact_type"] == kind]


def test_a_release_that_requires_realism_waits_for_a_waiver(demo_configured, tmp_path):
    gate = run("round", "gate", DEMO_ROUND, "--realism-required", "--json")
    assert gate.exit_code == 0 and json.loads(gate.stdout)["realism_required"] is True
    out = tmp_path / "set"
    refused = run("export", str(out), "--round", DEMO_ROUND)
    assert refused.exit_code == 1
    message = " ".join(refused.output.split())
    assert f"round(s) {DEMO_ROUND} require simulator realism" in message
    assert f"simulator '{SIMULATOR}' (spec demo-itsm) departs from log 'demo-vinst'" in message
    assert "case_length" in message and "realism waive" in message
    assert not out.exists()

    empty = run("realism", "waive", "--simulator", SIMULATOR, "--reason", "  ")
    assert empty.exit_code == 1 and "a waiver needs a reason" in empty.output
    waived = run(
        "realism", "waive", "--simulator", SIMULATOR, "--reason", "hand-written runs", "--json"
    )
    assert waived.exit_code == 0, waived.output
    assert "case_length" in json.loads(waived.stdout)["beyond"]
    [entry] = _ledger(tmp_path, "realism_waiver")
    assert entry["artifact_id"] == SIMULATOR and entry["payload"]["reason"] == "hand-written runs"

    exported = run("export", str(out), "--round", DEMO_ROUND)
    assert exported.exit_code == 0, exported.output
    manifest = json.loads((out / "manifest.json").read_text())
    [summary] = manifest["realism"]["simulators"]
    assert manifest["realism"]["required_by"] == [DEMO_ROUND]
    assert summary["cleared"] and summary["waiver_ledger_seq"] == entry["seq"]
    # the evidence holds the report the CLI prints, figure for figure
    evidence = json.loads((out / "evidence" / "realism.json").read_text())
    cli = json.loads(run("realism", "report", "--simulator", SIMULATOR, "--json").stdout)
    assert evidence["simulators"][0]["report"] == cli
    assert run("export", "verify", str(out)).exit_code == 0
    tampered = evidence | {"required_by": []}
    (out / "evidence" / "realism.json").write_text(json.dumps(tampered))
    verified = run("export", "verify", str(out))
    assert verified.exit_code == 1 and "evidence/realism.json" in verified.output


def test_a_waiver_holds_for_its_mapping_only(demo_configured, tmp_path):
    assert run("round", "gate", DEMO_ROUND, "--realism-required").exit_code == 0
    assert run("realism", "waive", "--simulator", SIMULATOR, "--reason", "ok").exit_code == 0
    assert run("export", str(tmp_path / "first"), "--round", DEMO_ROUND).exit_code == 0
    # the same spec name, changed: its digest differs, so the waiver no longer covers it
    from itsmreview.realism.mapping import SPECS

    changed = tmp_path / "demo-itsm.yaml"
    text = (SPECS / "demo-itsm.yaml").read_text()
    changed.write_text(text.replace("version: 1", "version: 2"))
    assert run("realism", "map", "--spec", str(changed)).exit_code == 0
    refused = run("export", str(tmp_path / "second"), "--round", DEMO_ROUND)
    assert refused.exit_code == 1 and "require simulator realism" in refused.output


def test_without_the_requirement_the_evidence_is_there_and_nothing_is_held(
    demo_configured, tmp_path
):
    out = tmp_path / "set"
    assert run("export", str(out), "--round", DEMO_ROUND).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["realism"]["required_by"] == []
    [summary] = manifest["realism"]["simulators"]
    assert summary["cleared"] is False and summary["waiver_ledger_seq"] is None
    assert "evidence/realism.json" in manifest["files"]
    nothing = run("realism", "waive", "--simulator", "nobody", "--reason", "x")
    assert nothing.exit_code == 1 and "no mapped transcripts of simulator 'nobody'" in (
        nothing.output
    )


def test_a_simulator_that_cannot_be_measured_holds_only_a_release_that_requires_it(
    demo_configured, tmp_path, monkeypatch
):
    from itsmreview.settings import get_settings

    # the log's files are not where this replica looks: the report cannot be computed
    monkeypatch.setenv("ITSMREVIEW_DATA_DIR", str(tmp_path / "elsewhere"))
    get_settings.cache_clear()
    out = tmp_path / "set"
    assert run("export", str(out), "--round", DEMO_ROUND).exit_code == 0
    [summary] = json.loads((out / "manifest.json").read_text())["realism"]["simulators"]
    assert summary["cleared"] is False and "stored events of log 'demo-vinst'" in summary["error"]
    assert run("round", "gate", DEMO_ROUND, "--realism-required").exit_code == 0
    refused = run("export", str(tmp_path / "second"), "--round", DEMO_ROUND)
    assert refused.exit_code == 1
    assert "could not be measured" in " ".join(refused.output.split())
