"""`itsmreview checks builtin` on both backends: results in the import format, imported with
their ledger entries; on the real tau-bench tasks, the do-nothing failures equal a count over
the raw file."""

import json

import pytest
from itsmreview.cli import app
from typer.testing import CliRunner

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_identical_instructions_fail_and_the_results_import(mapped, tmp_path):
    out = tmp_path / "builtin.json"
    result = run("checks", "builtin", str(out), "--import", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    # the fixture's eight tasks share one instruction; none states an end state
    assert summary["by_check"] == {"do-nothing:warn": 8, "duplicate:fail": 8}
    assert summary["imported"]["imported"] == 16
    records = json.loads(out.read_text())["checks"]
    first = next(r for r in records if r["check"] == "duplicate")
    assert first["summary"].startswith("the same instruction as ")
    assert len(first["details"]["similar"]) == 7
    assert run("ledger", "verify").exit_code == 0
    bad = run("checks", "builtin", str(out), "--threshold", "0.2")
    assert bad.exit_code == 1 and "between 0.5 and 1" in bad.output


@pytest.mark.realdata
def test_do_nothing_on_real_tau_bench_tasks_equals_a_count_over_the_file(
    configured, real_file, tmp_path
):
    source = real_file("transcripts", "taubench_gpt4o_airline_even.json")
    assert run("tasks", "import", str(source)).exit_code == 0
    out = tmp_path / "builtin.json"
    assert run("checks", "builtin", str(out)).exit_code == 0
    found = {
        r["task"]: r["status"]
        for r in json.loads(out.read_text())["checks"]
        if r["check"] == "do-nothing"
    }
    expected = {}
    for result in json.loads(source.read_text()):
        task = result["info"]["task"]
        names = [a["name"] for a in task.get("actions") or []]
        reading = ("get", "search", "list", "find", "lookup", "calculate", "think", "read", "check")
        writes = [n for n in names if not n.lower().startswith(reading)]
        outputs = task.get("outputs") or []
        expected[str(result["task_id"])] = "pass" if writes else "warn" if outputs else "fail"
    assert found == expected
    assert list(found.values()).count("fail") > 0
