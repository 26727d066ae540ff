"""Exports of approved task sets on both databases: only approved versions, every format
re-imports to the same tasks, the Hugging Face folder loads with `datasets`, the same state
gives the same bytes, `export verify` names every changed, missing or extra file."""

import json
import os
import tomllib
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from itsmreview.catalog.importing import import_path
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.errors import Conflict, InvalidInput, NotFound
from itsmreview.exports.bundle import verify_folder
from itsmreview.exports.models import Export
from itsmreview.exports.service import export_set
from itsmreview.ledger.models import LedgerEntry
from itsmreview.ledger.service import verify_chain
from sqlmodel import select
from typer.testing import CliRunner

AT = datetime(2026, 12, 1, tzinfo=UTC)


def manifest_of(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _export(reviewed, out, **options):
    return reviewed["export"](out, **options)


def test_only_approved_versions_are_exported_with_their_evidence(reviewed):
    from itsmreview.review.ratings.checks import import_checks

    checks = reviewed["tmp"] / "checks.json"
    checks.write_text(
        json.dumps(
            [
                {"task": "native-b", "version": 1, "check": "structure", "status": "pass"},
                {"task": "native-a", "version": 2, "check": "structure", "status": "fail"},
            ]
        )
    )
    with session_scope() as session:
        import_checks(checks, session=session, actor=session.merge(reviewed["lead"]))
    out = reviewed["tmp"] / "one" / "set"
    result = _export(reviewed, out, formats=["native", "harbor", "hf", "tau2"])
    exported_checks = [
        json.loads(x) for x in (out / "evidence/machine_checks.jsonl").read_text().splitlines()
    ]
    assert [(c["task"], c["version"], c["check"], c["status"]) for c in exported_checks] == [
        ("native-b", 1, "structure", "pass")  # native-a's v2 is not exported, nor its check
    ]
    lines = [json.loads(x) for x in (out / "tasks/native.jsonl").read_text().splitlines()]
    assert [(t["id"], t["itsmreview"]["version"]) for t in lines] == [
        ("harbor-reset", 1),
        ("native-a", 1),
        ("native-b", 1),
        ("tau2-1", 1),
    ]
    assert all(t["itsmreview"]["decision"] == "approved" for t in lines)
    assert lines[1]["instruction"] == "Handle incident a"  # the approved v1, not the newer v2
    assert result.manifest["counts"]["tasks"] == 4 and result.manifest["counts"]["ratings"] == 12
    assert result.manifest["tentative"] is None
    script = out / "tasks/harbor/harbor-reset/tests/test.sh"
    assert script.is_file() and script.stat().st_mode & 0o777 == 0o755
    assert (out / "tasks/harbor/harbor-reset/instruction.md").stat().st_mode & 0o777 == 0o644
    assert manifest_of(out)["executables"] == [
        "tasks/harbor/harbor-reset/solution/solve.sh",
        "tasks/harbor/harbor-reset/tests/test.sh",
    ]
    toml = (out / "tasks/harbor/dataset.toml").read_text()
    assert 'name = "itsmreview/R1"' in toml  # the round's name, not the folder's ("set")
    assert 'name = "itsmreview/harbor-reset"' in toml and 'digest = "sha256:' in toml
    assert "path =" not in toml
    task_toml = (out / "tasks/harbor/harbor-reset/task.toml").read_text()
    # the stored task.toml with its name set, and the task's audit summary under [metadata]
    assert task_toml.startswith(
        '[task]\nname = "itsmreview/harbor-reset"\n\n[metadata.itsmreview_audit]\n'
    )
    assert tomllib.loads(task_toml)["metadata"]["itsmreview_audit"]["findings"] == 0
    sidecar = json.loads((out / "tasks/harbor/itsmreview.json").read_text())
    assert [(t["id"], t["name"], t["version"]) for t in sidecar["tasks"]] == [
        ("harbor-reset", "itsmreview/harbor-reset", 1)
    ]
    assert json.loads((out / "tasks/tau2/tasks.json").read_text()) == json.loads(
        reviewed["tau2"].read_text()
    )
    ratings = (out / "evidence/ratings.csv").read_text()
    assert "rater-01" in ratings and "native-bad" not in ratings
    for name in ("e1", "e2", "e3", "lead"):  # pseudonymised everywhere
        for path in out.rglob("*"):
            if path.is_file():
                assert f'"{name}"' not in path.read_text() and f",{name}," not in path.read_text()
    gate = json.loads((out / "evidence/gate.json").read_text())["R1"]
    assert {d["task"] for d in gate["decisions"]} == {
        "harbor-reset",
        "native-a",
        "native-b",
        "tau2-1",
    }
    assert all(d["status"] == "approved" for d in gate["decisions"])
    coverage = json.loads((out / "evidence/coverage.json").read_text())["synth"]
    assert coverage["tasks"] == 2 and coverage["variant_coverage"] > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["exported_at"] == AT.isoformat() and manifest["ledger_head"]["seq"] > 0
    assert len(manifest["rubrics"]) == 1 and manifest["rubrics"][0]["content_hash"]
    with session_scope() as session:
        stored = session.exec(select(Export)).one()
        assert stored.content_hash == result.manifest_sha256 and stored.task_count == 4
        entry = session.exec(select(LedgerEntry).where(LedgerEntry.artifact_type == "export")).one()
        assert entry.reference == f"manifest sha256:{result.manifest_sha256}"
        assert verify_chain(session=session).ok


def test_every_format_reimports_to_the_same_tasks(reviewed):
    out = reviewed["tmp"] / "set"
    _export(reviewed, out, formats=["native", "harbor", "tau2"])
    with session_scope() as session:
        native = import_path(out / "tasks/native.jsonl", session=session)
        harbor = import_path(out / "tasks/harbor", session=session)
        tau2 = import_path(out / "tasks/tau2/tasks.json", session=session)
        session.rollback()
    # native-a's export is its v1, which the catalog holds: re-importing it is a no-op
    assert sorted(native.report.unchanged) == ["harbor-reset", "native-a", "native-b", "tau2-1"]
    assert tau2.report.unchanged == ["tau2-1"]
    # Harbor knows a task by its org/name, which the export wrote into task.toml; the
    # sidecar gives the task its id back, so it is a new version of the same task
    assert harbor.report.created == [] and harbor.report.new_versions == ["harbor-reset"]


def test_the_hugging_face_folder_loads_with_datasets(reviewed, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = reviewed["tmp"] / "set"
    _export(reviewed, out, formats=["hf"])
    loaded = datasets.load_dataset(str(out / "tasks/hf"), cache_dir=str(reviewed["tmp"] / "c"))
    train = loaded["train"]
    assert sorted(train["id"]) == ["harbor-reset", "native-a", "native-b", "tau2-1"]
    row = next(r for r in train if r["id"] == "native-a")
    assert row["version"] == 1 and row["source_log"] == "synth" and row["variants"]
    tau2_row = next(r for r in train if r["id"] == "tau2-1")
    assert json.loads(tau2_row["state_json"])["actions"][0]["name"] == "enable_roaming"
    assert json.loads(row["state_json"]) == {} and row["difficulty"] is None
    card = (out / "tasks/hf/README.md").read_text()
    for section in ("## Dataset Summary", "## Dataset Structure", "## Licensing Information"):
        assert section in card


def test_two_exports_of_one_state_are_byte_identical(reviewed):
    """Folders named differently, at different times: only the manifest's time differs."""
    everything = ["native", "harbor", "hf", "tau2"]
    first, second = reviewed["tmp"] / "a" / "set", reviewed["tmp"] / "elsewhere" / "OUT"
    _export(reviewed, first, formats=everything, make_zip=True)
    with session_scope() as session:
        export_set(
            second,
            session=session,
            actor=session.merge(reviewed["lead"]),
            at=datetime(2027, 3, 4, tzinfo=UTC),
            bootstrap=200,
            formats=everything,
            make_zip=True,
        )
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for name in files:
        if name != Path("manifest.json"):
            assert (first / name).read_bytes() == (second / name).read_bytes(), name
        assert (first / name).stat().st_mode == (second / name).stat().st_mode, name
    one, two = manifest_of(first), manifest_of(second)
    assert one.pop("exported_at") != two.pop("exported_at")
    assert one == two and one["name"] == "R1"
    for path in first.rglob("*"):
        if path.is_file():
            assert "OUT" not in path.read_text() and '"set"' not in path.read_text(), path
    with (
        zipfile.ZipFile(first.parent / "set.zip") as one_zip,
        zipfile.ZipFile(second.parent / "OUT.zip") as two_zip,
    ):
        assert one_zip.namelist() == two_zip.namelist()
        assert one_zip.namelist()[0].startswith("R1/")
        for entry in one_zip.infolist():
            if not entry.filename.endswith("manifest.json"):
                assert one_zip.read(entry) == two_zip.read(entry.filename), entry.filename
        script = one_zip.getinfo("R1/tasks/harbor/harbor-reset/tests/test.sh")
        assert (script.external_attr >> 16) & 0o777 == 0o755


def test_ratings_read_a_batch_at_a_time_give_the_same_files(reviewed, monkeypatch):
    """Ratings, agreement and gate decisions are written batch by batch; the batch size
    changes nothing in the output."""
    from itsmreview.exports import service

    whole, piecemeal = reviewed["tmp"] / "whole" / "set", reviewed["tmp"] / "piecemeal" / "set"
    _export(reviewed, whole, formats=["native"])
    monkeypatch.setattr(service, "RATING_BATCH", 1)
    _export(reviewed, piecemeal, formats=["native"])
    for name in ("ratings.csv", "ratings.jsonl", "agreement.json", "gate.json", "ledger.jsonl"):
        first = (whole / "evidence" / name).read_bytes()
        assert first == (piecemeal / "evidence" / name).read_bytes(), name
    lines = (whole / "evidence/ratings.jsonl").read_text().splitlines()
    assert len(lines) == 12  # four approved tasks, three raters each
    assert [json.loads(x)["task"] for x in lines] == sorted(json.loads(x)["task"] for x in lines)


def test_verify_names_changed_missing_and_extra_files(reviewed):
    out = reviewed["tmp"] / "set"
    _export(reviewed, out, formats=["native", "hf"])
    runner = CliRunner()
    ok = runner.invoke(app, ["export", "verify", str(out)])
    assert ok.exit_code == 0 and "all" in ok.output
    with open(out / "evidence/ratings.csv", "a") as handle:
        handle.write("native-bad,1,R1,rater-09,human,1,accept,,,5,5,5,5,5,5,5,5,,\n")
    (out / "tasks/hf/README.md").unlink()
    (out / "notes.txt").write_text("added later")
    report = verify_folder(out)
    assert report.changed == ["evidence/ratings.csv"]
    assert report.missing == ["tasks/hf/README.md"]
    assert report.extra == ["notes.txt"]
    failed = runner.invoke(app, ["export", "verify", str(out)])
    assert failed.exit_code == 1
    for line in (
        "changed: evidence/ratings.csv",
        "missing: tasks/hf/README.md",
        "extra: notes.txt",
    ):
        assert line in failed.output


def test_refusals_write_nothing(reviewed):
    tmp = reviewed["tmp"]
    with pytest.raises(NotFound, match="no approved task matches persona 'Nobody'"):
        _export(reviewed, tmp / "none", persona="Nobody")
    assert not (tmp / "none").exists()
    busy = tmp / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(Conflict, match="not empty"):
        _export(reviewed, busy)
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]
    with pytest.raises(InvalidInput, match="needs --reason"):
        _export(reviewed, tmp / "t", allow_tentative=True)
    with pytest.raises(InvalidInput, match="unknown export format"):
        _export(reviewed, tmp / "t", formats=["csv"])
    assert not (tmp / "t").exists()
    assert not [p for p in tmp.iterdir() if ".staging-" in p.name]
    _export(reviewed, busy, force=True)
    assert not (busy / "keep.txt").exists() and (busy / "manifest.json").is_file()


def test_a_failing_export_leaves_no_partial_folder(reviewed):
    """A Harbor task whose stored folder name would leave the destination fails the export
    half-way (after the native files are written): nothing is left behind."""
    tmp = reviewed["tmp"]
    with session_scope() as session:
        version = session.exec(
            select(TaskVersion).join(Task).where(Task.external_id == "harbor-reset")
        ).one()
        extra = dict(version.extra)
        extra["original"] = dict(extra["original"], folder="../../escape")
        version.extra = extra
    with pytest.raises(InvalidInput, match="leaves its folder"):
        _export(reviewed, tmp / "out", formats=["native", "harbor"])
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith((".out", "out"))) == []
    assert not (tmp.parent / "escape").exists()


