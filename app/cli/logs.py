"""`itsmreview` commands: event logs: import and statistics."""

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
    progress_bar,
)

log_app = typer.Typer(help="Event logs: import and statistics.", no_args_is_help=True)
app.add_typer(log_app, name="log")


def _mapping_from_options(
    preset, case, activity, timestamp, timestamp_format, resource, roles, sep, na, encoding
):
    from dataclasses import replace

    from itsmreview.coverage.eventlog import PRESETS, ColumnMapping

    given = [case, activity, timestamp]
    reading = {"sep": sep, "encoding": encoding, "na_values": tuple(na) if na else None}
    reading = {k: v for k, v in reading.items() if v is not None}
    if preset:
        column_options = [case, activity, timestamp, timestamp_format, resource, roles]
        if any(column_options):
            fail(
                f"--preset {preset} fixes the columns; give either --preset or the column "
                "options (--case, --activity, --timestamp, --timestamp-format, --resource, "
                "--role), not both. --sep, --encoding and --na may go with a preset."
            )
        return replace(PRESETS[preset], **reading) if reading and preset in PRESETS else None
    if not any(given):
        if reading or timestamp_format or resource or roles:
            fail("a column mapping needs --case, --activity and --timestamp (or --preset)")
        return None
    if not all(given):
        fail("a column mapping needs all of --case, --activity and --timestamp")
    return ColumnMapping(
        case=case,
        activity=activity,
        timestamp=timestamp,
        timestamp_format=timestamp_format,
        resource=resource,
        roles=tuple(roles or ()),
        sep=sep or ",",
        na_values=tuple(na or ()),
        encoding=encoding or "utf-8-sig",
    )


@log_app.command("import")
@boundary
def log_import(
    path: Annotated[
        Path, typer.Argument(help="CSV (.csv/.csv.gz), XES (.xes/.xes.gz) or parquet.")
    ],
    name: Annotated[str | None, typer.Option(help="Log name (default: the file name).")] = None,
    preset: Annotated[
        str | None, typer.Option(help="bpi2013, bpi2014, uci-incidents or helpdesk.")
    ] = None,
    case: Annotated[str | None, typer.Option(help="Case id column.")] = None,
    activity: Annotated[str | None, typer.Option(help="Activity column.")] = None,
    timestamp: Annotated[str | None, typer.Option(help="Timestamp column.")] = None,
    timestamp_format: Annotated[
        str | None, typer.Option(help="strftime format, e.g. '%d/%m/%Y %H:%M' (default ISO 8601).")
    ] = None,
    resource: Annotated[str | None, typer.Option(help="Resource column.")] = None,
    role: Annotated[
        list[str] | None, typer.Option(help="Role attribute column (repeatable).")
    ] = None,
    sep: Annotated[str | None, typer.Option(help="CSV separator (default ',').")] = None,
    na: Annotated[
        list[str] | None, typer.Option(help="Extra missing-value token (repeatable).")
    ] = None,
    encoding: Annotated[
        str | None, typer.Option(help="CSV encoding, e.g. latin-1 (default UTF-8).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Import an event log and materialise its variants, DF pairs, activities and roles."""
    from itsmreview.coverage.service import import_log

    mapping = _mapping_from_options(
        preset, case, activity, timestamp, timestamp_format, resource, role, sep, na, encoding
    )
    ensure_schema()
    with progress_bar("importing") as progress, open_session() as session:
        result = import_log(
            path, session=session, name=name, preset=preset, mapping=mapping, progress=progress
        )
    log = result.log
    info = {
        "name": log.name,
        "version": log.version,
        "created": result.created,
        "cases": log.n_cases,
        "events": log.n_events,
        "variants": log.n_variants,
    }
    if as_json:
        echo_json(info)
    else:
        state = "imported" if result.created else "unchanged (already imported)"
        typer.echo(
            f"{log.name} v{log.version} {state}: {log.n_cases} cases, {log.n_events} "
            f"events, {log.n_variants} variants"
        )


@log_app.command("list")
@boundary
def log_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List imported logs."""
    from itsmreview.coverage.queries import list_logs

    ensure_schema()
    with open_session() as session:
        logs = [
            {
                "name": lg.name,
                "version": lg.version,
                "cases": lg.n_cases,
                "events": lg.n_events,
                "variants": lg.n_variants,
                "imported_at": lg.imported_at,
            }
            for lg in list_logs(session=session)
        ]
    if as_json:
        echo_json(logs)
        return
    for lg in logs:
        typer.echo(
            f"{lg['name']:<24} v{lg['version']:<3} {lg['cases']:>8} cases "
            f"{lg['events']:>10} events {lg['variants']:>7} variants"
        )


@log_app.command("stats")
@boundary
def log_stats(
    name: Annotated[str, typer.Argument(help="Log name (its newest version).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Counts of a log: cases, events, activities, variants, DF pairs, singletons."""
    from itsmreview.coverage.queries import latest_log
    from itsmreview.errors import NotFound

    ensure_schema()
    with open_session() as session:
        log = latest_log(session=session, name=name)
        if log is None:
            raise NotFound(f"no log named {name!r}; `itsmreview log list` shows the names")
        stats = {
            "name": log.name,
            "version": log.version,
            "cases": log.n_cases,
            "events": log.n_events,
            "activities": log.n_activities,
            "variants": log.n_variants,
            "collapsed_variants": log.n_collapsed_variants,
            "df_pairs": log.n_df_pairs,
            "singleton_variants": log.n_singleton_variants,
            "first_timestamp": log.first_timestamp,
            "last_timestamp": log.last_timestamp,
        }
    if as_json:
        echo_json(stats)
        return
    for key, value in stats.items():
        typer.echo(f"{key:<20} {value}")
