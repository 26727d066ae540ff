"""The audit record's pure parts: the field diff of a fix (values before and after, long text
cut with its digest), the per-task summary every format carries, and where it goes in a
Harbor task.toml and beside a tau2 tasks.json."""

import hashlib
import json
import tomllib
from types import SimpleNamespace

import pytest
from itsmreview.catalog.formats.common import ORIGINAL, ORIGINAL_FORMAT, FormatError
from itsmreview.exports import audit, harbor, hf, tau2


def _version(**changes) -> SimpleNamespace:
    fields = {
        "title": "Reset the VPN token",
        "instruction": "Reset the VPN token of user 4711.",
        "environment": "",
        "ground_truth": "",
        "verifier": "token reset",
        "source": {"log": "synth"},
        "extra": {},
    }
    return SimpleNamespace(**(fields | changes))


def test_a_fix_carries_each_changed_field_before_and_after():
    state = {"changes": [{"entity": "incident", "key": "INC1", "change": "changed"}]}
    before = _version()
    after = _version(
        instruction="Reset the VPN token of user 4711 and tell the caller.",
        source={"log": "synth", "variants": [["Queued", "Accepted"]]},
        extra={"state": state},
    )
    changes = audit.field_diff(before, after)
    assert [c["field"] for c in changes] == ["instruction", "source", "expected end state"]
    assert audit.changed_fields(before, after) == ["instruction", "source", "expected end state"]
    instruction, source, end_state = changes
    assert instruction["before"] == "Reset the VPN token of user 4711."
    assert instruction["after"] == "Reset the VPN token of user 4711 and tell the caller."
    assert (
        instruction["before_sha256"]
        == hashlib.sha256(b"Reset the VPN token of user 4711.").hexdigest()
    )
    assert (
        "-Reset the VPN token of user 4711.\n+Reset the VPN token of user 4711 and"
        in (instruction["diff"])
    )
    assert not instruction["truncated"] and not instruction["diff_truncated"]
    assert json.loads(source["before"]) == {"log": "synth"}
    assert json.loads(source["after"])["variants"] == [["Queued", "Accepted"]]
    # no end state before: the empty text; after: the state as sorted, indented JSON
    assert end_state["before"] == "" and json.loads(end_state["after"]) == state
    assert '+      "entity": "incident",' in end_state["diff"]
    assert audit.field_diff(before, _version()) == [] and audit.field_diff(None, before) == []


def test_long_text_is_cut_and_kept_by_its_digest():
    long_before = "\n".join(f"step {n}: check the CMDB record" for n in range(400))
    long_after = long_before.replace("step 200:", "step 200 (new):")
    [fix] = audit.field_diff(_version(verifier=long_before), _version(verifier=long_after))
    assert fix["truncated"] and len(fix["before"]) == len(fix["after"]) == audit.VALUE_LIMIT
    assert fix["before"] == long_before[: audit.VALUE_LIMIT]
    assert fix["after_sha256"] == hashlib.sha256(long_after.encode()).hexdigest()
    # the diff shows the change far beyond the shown values, with its context
    assert "-step 200: check" in fix["diff"] and "+step 200 (new): check" in fix["diff"]
    assert not fix["diff_truncated"] and len(fix["diff"]) < audit.DIFF_LIMIT
    whole = audit.change("verifier", "a\n" * 5000, "b\n" * 5000)
    assert whole["diff_truncated"] and len(whole["diff"]) == audit.DIFF_LIMIT


def _record(**changes) -> dict:
    found = [
        {"state": "confirmed", "severity": "major", "category": "specification_gaps"},
        {"state": "rejected", "severity": "minor", "category": "wrong_routing"},
    ]
    for f in found:
        f["description"] = f"{f['category']} on {f['state']}"
    record = {
        "task": "t1",
        "version": 2,
        "findings": found[:1],
        "earlier_findings": found[1:],
        "fixed_since": 1,
        "fixed_fields": ["instruction"],
        "fixed": [],
        "machine_checks": [
            {"check": "structure", "status": "pass"},
            {"check": "do-nothing", "status": "fail"},
            {"check": "reproducibility", "status": "error"},
        ],
        "consensus": [
            {"phase": 1, "changed": False},
            {"phase": 2, "changed": True},
            {"phase": 2, "changed": False},
        ],
    }
    return record | changes


def test_the_summary_counts_findings_fixes_checks_and_consensus():
    text, summaries = audit.summaries([_record(), _record(task="t2", findings=[], consensus=[])])
    lines = text.splitlines()
    one, two = summaries[("t1", 2)], summaries[("t2", 2)]
    assert one == {
        "sha256": hashlib.sha256(lines[0].encode()).hexdigest(),
        "findings": 2,
        "findings_open": 0,
        "findings_confirmed": 1,
        "findings_rejected": 1,
        "findings_major": 1,
        "findings_minor": 1,
        "confirmed_categories": ["specification_gaps"],
        "fixed_since": 1,
        "fixed_fields": ["instruction"],
        "failed_checks": ["do-nothing", "reproducibility"],
        "consensus_phases": 2,
        "consensus_changed": 1,
    }
    assert (two["findings"], two["consensus_phases"], two["confirmed_categories"]) == (1, 0, [])
    # every Hugging Face row has every column, of one type, with or without a summary
    assert list(one) == list(hf.AUDIT_FIELDS) == list(hf.NO_AUDIT)
    row = hf.row(
        {"id": "t", "title": "", "persona": "p", "track": "single-agent", "instruction": "i"},
        {"version": 1, "content_hash": "h", "decision": "approved"},
    )
    assert row["audit_findings"] == 0 and row["audit_fixed_since"] is None
    assert row["audit_fixed_fields"] == [] and row["audit_sha256"] == ""


