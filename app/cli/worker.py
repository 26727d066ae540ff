"""`itsmreview worker` and `itsmreview jobs`: running and reading the job queue."""

import signal
from typing import Annotated

import typer
from itsmreview.cli.base import app, boundary, echo_json, ensure_schema, open_session

jobs_app = typer.Typer(
    help="The job queue that `itsmreview worker` processes run.", no_args_is_help=True
)
app.add_typer(jobs_app, name="jobs")


@app.command("worker")
@boundary
def worker_command(
    poll: Annotated[
        float,
        typer.Option(
            help="Seconds between looks at the queue when nothing wakes the worker "
            "(PostgreSQL wakes it at once when a job or a rating is queued).",
            min=0.05,
        ),
    ] = 2.0,
    kind: Annotated[
        list[str] | None,
        typer.Option(help="Run only jobs of this kind (repeatable; default: every kind)."),
    ] = None,
) -> None:
    """Run queued background work until stopped (Ctrl+C or SIGTERM).

    Model reviews, log and task imports and exports started from pages, the lead's figures,
    and the ratings waiting for the approval gate. Start any number, on any host that
    reaches the database; web processes queue work for them with ITSMREVIEW_JOBS=worker."""
    from itsmreview.db import describe_url
    from itsmreview.settings import get_settings
    from itsmreview.worker import worker

    ensure_schema()
    running = worker(poll_s=poll, kinds=kind or None)
    signal.signal(signal.SIGTERM, lambda *_: running.stop())
    url = describe_url(get_settings().resolved_database_url())
    typer.echo(f"worker {running.name!r} on {url}: waiting for jobs (Ctrl+C stops)")
    try:
        running.run()
    except KeyboardInterrupt:
        running.stop()
    typer.echo(f"worker stopped after {running.ran} job(s)")


@jobs_app.command("list")
@boundary
def jobs_list(
    limit: Annotated[int, typer.Option(help="How many of the newest jobs.", min=1)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The newest jobs: kind, status, attempts, progress, which worker, any error."""
    from itsmreview.jobs.service import recent_jobs

    ensure_schema()
    with open_session() as session:
        frame = recent_jobs(session=session, limit=limit)
    if as_json:
        echo_json(frame.astype(object).where(frame.notna(), None).to_dict(orient="records"))
        return
    if frame.empty:
        typer.echo("no jobs")
        return
    for row in frame.itertuples():
        line = (
            f"{row.id:>6} {row.kind:<13} {row.status:<8} try {row.attempts} "
            f"{row.progress:>4.0%} {row.message or ''}"
        )
        if row.error:
            line += f"  error: {row.error}"
        typer.echo(line)
