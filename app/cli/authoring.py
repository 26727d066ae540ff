"""`itsmreview` commands: machine checks and proposed resolutions (benchmark authoring)."""

from pathlib import Path
from typing import Annotated

import typer
from itsmreview.cli.base import app, boundary, echo_json, ensure_schema, open_session, operator

checks_app = typer.Typer(help="Machine checks of task versions.", no_args_is_help=True)
app.add_typer(checks_app, name="checks")
proposals_app = typer.Typer(
    help="Other acceptable resolutions proposed by experts.", no_args_is_help=True
)
app.add_typer(proposals_app, name="proposals")


@checks_app.command("import")
@boundary
def checks_import(
    path: Annotated[Path, typer.Argument(help="JSON or JSON Lines file of check results.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report, change nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Import external check results (structure, reproducibility, ...); a failed check
    blocks the task's approval."""
    from itsmreview.review.ratings.checks import import_checks

    ensure_schema()
    with open_session() as session:
        report = import_checks(path, session=session, actor=operator(), dry_run=dry_run)
    if as_json:
        echo_json({**report, "dry_run": dry_run})
        return
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report["by_status"].items()))
    done = "would import" if dry_run else "imported"
    typer.echo(f"{done} {report['imported']} result(s): {counts}")
    for where, status in sorted(report["redecided"].items()):
        typer.echo(f"  {where}: {status}")


@proposals_app.command("list")
@boundary
def proposals_list(
    round_name: Annotated[str | None, typer.Option("--round", help="Round name.")] = None,
    status: Annotated[
        str | None, typer.Option(help="proposed, accepted or dismissed (default: all).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List proposed resolutions with their id, task, expert and status."""
    from itsmreview.review.gate.round_data import find_round
    from itsmreview.review.repair.service import proposals_frame

    ensure_schema()
    with open_session() as session:
        round_id = find_round(session, round_name).id if round_name else None
        frame = proposals_frame(session=session, round_id=round_id, status=status)
    if as_json:
        echo_json(frame.assign(created_at=frame["created_at"].astype(str)).to_dict("records"))
        return
    if frame.empty:
        typer.echo("no proposals")
    for row in frame.itertuples():
        typer.echo(f"{row.id:>5} {row.status:<10} {row.task}@v{row.version} ({row.expert})")
        typer.echo(f"      {row.description}")


def _decide(proposal_id: int, accept: bool, reason: str) -> None:
    from itsmreview.review.repair.service import decide_proposal

    ensure_schema()
    with open_session() as session:
        proposal = decide_proposal(
            session=session,
            actor=operator(),
            proposal_id=proposal_id,
            accept=accept,
            reason=reason,
        )
        if accept:
            from itsmreview.catalog.models import Task, TaskVersion

            version = session.get(TaskVersion, proposal.accepted_version_id)
            task = session.get(Task, version.task_id)
            done = f"accepted: {task.external_id} is now version {version.version}"
        else:
            done = "dismissed"
    typer.echo(f"proposal {proposal_id} {done}")


@proposals_app.command("accept")
@boundary
def proposals_accept(
    proposal_id: Annotated[int, typer.Argument(help="Proposal id (proposals list).")],
    reason: Annotated[str, typer.Option(help="Why (kept in the ledger).")] = "",
) -> None:
    """Accept a proposal into the task's next version (as one of its alternatives)."""
    _decide(proposal_id, True, reason)


@proposals_app.command("dismiss")
@boundary
def proposals_dismiss(
    proposal_id: Annotated[int, typer.Argument(help="Proposal id (proposals list).")],
    reason: Annotated[str, typer.Option(help="Why (kept in the ledger).")] = "",
) -> None:
    """Dismiss a proposal."""
    _decide(proposal_id, False, reason)


@checks_app.command("builtin")
@boundary
def checks_builtin(
    out: Annotated[Path, typer.Argument(help="JSON file the results are written to.")],
    store: Annotated[
        bool, typer.Option("--import", help="Import them too (as `checks import OUT`).")
    ] = False,
    threshold: Annotated[
        float, typer.Option(help="Instruction similarity (Jaccard) that makes a near twin.")
    ] = 0.8,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Run the checks itsmreview makes itself on every task's newest version: do-nothing
    (would an agent that does nothing pass?) and duplicate (the same or nearly the same
    instruction as another task). Writes them in the `checks import` format."""
    import json
    from collections import Counter

    from itsmreview.files import write_text_atomically
    from itsmreview.review.ratings.checks import builtin_results, import_checks

    ensure_schema()
    with open_session() as session:
        results = builtin_results(session=session, actor=operator(), threshold=threshold)
    if not results:
        typer.echo("no task in the catalog: nothing to check")
        return
    write_text_atomically(out, json.dumps({"checks": results}, indent=1, ensure_ascii=False))
    counts = Counter((r["check"], r["status"]) for r in results)
    report = None
    if store:
        with open_session() as session:
            report = import_checks(out, session=session, actor=operator())
    if as_json:
        by = {f"{check}:{status}": n for (check, status), n in sorted(counts.items())}
        echo_json({"results": len(results), "by_check": by, "out": str(out), "imported": report})
        return
    for check in ("do-nothing", "duplicate"):
        shown = ", ".join(f"{n} {s}" for (c, s), n in sorted(counts.items()) if c == check)
        typer.echo(f"{check}: {shown}")
    typer.echo(f"written to {out}" + ("; imported" if store else f" (import: checks import {out})"))
