"""Exports as programs no one on the project wrote read them: Harbor (in its own Python 3.12
venv, .venv-peers) loads the Harbor folder and agrees on every digest; `datasets` and
`huggingface_hub` load the Hugging Face folder with its evidence; `prov` reads the PROV-JSON
inside it. And hostile inputs: a FIFO or a link as the manifest, a bad folder name, Markdown
and HTML in names and personas."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.catalog.service import version_to_native
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.errors import InvalidInput
from itsmreview.exports.bundle import verify_folder
from itsmreview.ledger.evidence.service import Reference, record_source
from sqlmodel import select
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
PEERS_PYTHON = Path(os.environ.get("ITSMREVIEW_PEERS_PYTHON", ROOT / ".venv-peers/bin/python"))
EVERYTHING = ["native", "harbor", "hf", "tau2"]


def _harbor_python(need) -> Path:
    need(
        PEERS_PYTHON.is_file(),
        f"Harbor's Python {PEERS_PYTHON} is missing; create it with `python3.12 -m venv "
        ".venv-peers && .venv-peers/bin/pip install harbor` (or set ITSMREVIEW_PEERS_PYTHON)",
    )
    return PEERS_PYTHON


def test_harbor_loads_the_export_and_agrees_on_every_digest(reviewed, requirement):
    python = _harbor_python(requirement)
    out = reviewed["tmp"] / "OUT"
    reviewed["export"](out, formats=["harbor"], name="Pilot set", org="itsm", license="MIT")
    checked = subprocess.run(
        [str(python), str(ROOT / "tests/peers/harbor_check.py"), str(out / "tasks/harbor")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert report["dataset"] == "itsm/Pilot-set"
    assert "Licence: MIT" in report["description"]
    [task] = report["tasks"]
    assert task["name"] == task["task_name"] == "itsm/harbor-reset"
    assert task["digest"] == task["harbor_digest"]
    assert task["instruction"] == "Reset the VPN token of user 4711.\n"
    assert task["modes"] == {"solution/solve.sh": "0o755", "tests/test.sh": "0o755"}
    assert report["to_toml_identical"] and report["sync_unchanged"]
    assert report["sync"] == ["unchanged"]


def test_a_task_named_org_slash_name_keeps_its_name(reviewed):
    """A Harbor task that already has its org/name is exported under it, whatever --org."""
    from itsmreview.catalog.importing import import_path

    folder = reviewed["tmp"] / "own" / "reset-password"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(
        'version = "1.0"\n\n[task]\n# the registry name\nname = "acme/reset-password"\n'
        'description = "Reset a password"\n\n[metadata]\ntags = ["iam"]\n'
    )
    (folder / "instruction.md").write_text("Reset the password of user 12.\n")
    (folder / "tests" / "test.sh").write_text("exit 0\n")
    from itsmreview.exports import harbor

    assert harbor.named_toml((folder / "task.toml").read_text(), "itsm/x", where="t") == (
        folder / "task.toml"
    ).read_text().replace("acme/reset-password", "itsm/x")
    with session_scope() as session:
        import_path(folder, session=session)
        task, version = session.exec(
            select(Task, TaskVersion)
            .join(TaskVersion)
            .where(Task.external_id == "acme/reset-password")
        ).one()
        native = version_to_native(task, version, [])
    assert harbor.harbor_name(native, "itsm") == "acme/reset-password"
    assert harbor.harbor_name(dict(native, id="x y", original={"task.toml": ""}), "itsm") == (
        "itsm/x-y"
    )
    with pytest.raises(InvalidInput, match="--org"):
        reviewed["export"](reviewed["tmp"] / "bad-org", formats=["harbor"], org="a/b")
    assert not (reviewed["tmp"] / "bad-org").exists()


def test_the_hugging_face_folder_stands_on_its_own(reviewed, monkeypatch):
    datasets = pytest.importorskip("datasets")
    hub = pytest.importorskip("huggingface_hub")
    prov = pytest.importorskip("prov.model")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with session_scope() as session:
        lead = session.merge(reviewed["lead"])
        record_source(
            session=session,
            actor=lead,
            about="log:synth",
            field_name="origin",
            kind="external",
            reference=Reference("Synthetic BPI 2013-shaped log, itsmreview generator seed 3"),
        )
    out = reviewed["tmp"] / "OUT"
    reviewed["export"](
        out, formats=["hf"], name="ITSM pilot", license="other", license_name="Acme Data 1.0"
    )
    folder = out / "tasks/hf"
    moved = reviewed["tmp"] / "pushed"  # what a push to the Hub keeps: this folder alone
    folder.rename(moved)
    cache = str(reviewed["tmp"] / "cache")
    tasks = datasets.load_dataset(str(moved), cache_dir=cache)["train"]
    assert sorted(tasks["id"]) == ["harbor-reset", "native-a", "native-b", "tau2-1"]
    summary = datasets.load_dataset(str(moved), "task_summary", cache_dir=cache)["train"]
    assert len(summary) == 4 and set(summary["ratings"]) == {3}
    ratings = datasets.load_dataset(str(moved), "ratings", cache_dir=cache)["train"]
    assert len(ratings) == 12 and set(ratings["rater"]) == {"rater-01", "rater-02", "rater-03"}
    card = hub.DatasetCard.load(moved / "README.md")
    assert card.data.pretty_name == "ITSM pilot"
    assert card.data.license == "other" and card.data.license_name == "acme-data-1.0"
    text = card.text
    assert "# Dataset Card for ITSM pilot" in text and "OUT" not in text
    assert "real operational" not in text
    assert "`synth` (version 1, 150 cases" in text and "**synthetic**" in text
    assert "Synthetic BPI 2013\\-shaped log" in text  # the ledger's words, escaped
    assert "| dimension | alpha | 95% CI | units |" in text
    agreement = json.loads((moved / "evidence/agreement.json").read_text())["rounds"]["R1"]
    first = agreement[0]
    assert f"{first['alpha']:.3f}" in text and f"{first['ci_low']:.3f} to" in text
    assert "| native\\-a | 1 | 3 |" in text  # the per-task summary
    assert "`Acme Data 1.0`" not in text and "(Acme Data 1\\.0)" in text
    document = prov.ProvDocument.deserialize(
        content=(moved / "evidence/ledger.prov.json").read_text(), format="json"
    )
    assert len(list(document.get_records())) > 20


def test_a_log_without_a_recorded_origin_is_not_called_real(reviewed):
    out = reviewed["tmp"] / "set"
    reviewed["export"](out, formats=["hf"])
    card = (out / "tasks/hf/README.md").read_text()
    assert "real operational" not in card and "origin **not recorded** in the ledger" in card
    assert "license: other\nlicense_name: not-specified-at-export" in card
    assert "imported from synth.csv sha256:" in card.replace("\\", "")


def test_markdown_and_html_from_outside_are_escaped_in_the_card(reviewed):
    hostile = "<script>alert(1)</script> **bold** [x](http://e) | pipe"
    with session_scope() as session:
        for task, version in session.exec(
            select(Task, TaskVersion).join(TaskVersion).where(Task.external_id == "native-b")
        ):
            task.persona = version.persona = hostile
    out = reviewed["tmp"] / "set"
    reviewed["export"](out, formats=["hf"], name="<img src=x onerror=alert(1)> *n*")
    card = (out / "tasks/hf/README.md").read_text()
    body = card.split("---", 2)[2]
    assert "<script>" not in body and "<img" not in body and "**bold**" not in body
    assert "&lt;script&gt;alert\\(1\\)&lt;\\/script&gt; \\*\\*bold\\*\\*" in body
    assert "# Dataset Card for &lt;img src\\=x onerror\\=alert\\(1\\)&gt; \\*n\\*" in body
    assert 'pretty_name: "<img src=x onerror=alert(1)> *n*"' in card  # YAML: quoted as JSON


@pytest.mark.parametrize(
    "name, message",
    [
        ("pilot\nround", "'\\\\n'"),
        ("x" * 300, "300 characters long"),
        ("../up", "leaves its folder"),
        ("tab\there", "not a plain folder name"),
        ("", "empty"),
    ],
)
def test_the_exports_page_refuses_a_bad_folder_name(reviewed, name, message, tmp_path):
    from itsmreview.exports.service import export_named

    with session_scope() as session, pytest.raises(InvalidInput, match=message):
        export_named(name, session=session, actor=session.merge(reviewed["lead"]))
    from itsmreview.settings import get_settings

    exports = get_settings().data_dir / "exports"
    assert not exports.exists() or not any(exports.iterdir())


def test_export_names_and_licences_are_checked_before_anything_is_written(reviewed):
    tmp = reviewed["tmp"]
    for options, message in (
        ({"name": "two\nlines"}, "control character"),
        ({"name": "n" * 101}, "at most 100"),
        ({"license": "MIT OR <b>"}, "not an SPDX"),
        ({"license": "other"}, "needs --license-name"),
    ):
        with pytest.raises(InvalidInput, match=message):
            reviewed["export"](tmp / "refused", **options)
        assert not (tmp / "refused").exists()
    assert not [p for p in tmp.iterdir() if ".staging-" in p.name]


def test_verify_refuses_a_fifo_a_link_and_an_oversized_manifest(reviewed, monkeypatch):
    from itsmreview.exports import bundle

    out = reviewed["tmp"] / "set"
    reviewed["export"](out)
    manifest = out / "manifest.json"
    kept = manifest.read_bytes()
    manifest.unlink()
    os.mkfifo(manifest)  # opening it would wait for a writer forever
    report = verify_folder(out)
    assert not report.ok and "a FIFO (named pipe)" in report.problem
    result = CliRunner().invoke(app, ["export", "verify", str(out)])
    assert result.exit_code == 1 and "FIFO" in result.output and "Traceback" not in result.output
    manifest.unlink()
    outside = reviewed["tmp"] / "elsewhere.json"
    outside.write_bytes(kept)
    manifest.symlink_to(outside)
    report = verify_folder(out)
    assert not report.ok and f"a link to {outside}" in report.problem
    manifest.unlink()
    manifest.write_bytes(kept)
    assert verify_folder(out).ok
    monkeypatch.setattr(bundle, "MAX_MANIFEST_BYTES", len(kept) - 1)
    report = verify_folder(out)
    assert not report.ok and "over the" in report.problem


def test_verify_never_opens_a_listed_file_that_is_not_regular(reviewed):
    out = reviewed["tmp"] / "set"
    reviewed["export"](out, formats=["native", "harbor"])
    ratings = out / "evidence/ratings.csv"
    ratings.unlink()
    os.mkfifo(ratings)
    secret = reviewed["tmp"] / "secret.txt"
    secret.write_text("not part of the export")
    native = out / "tasks/native.jsonl"
    native.unlink()
    native.symlink_to(secret)
    script = out / "tasks/harbor/harbor-reset/tests/test.sh"
    script.chmod(0o644)
    report = verify_folder(out)
    assert report.changed == [
        "evidence/ratings.csv",
        "tasks/harbor/harbor-reset/tests/test.sh",
        "tasks/native.jsonl",
    ]
    assert report.missing == [] and report.extra == []
