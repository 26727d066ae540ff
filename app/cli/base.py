"""What every command module shares: the root Typer app, the error boundary, sessions."""

import contextlib
import functools
import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from itsmreview import __version__
from itsmreview.errors import ItsmReviewError

app = typer.Typer(
    help="itsmreview: expert review of ITSM agent-benchmark tasks next to real process logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
STREAMLIT_APP = Path(__file__).parent.parent / "streamlit_app.py"


def fail(message: str) -> None:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(1)


def boundary(command):
    """Translate domain errors into a message and a non-zero exit, once, at the edge."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except ItsmReviewError as exc:
            fail(str(exc))
        except ValueError as exc:
            fail(str(exc))
        except OSError as exc:  # a file the command was pointed at: name it, no traceback
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}")

    return wrapper


def echo_json(value) -> None:
    typer.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def open_session():
    from itsmreview.db import session_scope

    return session_scope()


def ensure_schema() -> None:
    from itsmreview.db import current_revision, describe_url, ensure_current, get_engine

    engine = get_engine()
    try:
        current_revision(engine)
    except Exception as exc:  # connection problems surface here, with the URL
        fail(f"cannot reach the database {describe_url(str(engine.url))}: {exc}")
    ensure_current(engine)


def operator():
    from itsmreview.accounts.models import Role, User

    return User(id=None, username="cli", display_name="cli", role=Role.admin, password_hash="")


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(__version__)
        raise typer.Exit()


@contextlib.contextmanager
def progress_bar(label: str):
    """Progress on standard error: a bar with its ETA on a terminal; elsewhere (a log file, a
    pipe, CI) plain lines, see `plain_progress`. Yields the `progress(stage, fraction)`
    callback that services take."""
    if not sys.stderr.isatty():
        yield plain_progress(label)
        return
    with typer.progressbar(length=100, label=label, file=sys.stderr) as bar:
        done = [0]

        def progress(stage: str, fraction: float) -> None:
            step = int(fraction * 100) - done[0]
            if step > 0:
                bar.update(step)
                done[0] += step
            bar.label = stage

        yield progress


PLAIN_EVERY_S = 10.0  # a plain progress line at most this often within one stage


def plain_progress(label: str, every: float = PLAIN_EVERY_S, clock=time.monotonic):
    """`progress(stage, fraction)` writing a line ('importing: 40% reading: 1,200,000 rows,
    95,000 events/s, about 12 s left') when a stage begins (its text before ':') and at most
    every `every` seconds within it."""
    started = clock()
    last = {"stage": None, "at": started}

    def progress(stage: str, fraction: float) -> None:
        now = clock()
        kind = stage.split(":", 1)[0]
        if kind == last["stage"] and now - last["at"] < every:
            return
        last.update(stage=kind, at=now)
        elapsed = now - started
        left = (
            f", about {elapsed * (1 - fraction) / fraction:,.0f} s left"
            if 0.05 <= fraction < 1 and elapsed >= 1
            else ""
        )
        print(f"{label}: {int(fraction * 100)}% {stage}{left}", file=sys.stderr, flush=True)

    return progress
