"""`itsmreview realism map` and `realism report --simulator` on both backends: transcripts
mapped by a spec, stored and ledgered; a simulator's figures beside the log's, equal to the
log's own profile on the real side and to a count over the transcripts on the simulated side."""

import json

import pytest
from itsmreview.accounts.models import Role, User
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.errors import PermissionDenied
from itsmreview.realism.mapping import parse_spec
from itsmreview.realism.service import map_transcripts
from typer.testing import CliRunner

runner = CliRunner()
WAIT = "Accepted-Wait - User"


def run(*args):
    return runner.invoke(app, list(args))


def test_mapping_stores_events_per_simulator_and_records_the_spec(mapped, tmp_path):
    found = mapped["map"]
    assert found["transcripts"] == 8
    assert found["simulators"] == {"never-waits": 6, "waits": 2}
    # never: 1 or 2 statuses (3 + 3 x 2 = 9), two handovers; waits: 2 x 3 statuses
    assert found["events"] == 9 + 2 + 6
    assert found["unmapped"] == 0 and found["units"] > found["events"]
    listed = json.loads(run("realism", "simulators", "--json").stdout)
    assert [(r["simulator"], r["transcripts"], r["log"]) for r in listed] == [
        ("never-waits", 6, "small"),
        ("waits", 2, "small"),
    ]
    # mapping again replaces, never doubles
    assert run("realism", "map", "--spec", str(mapped["spec"])).exit_code == 0
    listed = json.loads(run("realism", "simulators", "--json").stdout)
    assert [r["transcripts"] for r in listed] == [6, 2]
    assert run("ledger", "export", str(tmp_path / "ledger.jsonl")).exit_code == 0
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    entries = [e for e in map(json.loads, lines) if e["artifact_type"] == "realism_mapping"]
    assert len(entries) == 2
    assert entries[0]["payload"]["spec"]["rules"][0]["name"] == "status"
    assert entries[0]["payload"]["spec_sha256"] == parse_spec(mapped["spec"].read_text()).digest()
    assert run("ledger", "verify").exit_code == 0


def test_a_simulator_that_never_waits_against_the_log(mapped):
    report = json.loads(run("realism", "report", "--simulator", "never-waits", "--json").stdout)
    profile = json.loads(run("realism", "report", "--log", "small", "--json").stdout)
    assert report["real_scope"]["kind"] == "whole log"
    assert report["real_cases"] == profile["cases"] == 300
    assert report["simulated_cases"] == report["transcripts"] == 6
    wait = report["metrics"]["wait_user_rate"]
    # the real side is the log's own profile; the simulated side a count over the transcripts
    assert wait["real"]["value"] == profile["metrics"]["wait_user_rate"]["value"] > 0
    assert wait["simulated"]["value"] == 0.0
    assert wait["gap"] == pytest.approx(-wait["real"]["value"], abs=1e-6)
    length = report["metrics"]["case_length"]
    assert length["simulated"]["value"] == pytest.approx((3 * 1 + 3 * 2 + 2) / 6, abs=1e-6)
    reassign = report["metrics"]["reassignments_per_case"]
    assert reassign["simulated"]["value"] == pytest.approx(2 / 6, abs=1e-6)
    assert report["floor_sample"] == 6
    assert report["spec"]["name"] == "desk" and report["mapped_share"] == 1.0
    text = run("realism", "report", "--simulator", "never-waits")
    assert text.exit_code == 0
    assert "wait-user rate" in text.output and "6 of 6 transcript(s)" in text.output
    assert "300 real cases (the whole log" in text.output


def test_tasks_that_declare_variants_are_set_against_those_variants_cases(mapped):
    report = json.loads(run("realism", "report", "--simulator", "waits", "--json").stdout)
    assert report["real_scope"]["kind"] == "declared variants"
    assert report["real_cases"] == int(mapped["top"]["case_count"])
    wait = report["metrics"]["wait_user_rate"]
    # the most frequent variant never waits; the log does elsewhere, so the rate is measured
    assert (wait["real"]["value"], wait["simulated"]["value"]) == (0.0, 1.0)
    assert wait["verdict"] == "beyond"


def test_clear_errors(mapped, tmp_path):
    unknown = run("realism", "report", "--simulator", "nobody")
    assert unknown.exit_code == 1
    assert "no mapped transcripts of simulator 'nobody'; mapped: never-waits, waits" in (
        unknown.output
    )
    assert "give --simulator too" in run("realism", "report", "--spec", "desk").output
    assert (
        "for a log's profile"
        in run("realism", "report", "--simulator", "waits", "--group", "x").output
    )
    other = tmp_path / "other.yaml"
    other.write_text(mapped["spec"].read_text().replace("log: small", "log: nowhere"))
    refused = run("realism", "map", "--spec", str(other))
    assert refused.exit_code == 1
    assert "names log 'nowhere', which is not imported; known logs: small" in refused.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(mapped["spec"].read_text().replace("version: 1", "version: one"))
    refused = run("realism", "map", "--spec", str(bad))
    assert refused.exit_code == 1 and f"{bad}: version:" in refused.output