def test_a_gate_not_reached_needs_a_reason_recorded_in_manifest_and_ledger(reviewed):
    from itsmreview.review.gate.service import set_gate
    from itsmreview.review.repair.adjudication import adjudicate

    with session_scope() as session:
        lead = session.merge(reviewed["lead"])
        # agreement is high but not perfect: at 0.99 every task falls back to pending ...
        set_gate(session=session, actor=lead, round_name="R1", changes={"alpha_min": 0.99})
        version = session.exec(
            select(TaskVersion).join(Task).where(Task.external_id == "native-b")
        ).one()
        # ... and a lead's adjudication approves one anyway
        adjudicate(
            session=session,
            actor=lead,
            task_version_id=version.id,
            decision="accept",
            reason="Checked against the runbook",
            round_name="R1",
        )
    tmp = reviewed["tmp"]
    with pytest.raises(Conflict, match="does not reach the gate"):
        _export(reviewed, tmp / "t")
    assert not (tmp / "t").exists()
    result = _export(reviewed, tmp / "t", allow_tentative=True, reason="pilot for the workshop")
    assert result.tasks == 1
    assert result.manifest["tentative"]["reason"] == "pilot for the workshop"
    assert result.manifest["tentative"]["gate"]["R1"]
    adjudications = (tmp / "t/evidence/adjudications.jsonl").read_text().splitlines()
    assert [json.loads(a)["reason"] for a in adjudications] == ["Checked against the runbook"]
    assert json.loads(adjudications[0])["lead"] == "lead-01"
    with session_scope() as session:
        entry = session.exec(select(LedgerEntry).where(LedgerEntry.action == "export")).one()
        assert entry.payload["tentative"]["reason"] == "pilot for the workshop"


