"""Every CLI command has help and a section in docs/cli.md; every setting is documented."""

from pathlib import Path

import typer.main
from itsmreview.cli import app
from itsmreview.settings import Settings
from typer.testing import CliRunner

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _commands(group, prefix: str = "itsmreview"):
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if getattr(command, "commands", None) is not None:
            yield from _commands(command, path)
        else:
            yield path, command


COMMANDS = list(_commands(typer.main.get_command(app)))


def test_there_are_commands():
    names = {path for path, _ in COMMANDS}
    assert {
        "itsmreview demo",
        "itsmreview serve",
        "itsmreview db upgrade",
        "itsmreview users add",
        "itsmreview users list",
    } <= names


def test_every_command_has_help_text():
    runner = CliRunner()
    for path, command in COMMANDS:
        assert (command.help or "").strip(), f"{path} has no help text"
        result = runner.invoke(app, [*path.split()[1:], "--help"])
        assert result.exit_code == 0, f"{path} --help failed: {result.output}"
        assert "Usage" in result.output
        for param in command.params:
            if param.param_type_name == "option" and param.name != "help":
                assert (param.help or "").strip(), f"{path} {param.opts[0]} has no help"


def test_every_command_is_documented():
    text = (DOCS / "cli.md").read_text()
    missing = [path for path, _ in COMMANDS if f"## `{path}" not in text]
    assert not missing, f"docs/cli.md lacks sections for {missing}"


def test_every_setting_is_described_and_documented():
    text = (DOCS / "configuration.md").read_text()
    for name, field in Settings.model_fields.items():
        assert field.description, f"setting {name} has no description"
        assert f"ITSMREVIEW_{name.upper()}" in text, f"ITSMREVIEW_{name.upper()} undocumented"
