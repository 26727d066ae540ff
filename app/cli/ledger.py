"""`itsmreview` commands: the provenance ledger."""

import sys
from pathlib import Path
from typing import Annotated

import typer
from itsmreview.cli.base import (
    app,
    boundary,
    echo_json,
    ensure_schema,
    fail,
    open_session,
    operator,
)

ledger_app = typer.Typer(help="The provenance ledger.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("verify")
@boundary
def ledger_verify(
    expect_head: Annotated[
        str | None,
        typer.Option(
            help="SEQ:HASH kept outside the database (a manifest, a paper, a commit); fails when "
            "that entry is missing or differs."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Recompute the hash chain and check the database against it both ways: each entry's
    object exists and is what the entry commits to (ratings, task versions, machine checks,
    team mappings, proposals, adjudications, gates, logs, exports), each object has its
    entry, statuses are the recorded decisions. Exit 1 naming each problem (object, entry,
    what differs), or when --expect-head does not match. Prints the head it ends on."""
    from itsmreview.ledger.evidence.service import verify_ledger

    ensure_schema()
    with open_session() as session:
        report = verify_ledger(
            session=session,
            expect_head=expect_head,
            progress=lambda stage, n: print(f"  {stage}: {n:,}", file=sys.stderr),
            parallel=True,
        )
    if as_json:
        echo_json(report.as_dict())
    else:
        for problem in report.problems:
            typer.echo(f"problem: {problem}")
    head = f"{report.head[0]}:{report.head[1]}" if report.head else "(empty ledger)"
    if report.chain_problem:
        fail(
            f"ledger entry {report.broken_at}: {report.chain_problem}; entries from "
            f"{report.broken_at} on cannot be trusted ({report.entries} entries read)"
        )
    if report.expected_head_problem:
        fail(f"expected head: {report.expected_head_problem}")
    if report.problems:
        fail(
            f"{len(report.problems)} problem(s): the database does not match the ledger "
            f"(missing objects, objects without entries, changed content or statuses); head {head}"
        )
    if not as_json:
        typer.echo(
            f"ledger ok: {report.entries} entries, chain intact, {report.objects_checked} "
            f"objects match their entries; head {head}"
        )
        if report.queued:
            typer.echo(
                f"{report.queued} rating(s) are queued for the gate: their entries are chained "
                "when it applies them (`itsmreview round apply-queued`)"
            )


@ledger_app.command("head")
@boundary
def ledger_head(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Print SEQ:HASH of the newest entry: keep it outside the database and check it later
    with `ledger verify --expect-head`."""
    from itsmreview.ledger.evidence.service import ledger_head as head_of

    ensure_schema()
    with open_session() as session:
        head = head_of(session=session)
    if head is None:
        fail("the ledger is empty")
    if as_json:
        echo_json({"seq": head["seq"], "hash": head["hash"]})
    else:
        typer.echo(head["text"])


@ledger_app.command("add")
@boundary
def ledger_add(
    about: Annotated[
        str,
        typer.Option(
            help="task:ID[@VERSION], log:NAME, rubric:NAME, world:NAME, simulator:NAME, "
            "verifier:NAME or org:NAME."
        ),
    ],
    field: Annotated[str, typer.Option(help="The field or part the source is for.")],
    kind: Annotated[str, typer.Option(help="logs, external or expert.")],
    reference: Annotated[str, typer.Option(help="Title of the source.")],
    url: Annotated[str | None, typer.Option(help="Where to find it (http or https).")] = None,
    doi: Annotated[str | None, typer.Option(help="Its DOI, e.g. 10.4121/uuid:500573e6.")] = None,
    version: Annotated[str | None, typer.Option(help="Version of the source.")] = None,
    note: Annotated[str, typer.Option(help="Anything else worth keeping.")] = "",
) -> None:
    """Record where a field of an artifact came from (the logs, external practice such as a
    paper or a vendor schema, or experts), as a ledger entry."""
    from itsmreview.ledger.evidence.service import Reference, record_source

    ensure_schema()
    with open_session() as session:
        entry = record_source(
            session=session,
            actor=operator(),
            about=about,
            field_name=field,
            kind=kind,
            reference=Reference(reference, url, doi, version),
            note=note,
        )
        seq, artifact = entry.seq, f"{entry.artifact_type}:{entry.artifact_id}"
    typer.echo(f"recorded as ledger entry {seq}: {artifact} {field} <- {kind}")


@ledger_app.command("summary")
@boundary
def ledger_summary(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Field x source kind over the current version of every task (each field counted once),
    overall and per log; review activity apart."""
    from itsmreview.ledger.evidence.service import provenance_summary

    ensure_schema()
    with open_session() as session:
        summary = provenance_summary(session=session)
    if as_json:
        echo_json(summary)
        return
    kinds = ("logs", "external", "expert", "undeclared")
    typer.echo(f"{'field':<16}" + "".join(f"{k:>12}" for k in kinds))
    for row in summary["fields"]:
        typer.echo(f"{row['field']:<16}" + "".join(f"{row[k]:>12}" for k in kinds))
    totals = summary["totals"]
    typer.echo(
        f"{'all fields':<16}" + "".join(f"{(totals['shares'][k] or 0):>12.1%}" for k in kinds)
    )
    typer.echo("activity: " + ", ".join(f"{k} {v}" for k, v in summary["activity"].items()))


@ledger_app.command("export")
@boundary
def ledger_export(
    out: Annotated[Path, typer.Argument(help="File to write.")],
    format: Annotated[str, typer.Option("--format", help="jsonl or prov-json.")] = "jsonl",
    task: Annotated[str | None, typer.Option(help="Only the entries of this task.")] = None,
) -> None:
    """Write the ledger (or one task's entries) as JSON lines or W3C PROV-JSON."""
    from itsmreview.ledger.evidence.service import export_ledger

    ensure_schema()
    with open_session() as session:
        count = export_ledger(out, session=session, fmt=format, external_id=task)
    typer.echo(f"wrote {count} entries as {format} to {out}")
