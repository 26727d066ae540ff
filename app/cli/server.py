"""`itsmreview` commands: serving the app, the demo and database migrations."""

import os
import sys
from typing import Annotated

import typer
from itsmreview.cli.base import STREAMLIT_APP, app, boundary, ensure_schema, open_session
from itsmreview.settings import get_settings

db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
app.add_typer(db_app, name="db")


LOCAL_ADDRESS = "127.0.0.1"


@app.command()
@boundary
def demo(
    port: Annotated[int | None, typer.Option(help="Port (default: ITSMREVIEW_PORT or 8501).")] = (
        None
    ),
    no_serve: Annotated[
        bool, typer.Option("--no-serve", help="Load the demo, do not serve.")
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Seed of the synthetic log.")] = None,
    cases: Annotated[int | None, typer.Option(help="Cases in the synthetic log.")] = None,
    address: Annotated[
        str,
        typer.Option(
            help="Address to serve on; the demo's passwords are public, so this machine only "
            "by default."
        ),
    ] = LOCAL_ADDRESS,
) -> None:
    """Create or upgrade the database, load the demo content (idempotent), then serve."""
    from itsmreview.db import describe_url
    from itsmreview.demo.loader import DEMO_PASSWORD, DEMO_USERS, load_demo

    settings = get_settings()
    typer.echo(f"database: {describe_url(settings.resolved_database_url())}")
    ensure_schema()
    with open_session() as session:
        summary = load_demo(
            session=session,
            data_dir=settings.data_dir,
            seed=seed if seed is not None else settings.demo_seed,
            cases=cases if cases is not None else settings.demo_cases,
            progress=lambda message: typer.echo(f"  loading {message} ..."),
        )
    typer.echo(
        f"demo ready: {summary.users} users, logs "
        f"{' and '.join(repr(name) for name in summary.log_names)}, "
        f"{summary.ratings} ratings ({'new' if summary.round_created else 'already loaded'})"
    )
    port = port or settings.port
    typer.echo(f"\nOpen http://localhost:{port} and log in as one of (password {DEMO_PASSWORD!r}):")
    for username, role, display, _ in DEMO_USERS:
        typer.echo(f"  {username:<9} {role.value:<7} {display}")
    if not no_serve:
        serve(port=port, address=address)


@app.command()
@boundary
def serve(
    port: Annotated[
        int | None, typer.Option(help="Port (default: ITSMREVIEW_PORT or 8501).")
    ] = None,
    address: Annotated[
        str,
        typer.Option(
            help="Address to listen on: this machine only by default; 0.0.0.0 for a team "
            "(behind a TLS proxy)."
        ),
    ] = LOCAL_ADDRESS,
) -> None:
    """Serve the Streamlit app on the configured database (migrated first if it is behind)."""
    ensure_schema()
    settings = get_settings()
    port = port or settings.port
    env = dict(os.environ)
    env["ITSMREVIEW_DATABASE_URL"] = settings.resolved_database_url()
    env["ITSMREVIEW_DATA_DIR"] = str(settings.data_dir.resolve())
    # a server's experts do not wait for the gate: a worker thread applies their submits, or,
    # with ITSMREVIEW_JOBS=worker, the `itsmreview worker` processes
    env.setdefault("ITSMREVIEW_GATE_APPLY", "queue" if settings.jobs == "worker" else "background")
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(STREAMLIT_APP),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "minimal",
    ]
    typer.echo(f"serving on http://localhost:{port} (Ctrl+C stops)")
    sys.stdout.flush()
    # exec, not a child process: signals (Ctrl+C, SIGTERM from a supervisor) reach Streamlit
    os.execve(sys.executable, command, env)


@db_app.command("upgrade")
@boundary
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Apply migrations up to REVISION (default: the newest)."""
    from itsmreview.db import current_revision, describe_url, get_engine, upgrade_database

    engine = get_engine()
    before = current_revision(engine)
    upgrade_database(engine, revision)
    after = current_revision(engine)
    typer.echo(f"{describe_url(str(engine.url))}: {before or 'empty'} -> {after}")


@db_app.command("current")
@boundary
def db_current() -> None:
    """Print the revision the database is at."""
    from itsmreview.db import current_revision

    typer.echo(current_revision() or "empty (run `itsmreview db upgrade`)")