def test_only_a_lead_maps(mapped):
    expert = User(id=None, username="e", display_name="e", role=Role.expert, password_hash="")
    with session_scope() as session, pytest.raises(PermissionDenied):
        map_transcripts(session=session, actor=expert, spec=parse_spec(mapped["spec"].read_text()))


def test_a_spec_maps_only_its_formats_and_a_full_remap_leaves_nothing_stale(mapped, tmp_path):
    elsewhere = tmp_path / "tau.yaml"
    elsewhere.write_text(
        mapped["spec"].read_text().replace("spec: desk", "spec: tau\nformats: [taubench]")
    )
    refused = run("realism", "map", "--spec", str(elsewhere))
    assert refused.exit_code == 1
    assert "no transcript of format taubench to map" in refused.output
    # one task's transcripts mapped again: the others keep theirs
    one = run("realism", "map", "--spec", str(mapped["spec"]), "--task", "never-0", "--json")
    assert json.loads(one.stdout)["transcripts"] == 1
    listed = json.loads(run("realism", "simulators", "--json").stdout)
    assert [r["transcripts"] for r in listed] == [6, 2]
    # a full remap replaces every mapping of the spec: none is left from the one before
    from itsmreview.realism import queries
    from itsmreview.realism.models import MappedTranscript
    from sqlmodel import select

    with session_scope() as session:
        kept = session.exec(select(MappedTranscript).where(MappedTranscript.spec == "desk")).first()
        fresh = MappedTranscript(
            **kept.model_dump(exclude={"id", "mapped_at"}) | {"simulator": "only"}
        )
        queries.replace_mapped(session=session, spec="desk", rows=[fresh], everything=True)
    listed = json.loads(run("realism", "simulators", "--json").stdout)
    assert [(r["simulator"], r["transcripts"]) for r in listed] == [("only", 1)]


def test_a_simulator_per_persona_of_its_tasks(mapped):
    whole = json.loads(run("realism", "report", "--simulator", "never-waits", "--json").stdout)
    assert whole["personas"] == ["L1 service desk agent"] and whole["persona"] is None
    one = run(
        "realism",
        "report",
        "--simulator",
        "never-waits",
        "--persona",
        "L1 service desk agent",
        "--json",
    )
    same = json.loads(one.stdout)
    assert same["metrics"] == whole["metrics"] and same["persona"] == "L1 service desk agent"
    by = json.loads(
        run("realism", "report", "--simulator", "never-waits", "--by-persona", "--json").stdout
    )
    assert by["personas"]["L1 service desk agent"]["metrics"] == whole["metrics"]
    text = run("realism", "report", "--simulator", "never-waits", "--by-persona").output
    assert "L1 service desk agent" in text and "beyond the floor" in text
    missing = run("realism", "report", "--simulator", "never-waits", "--persona", "Nobody")
    assert missing.exit_code == 1
    assert "belongs to a task of persona 'Nobody'; its personas: L1 service desk agent" in (
        " ".join(missing.output.split())
    )
    both = run("realism", "report", "--persona", "x")
    assert both.exit_code == 1 and "give --simulator too" in both.output


def test_a_simulator_against_the_cases_a_role_of_the_log_takes_part_in(mapped):
    args = ("realism", "report", "--simulator", "never-waits", "--json")
    report = json.loads(run(*args, "--role", "ST Level=L2").stdout)
    profile = json.loads(
        run("realism", "report", "--log", "small", "--role", "ST Level=L2", "--json").stdout
    )
    whole = json.loads(run(*args).stdout)
    assert report["role"] == {"attribute": "ST Level", "value": "L2"}
    assert report["real_scope"]["role_cases"] == report["real_cases"] == profile["cases"] < 300
    wait = report["metrics"]["wait_user_rate"]
    assert wait["real"]["value"] == profile["metrics"]["wait_user_rate"]["value"]
    # the simulated side does not change with the role
    assert wait["simulated"] == whole["metrics"]["wait_user_rate"]["simulated"]
    assert whole["role"] is None
    personas = json.loads(run(*args, "--by-persona", "--role", "ST Level=L2").stdout)
    assert personas["role"] == report["role"]
    assert all(one["role"] == report["role"] for one in personas["personas"].values())
