"""`itsmreview` commands: the provenance ledger."""

import typer
from itsmreview.cli.base import app, boundary, ensure_schema, fail, open_session

ledger_app = typer.Typer(help="The provenance ledger.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("verify")
@boundary
def ledger_verify() -> None:
    """Recompute the ledger's hash chain; exit 1 at the first broken entry."""
    from itsmreview.ledger.service import verify_chain

    ensure_schema()
    with open_session() as session:
        report = verify_chain(session=session)
    if not report.ok:
        fail(f"ledger entry {report.broken_at}: {report.problem} ({report.entries} entries read)")
    typer.echo(f"ledger ok: {report.entries} entries, chain intact")
