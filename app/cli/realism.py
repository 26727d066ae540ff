"""`itsmreview` commands: simulator realism against the logs (issue 36); so far a log's own
behaviour profile."""

import json
from typing import Annotated

import typer
from itsmreview.cli.base import app, boundary, ensure_schema, fail, open_session
from itsmreview.cli.logs import _shown as shown

realism_app = typer.Typer(help="Simulator realism measured against the logs.", no_args_is_help=True)
app.add_typer(realism_app, name="realism")

LABELS = {
    "ping_pong_rate": "ping-pong rate",
    "reassignments_per_case": "reassignments per case",
    "wait_user_rate": "wait-user rate",
    "wait_user_per_case": "wait-user count per case",
    "cancel_rate": "cancel rate",
    "reopen_rate": "reopen rate",
    "case_length": "case length (events)",
}


def _number(kind: str, value: float) -> str:
    if kind != "rate":
        return f"{value:.3f}"
    return f"{value:.1%}" if value >= 0.01 or value == 0 else f"{value:.3%}"  # a rare cancel


def _rows(report: dict) -> list[tuple[str, ...]]:
    """The metrics as table rows: metric, value, interval, noise floor (or the reason)."""
    rows = []
    for key, label in LABELS.items():
        found = report["metrics"][key]
        if not found["available"]:
            rows.append((label, found["reason"]))
            continue
        kind, (low, high) = found["kind"], found["interval"]
        rows.append(
            (
                label,
                _number(kind, found["value"]),
                f"{_number(kind, low)} - {_number(kind, high)}",
                _number(kind, found["noise_floor"]),
            )
        )
    return rows


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Rows aligned under `header`: the first column left, the others right; a row of two
    cells (a metric and why it is missing) runs across."""
    full = [r for r in rows if len(r) == len(header)]
    widths = [max(len(r[i]) for r in [header, *full]) for i in range(len(header))]
    widths[0] = max(len(r[0]) for r in [header, *rows])

    def line(row):
        if len(row) != len(header):
            return f"{row[0]:<{widths[0]}}  {row[1]}"
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        return "  ".join(cells).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *map(line, rows)]


def _echo_text(report: dict) -> None:
    vocab = report["vocabulary"]
    typer.echo(
        f"{report['log']} v{report['version']}: {report['cases']:,} cases, "
        f"{report['events']:,} events; assignment group: {shown(vocab['group_attribute'] or '-')}; "
        f"wait-user: {shown(', '.join(vocab['wait_user'])) or '-'} ({vocab['source']})"
    )
    if vocab["absent"]:
        typer.echo(f"named but not in the log: {shown(', '.join(vocab['absent']))}")
    typer.echo("")
    header = ("metric", "value", "95% interval", "noise floor")
    for line in _table(header, _rows(report)):
        typer.echo(line)
    for key, check in report["counter_checks"].items():
        typer.echo(
            f"{LABELS[key]}: the log's own counter {check['attribute']!r} has mean "
            f"{check['log_mean']:.3f} (computed {check['computed_mean']:.3f}; equal in "
            f"{check['equal_share']:.1%} of {check['cases']:,} cases)"
        )
    distribution = report["activity_distribution"]
    typer.echo("")
    rows = [
        (shown(activity), f"{events:,}", f"{distribution['share'][activity]:.1%}")
        for activity, events in distribution["events"].items()
    ]
    for line in _table(("activity", "events", "share"), rows):
        typer.echo(line)
    typer.echo(f"noise floor (Jensen-Shannon divergence): {distribution['noise_floor']:.6f}")


@realism_app.command("report")
@boundary
def realism_report(
    log: Annotated[
        str | None,
        typer.Option(help="Log name (its newest version): report its own behaviour profile."),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(help="Role attribute holding the assignment group (default: the preset's)."),
    ] = None,
    wait_user: Annotated[
        list[str] | None,
        typer.Option(help="Activity meaning the case waits for its user (repeatable)."),
    ] = None,
    cancel: Annotated[
        list[str] | None, typer.Option(help="Activity meaning a cancellation (repeatable).")
    ] = None,
    reopen: Annotated[
        list[str] | None, typer.Option(help="Activity meaning a reopening (repeatable).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap and the random halves.")] = 36,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """A log's behaviour: ping-pong, waits for the user, reassignments, case length, cancel and
    reopen rates and the activity distribution, with 95% intervals and the noise floor of
    two random halves of its cases."""
    from itsmreview.realism.service import log_profile

    if log is None:
        fail("give --log NAME (`itsmreview log list` shows the names)")
    ensure_schema()
    with open_session() as session:
        report = log_profile(
            session=session,
            name=log,
            group=group,
            wait_user=tuple(wait_user) if wait_user else None,
            cancel=tuple(cancel) if cancel else None,
            reopen=tuple(reopen) if reopen else None,
            seed=seed,
        )
    if as_json:
        typer.echo(json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False))
        return
    _echo_text(report)
