"""The Python API of docs/api.md: every exported name is documented, and the doc's example
runs as written."""

import re
from pathlib import Path

from itsmreview import api

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_every_exported_name_is_documented_and_importable():
    text = DOC.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)[(`]", text, flags=re.M))
    documented |= set(
        re.findall(r"`(\w+Error|InvalidInput|NotFound|Conflict|PermissionDenied)`", text)
    )
    assert documented == set(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None


def test_the_documented_example_runs(configured, tmp_path, monkeypatch, capsys):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)[1]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(DOC), "exec"), {"__name__": "api_example"})
    printed = capsys.readouterr().out
    assert "incidents: 300 cases" in printed
    assert "Pilot: " in printed
    assert "exported 2 approved task(s)" in printed
    assert (tmp_path / "api-example" / "export" / "manifest.json").is_file()
