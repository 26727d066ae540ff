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
    path, preset, case, activity, timestamp, timestamp_format, resource, roles, sep, na, encoding
):
    from dataclasses import replace

    from itsmreview.coverage.eventlog import PRESETS, ColumnMapping, standard_mapping

    given = [case, activity, timestamp]
    formats = tuple(timestamp_format or ())
    timestamp_format = formats[0] if len(formats) == 1 else (formats or None)
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
    standard = path.name.lower().endswith((".xes", ".xes.gz", ".parquet"))
    if standard and (any(given) or timestamp_format or resource or roles):
        # XES and parquet: the standard keys for whatever is not given
        return standard_mapping(
            case=case,
            activity=activity,
            timestamp=timestamp,
            timestamp_format=timestamp_format,
            resource=resource,
            roles=tuple(roles or ()),
        )
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


# The options of `log import`, one alias each: the command's signature stays one line per option.
PathArg = Annotated[
    Path,
    typer.Argument(
        help="CSV (.csv/.csv.gz), XES (.xes/.xes.gz) or parquet; a folder of BPI 2014's "
        "four tables with --preset bpi2014."
    ),
]
NameOpt = Annotated[str | None, typer.Option(help="Log name (default: the file name).")]
PresetOpt = Annotated[str | None, typer.Option(help="bpi2013, bpi2014, uci-incidents or helpdesk.")]
CaseOpt = Annotated[str | None, typer.Option(help="Case id column.")]
ActivityOpt = Annotated[str | None, typer.Option(help="Activity column.")]
TimestampOpt = Annotated[str | None, typer.Option(help="Timestamp column.")]
TimestampFormatOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="strftime format, e.g. '%d/%m/%Y %H:%M' (default ISO 8601); repeat it for a "
        "column that mixes forms (each value read by the first that fits)."
    ),
]
ResourceOpt = Annotated[str | None, typer.Option(help="Resource column.")]
RoleOpt = Annotated[list[str] | None, typer.Option(help="Role attribute column (repeatable).")]
SepOpt = Annotated[str | None, typer.Option(help="CSV separator (default ',').")]
NaOpt = Annotated[list[str] | None, typer.Option(help="Extra missing-value token (repeatable).")]
EncodingOpt = Annotated[
    str | None, typer.Option(help="CSV encoding, e.g. latin-1 (default UTF-8).")
]
IncidentsOpt = Annotated[
    Path | None,
    typer.Option(help="bpi2014: Detail_Incident.csv (case attributes of each incident)."),
]
InteractionsOpt = Annotated[
    Path | None,
    typer.Option(help="bpi2014: Detail_Interaction.csv (interactions per incident)."),
]
ChangesOpt = Annotated[
    Path | None,
    typer.Option(help="bpi2014: Detail_Change.csv (type and risk of the related change)."),
]
LinkedOpt = Annotated[
    Path | None,
    typer.Option(
        help="YAML spec of a log of linked tables (events, cases, counted and lookup "
        "tables); PATH is then the folder holding them."
    ),
]
TeamsOpt = Annotated[
    Path | None,
    typer.Option(help="Team mapping of the first role attribute (see `log teams`)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@log_app.command("import")
@boundary
def log_import(
    path: PathArg,
    name: NameOpt = None,
    preset: PresetOpt = None,
    case: CaseOpt = None,
    activity: ActivityOpt = None,
    timestamp: TimestampOpt = None,
    timestamp_format: TimestampFormatOpt = None,
    resource: ResourceOpt = None,
    role: RoleOpt = None,
    sep: SepOpt = None,
    na: NaOpt = None,
    encoding: EncodingOpt = None,
    incidents: IncidentsOpt = None,
    interactions: InteractionsOpt = None,
    changes: ChangesOpt = None,
    linked: LinkedOpt = None,
    teams: TeamsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import an event log and materialise its variants, DF pairs, activities and roles.
    With --preset bpi2014, PATH may be a folder holding BPI 2014's four tables."""
    mapping = _mapping_from_options(
        path, preset, case, activity, timestamp, timestamp_format, resource, role, sep, na, encoding
    )
    result = _import_with_teams(
        path,
        name=name,
        preset=preset,
        mapping=mapping,
        linked_tables={"incidents": incidents, "interactions": interactions, "changes": changes},
        linked_spec=linked,
        teams_file=teams,
    )
    _echo_import(result, as_json)


def _import_with_teams(
    path: Path,
    *,
    name: str | None,
    preset: str | None,
    mapping,
    linked_tables: dict[str, Path | None],
    linked_spec: Path | None,
    teams_file: Path | None,
):
    """`import_log` under a progress bar, then the team mapping of `--teams` in the same
    transaction: a mapping that fails undoes the import (its files go too)."""
    from itsmreview.coverage.service import import_log

    groups = levels = None
    if teams_file is not None:
        from itsmreview.coverage.teams import read_mapping_file

        groups, levels = read_mapping_file(teams_file)  # a bad file is refused before the import
    ensure_schema()
    with progress_bar("importing") as progress, open_session() as session:
        result = import_log(
            path,
            session=session,
            name=name,
            preset=preset,
            mapping=mapping,
            progress=progress,
            linked=linked_tables,
            linked_spec=linked_spec,
        )
        if groups is not None:
            from itsmreview.cli.base import operator
            from itsmreview.coverage.service import discard_files
            from itsmreview.coverage.teams import set_team_mapping

            try:
                set_team_mapping(
                    session=session,
                    actor=operator(),
                    log_name=result.log.name,
                    teams=groups,
                    levels=levels,
                )
            except BaseException:
                if result.created:  # the transaction rolls back: its files go too
                    discard_files(result.log)
                raise
    return result


def _echo_import(result, as_json: bool) -> None:
    """What an import stored: the log's version and counts, and each linked table's rows and
    matches (or the same as JSON)."""
    log = result.log
    info = {
        "name": log.name,
        "version": log.version,
        "created": result.created,
        "cases": log.n_cases,
        "events": log.n_events,
        "variants": log.n_variants,
    }
    if (log.mapping or {}).get("linked"):
        info["linked_tables"] = log.mapping["linked"]
    if as_json:
        echo_json(info)
        return
    state = "imported" if result.created else "unchanged (already imported)"
    typer.echo(
        f"{log.name} v{log.version} {state}: {log.n_cases} cases, {log.n_events} "
        f"events, {log.n_variants} variants"
    )
    for table, found in info.get("linked_tables", {}).items():
        matched = {k: v for k, v in found.items() if k not in ("file", "rows", "sha256")}
        joined = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in matched.items())
        typer.echo(
            f"  {table:<13} {found['file']}: {found['rows']:,} rows"
            + (f"; {joined}" if joined else "")
        )


@log_app.command("list")
@boundary
def log_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List imported logs."""
    from itsmreview.coverage.service import list_logs

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
    from itsmreview.coverage.service import latest_log
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


@log_app.command("teams")
@boundary
def log_teams(
    log: Annotated[str, typer.Argument(help="Log name.")],
    mapping_file: Annotated[
        Path | None,
        typer.Argument(help="CSV (group,team[,level]) or YAML mapping; omit to show it."),
    ] = None,
    attribute: Annotated[
        str | None, typer.Option(help="Role attribute mapped (default: the log's first).")
    ] = None,
    source: Annotated[
        str, typer.Option(help="Where the mapping comes from: expert or external.")
    ] = "expert",
    reference: Annotated[
        str, typer.Option(help="What it rests on, e.g. the org chart's title and date.")
    ] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Map a log's assignment groups to teams (a new version, kept in the ledger), or show
    the groups with their events, cases and teams. Coverage then reads roles by team too."""
    from itsmreview.cli.base import operator
    from itsmreview.coverage.teams import group_table, read_mapping_file, set_team_mapping

    ensure_schema()
    unknown: list[str] = []
    with open_session() as session:
        if mapping_file is not None:
            teams, levels = read_mapping_file(mapping_file)
            mapping, unknown = set_team_mapping(
                session=session,
                actor=operator(),
                log_name=log,
                teams=teams,
                levels=levels,
                attribute=attribute,
                source_kind=source,
                reference=reference,
            )
            attribute = mapping.attribute
        table = group_table(session=session, log_name=log, attribute=attribute)
    mapped = table["team"] != ""
    share = table.loc[mapped, "events"].sum() / max(table["events"].sum(), 1)
    if as_json:
        echo_json(
            {
                "log": log,
                "groups": table.to_dict("records"),
                "mapped_event_share": float(share),
                "unknown_groups": unknown,
            }
        )
        return
    typer.echo(f"{int(mapped.sum())} of {len(table)} groups mapped ({share:.1%} of events)")
    for row in table.itertuples():
        typer.echo(f"  {_shown(row.group):<32} {row.events:>9,} events  {_shown(row.team) or '-'}")
    if unknown:
        typer.echo(f"not in the log (kept): {', '.join(map(_shown, unknown))}")


def _shown(text: str) -> str:
    """Text from a log or a mapping file with control characters escaped, so a terminal
    escape sequence in a group's name is printed, not obeyed."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)
