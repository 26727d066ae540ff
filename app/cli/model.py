"""`itsmreview model` commands: the model rater and gap hints (Anthropic API)."""

from pathlib import Path
from typing import Annotated

import typer
from itsmreview.cli.base import (
    app,
    boundary,
    echo_json,
    ensure_schema,
    open_session,
    operator,
    progress_bar,
)

model_app = typer.Typer(
    help="Model assistance: a model rater beside the experts, and task hints for coverage gaps. "
    "Needs ANTHROPIC_API_KEY; nothing is sent without one of these commands.",
    no_args_is_help=True,
)
app.add_typer(model_app, name="model")


def _money(value: float | None) -> str:
    return "no price known" if value is None else f"${value:,.4f}"


@model_app.command("rate")
@boundary
def rate_command(
    round_name: Annotated[
        str | None, typer.Option("--round", help="Round name (default: the newest).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help="Rate at most this many tasks, most valuable first.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Anthropic model (default: ITSMREVIEW_MODEL).")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the plan, cost estimate and first request only."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Let the model rate the round's tasks on its rubric, from what an expert sees. Resumes:
    tasks this model and prompt rated are skipped. Ctrl-C cancels (answers so far are kept)."""
    from itsmreview.review.assist.rater import (
        plan_model_review,
        run_model_review,
        start_model_review,
    )

    ensure_schema()
    with open_session() as session:
        plan = plan_model_review(
            session=session, actor=operator(), round_name=round_name, model=model, limit=limit
        )
    estimate = (
        f"{len(plan.to_rate)} task(s) of round {plan.round_name!r} to rate with {plan.model} "
        f"({plan.already_rated} rated before); about {plan.estimated_input_tokens:,} input and "
        f"{plan.estimated_output_tokens:,} output tokens, about {_money(plan.estimated_cost_usd)}"
    )
    if dry_run:
        if as_json:
            echo_json(plan.as_dict() | {"first_request": plan.sample_request})
        else:
            typer.echo(estimate)
            typer.echo("first request (nothing was sent):")
            echo_json(plan.sample_request)
        return
    typer.echo(estimate, err=True)
    with open_session() as session:
        run = start_model_review(
            session=session, actor=operator(), round_name=round_name, model=model, limit=limit
        )
    with progress_bar("model review") as progress:
        run = run_model_review(run.id, progress=progress)
    report = {
        "run": run.id,
        "round": plan.round_name,
        "model": run.model,
        "prompt_sha256": run.prompt_sha256,
        "status": run.status,
        "rated": run.rated,
        "skipped": run.skipped,
        "failed": run.failed,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "cost_usd": run.cost_usd,
        "error": run.error or None,
    }
    if as_json:
        echo_json(report)
    else:
        typer.echo(
            f"{run.status}: rated {run.rated}, skipped {run.skipped} (rated before), failed "
            f"{run.failed}; {run.input_tokens:,} input and {run.output_tokens:,} output tokens, "
            f"{_money(run.cost_usd)} ({run.model})"
        )
        if run.error:
            typer.echo(f"  {run.error}")
    if run.status == "failed":
        raise typer.Exit(1)


@model_app.command("hints")
@boundary
def hints_command(
    log: Annotated[str, typer.Argument(help="Log name (its newest version).")],
    out: Annotated[
        Path, typer.Argument(help="Output file name: OUT.jsonl and OUT.md are written.")
    ],
    top: Annotated[int, typer.Option(help="Hints for this many most frequent gaps.")] = 10,
    model: Annotated[
        str | None, typer.Option(help="Anthropic model (default: ITSMREVIEW_MODEL).")
    ] = None,
) -> None:
    """Draft task hints for the most frequent variants of a log that no approved task covers,
    from the variant's statistics and real cases; each hint is recorded in the ledger."""
    from itsmreview.review.assist import client as model_client
    from itsmreview.review.assist.hints import draft_gap_hints, write_hints

    ensure_schema()
    model_client.make_client()  # no key: say how to enable it before any work
    with open_session() as session, progress_bar("gap hints") as progress:
        hints = draft_gap_hints(
            session=session,
            actor=operator(),
            log_name=log,
            top=top,
            model=model,
            progress=progress,
        )
    jsonl, markdown = write_hints(hints, out)
    drafted = sum(1 for h in hints if h.hint)
    cost = [h.cost_usd for h in hints if h.cost_usd is not None]
    typer.echo(
        f"{drafted} hint(s) of {len(hints)} gap(s) written to {jsonl} and {markdown}; "
        f"{_money(sum(cost) if cost else None)}"
    )
    for failed in (h for h in hints if not h.hint):
        typer.echo(f"  variant #{failed.rank}: no hint: {failed.error}")