def test_the_prov_json_slice_is_valid_prov(reviewed):
    prov = pytest.importorskip("prov.model")
    out = reviewed["tmp"] / "set"
    _export(reviewed, out)
    text = (out / "evidence/ledger.prov.json").read_text()
    document = prov.ProvDocument.deserialize(content=text, format="json")
    records = list(document.get_records())
    assert len(records) > 20
    again = prov.ProvDocument.deserialize(content=document.serialize(format="json"), format="json")
    assert again == document


def test_export_from_the_cli(reviewed):
    out = reviewed["tmp"] / "cli-set"
    result = CliRunner().invoke(
        app, ["export", str(out), "--format", "native,hf", "--json", "--at", AT.isoformat()]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{") :])
    assert payload["tasks"] == 4 and payload["formats"] == ["native", "hf"]
    again = CliRunner().invoke(app, ["export", str(out)])
    assert again.exit_code == 1 and "not empty" in again.output
    assert os.path.isfile(out / "manifest.json")


def test_a_sidecar_gives_back_only_the_ids_of_tasks_it_still_matches(reviewed):
    out = reviewed["tmp"] / "set"
    _export(reviewed, out, formats=["harbor"])
    sidecar = out / "tasks/harbor/itsmreview.json"
    data = json.loads(sidecar.read_text())
    data["tasks"][0]["folder"] = "another-folder"  # the folder was renamed after the export
    sidecar.write_text(json.dumps(data))
    with session_scope() as session:
        harbor = import_path(out / "tasks/harbor", session=session)
        session.rollback()
    assert harbor.report.created == ["itsmreview/harbor-reset"]
    sidecar.write_text("[1, 2")
    with session_scope() as session, pytest.raises(InvalidInput, match="itsmreview.json"):
        import_path(out / "tasks/harbor", session=session)


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_tasks_written_by_a_second_process_give_the_same_files(reviewed, monkeypatch, start):
    """A large set's tasks are written by a second process (forked from the CLI, spawned
    under the app) while the first writes the evidence: the folder is the same, byte for
    byte, manifest included; a version the second cannot read is written by the first."""
    import multiprocessing

    from itsmreview.exports import service, writing

    everything = ["native", "harbor", "hf", "tau2"]
    alone, shared = reviewed["tmp"] / "alone" / "set", reviewed["tmp"] / "shared" / "set"
    _export(reviewed, alone, formats=everything)
    monkeypatch.setattr(service, "PARALLEL_MIN_TASKS", 0)
    monkeypatch.setattr(
        service, "second_process_context", lambda: multiprocessing.get_context(start)
    )
    here = []  # write_tasks called in this process (a forked one appends to its own copy)
    real = writing.write_tasks
    monkeypatch.setattr(writing, "write_tasks", lambda *a, **k: here.append(1) or real(*a, **k))
    _export(reviewed, shared, formats=everything)
    files = sorted(p.relative_to(alone) for p in alone.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(shared) for p in shared.rglob("*") if p.is_file())
    for name in files:
        assert (alone / name).read_bytes() == (shared / name).read_bytes(), name
    assert not here  # the tasks were written by the other process


def test_a_version_the_second_process_cannot_read_is_written_by_the_first(reviewed, monkeypatch):
    from itsmreview.exports import service, writing

    alone, shared = reviewed["tmp"] / "alone" / "set", reviewed["tmp"] / "shared" / "set"
    _export(reviewed, alone, formats=["native", "hf"])
    monkeypatch.setattr(service, "PARALLEL_MIN_TASKS", 0)
    real = writing.tasks_apart

    def one_unknown(plan):
        bare, version_ids = real(plan)
        return bare, [10**9, *version_ids[1:]]  # an id not in the database

    monkeypatch.setattr(writing, "tasks_apart", one_unknown)
    _export(reviewed, shared, formats=["native", "hf"])
    assert (alone / "tasks/native.jsonl").read_bytes() == (
        shared / "tasks/native.jsonl"
    ).read_bytes()
    assert manifest_of(alone) == manifest_of(shared)


def test_a_slice_written_for_ratings_that_changed_is_written_again(reviewed, monkeypatch):
    """The second process writes the ledger slice of the ratings read before the evidence;
    when the ratings written differ (one changed meanwhile), the first writes it again."""
    from itsmreview.exports import queries, service

    alone, shared = reviewed["tmp"] / "alone" / "set", reviewed["tmp"] / "shared" / "set"
    _export(reviewed, alone, formats=["native"])
    monkeypatch.setattr(service, "PARALLEL_MIN_TASKS", 0)
    real = queries.current_rating_ids
    monkeypatch.setattr(
        queries,
        "current_rating_ids",
        lambda **k: set(sorted(real(**k))[1:]),  # one missed
    )
    _export(reviewed, shared, formats=["native"])
    ledger = "evidence/ledger.jsonl"
    assert (alone / ledger).read_bytes() == (shared / ledger).read_bytes()
    assert manifest_of(alone) == manifest_of(shared)
