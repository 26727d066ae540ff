"""The generated parts of docs/cli.md: each command's `--help`, as the Typer app prints it, so
that the reference cannot drift from the commands.

    make docs         (cog -r: rewrites the blocks)
    make test         (cog --check: fails when a block differs from what the app prints)
"""

import os

from itsmreview.cli import app
from typer.testing import CliRunner

WIDTH = "100"  # columns of the help text, whatever the terminal


def help_text(path: str) -> str:
    """What `itsmreview PATH --help` prints, at a fixed width and without colour."""
    env = {"COLUMNS": WIDTH, "TERMINAL_WIDTH": WIDTH, "NO_COLOR": "1", "TERM": "dumb"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = CliRunner().invoke(app, [*path.split(), "--help"], prog_name="itsmreview")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if result.exit_code != 0:
        raise RuntimeError(f"itsmreview {path} --help failed: {result.output}")
    return "\n".join(line.rstrip() for line in result.output.splitlines()).strip("\n")


def cli_help(path: str) -> None:
    """Write `path`'s help into the cog block being generated, as a text block."""
    import cog  # exists only while cog runs a block

    cog.outl("```text")
    cog.outl(help_text(path))
    cog.outl("```")