def test_the_audit_markdown_shows_each_fix_as_a_diff():
    fix = audit.change("instruction", "Route to the desk ```x```", "Route to the resolver group")
    text = audit.audit_markdown(
        [_record(fixed=[fix], earlier_findings=[_record()["earlier_findings"][0]])], {}
    )
    assert "fixed after 1 finding(s) on earlier versions (since v1; changed: instruction)" in text
    assert "## Fixes" in text and "**t1** v1 -> v2, instruction:" in text
    assert "````diff\n--- instruction (before)" in text  # a fence longer than the text's
    assert "+Route to the resolver group\n````" in text


def test_harbor_metadata_holds_the_summary_and_keeps_the_rest():
    summary = audit.summary(_record(fixed_since=None), "ab" * 32)
    text = (
        'version = "1.0"\n\n[task]\nname = "itsm/x"\n\n[metadata]\ntags = ["iam"]\n\n'
        "[verifier]\ntimeout_sec = 60.0\n"
    )
    edited = harbor.audited_toml(text, summary, where="task x")
    assert edited.startswith(text)
    config = tomllib.loads(edited)
    assert config["metadata"]["tags"] == ["iam"] and config["verifier"]["timeout_sec"] == 60.0
    stored = config["metadata"][harbor.AUDIT_TABLE]
    assert "fixed_since" not in stored  # TOML has no null
    assert stored == {k: v for k, v in summary.items() if v is not None}
    # exported again (a re-imported export): the old summary is replaced, not repeated
    again = harbor.audited_toml(edited, dict(summary, findings=7), where="task x")
    assert again.count(f"[metadata.{harbor.AUDIT_TABLE}]") == 1
    assert tomllib.loads(again)["metadata"][harbor.AUDIT_TABLE]["findings"] == 7
    assert tomllib.loads(again)["verifier"]["timeout_sec"] == 60.0
    with pytest.raises(FormatError, match=r"task x: cannot add the table \[metadata"):
        harbor.audited_toml('metadata = {tags = ["iam"]}\n', summary, where="task x")


def test_tau2_tasks_stay_as_imported_and_the_audit_goes_beside_them():
    document = {"id": "7", "user_scenario": {"instructions": "No data abroad"}}
    task = {"id": "tau2-7", ORIGINAL_FORMAT: "tau2", ORIGINAL: document}
    summary = audit.summary(_record(), "cd" * 32)
    files = tau2.render([task], [{"version": 3, "content_hash": "h", "audit": summary}])
    assert json.loads(files[tau2.PATH]) == [document]
    [entry] = json.loads(files[tau2.SIDECAR])["tasks"]
    assert (entry["id"], entry["tau2_id"], entry["version"]) == ("tau2-7", "7", 3)
    assert entry["audit"] == summary
    assert set(tau2.render([task])) == {tau2.PATH}


def test_datasets_reads_the_declared_types_past_its_first_block(tmp_path, monkeypatch):
    """A column null or empty in the first block of rows `datasets` reads (10 MiB) would be
    typed null and refuse a later value; the card declares every column's type instead."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    filler = "Check the CMDB record. " * 700  # 16 KB a row: 700 rows pass one block
    rows = []
    for n in range(700):
        late = n >= 650
        summary = audit.summary(
            _record(fixed_since=2 if late else None, findings=[], earlier_findings=[]), "ef"
        )
        task = {
            "id": f"t{n:03d}",
            "title": "t",
            "persona": "p",
            "track": "single-agent",
            "instruction": filler,
            "tags": ["iam"] if late else [],
            "difficulty": "hard" if late else None,
        }
        rows.append(
            hf.row(
                task, {"version": 1, "content_hash": "h", "decision": "approved", "audit": summary}
            )
        )
    assert all(list(row) == list(hf.FEATURES) for row in rows)
    folder = tmp_path / "hf"
    (folder / "data").mkdir(parents=True)
    (folder / "data/train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "README.md").write_text(
        hf.card(
            name="n",
            count=len(rows),
            personas={"p": len(rows)},
            license={"spdx": "MIT"},
            logs=[],
            agreement={},
            summary=[],
            dimensions=[],
        )
    )
    train = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "c"))["train"]
    assert train.features["audit_fixed_since"].dtype == "int64"
    assert train[0]["audit_fixed_since"] is None and train[699]["audit_fixed_since"] == 2
    assert train[0]["tags"] == [] and train[699]["tags"] == ["iam"]
    assert train[699]["difficulty"] == "hard" and train[699]["audit_failed_checks"] == [
        "do-nothing",
        "reproducibility",
    ]
