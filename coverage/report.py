"""Coverage of an imported log by the tasks derived from it (service layer)."""

from enum import StrEnum

from itsmreview.catalog.queries import task_sources
from itsmreview.coverage import queries
from itsmreview.coverage.metrics import CoverageReport, LogTables, TaskSource, compute_coverage
from itsmreview.coverage.outcomes import (
    ATTRIBUTE_PREFIX,
    case_outcomes,
    declared_outcomes,
    outcome_coverage,
)
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.storage import get_storage
from sqlmodel import Session


class TaskFilter(StrEnum):
    approved = "approved"
    rated = "rated"
    all = "all"


def load_log_tables(*, session: Session, log_id: int, n_cases: int) -> LogTables:
    frames = queries.log_tables_frames(session=session, log_id=log_id)
    return LogTables(
        raw=frames["raw"],
        collapsed=frames["collapsed"],
        df_pairs=frames["df_pairs"],
        activities=frames["activities"],
        roles=frames["roles"],
        n_cases=n_cases,
    )


def _case_variants(events_path: str | None, case_ids: set[str]) -> dict[str, str]:
    if not case_ids or not events_path:
        return {}
    found = (
        get_storage()
        .read_table(
            events_path,
            "cases.parquet",
            columns=["case_id", "variant_key"],
            filters=[("case_id", "in", sorted(case_ids))],
        )
        .to_pandas()
    )
    return dict(zip(found["case_id"].astype(str), found["variant_key"], strict=True))


def declared_sources(
    *,
    session: Session,
    log_name: str,
    task_filter: TaskFilter,
    tables: LogTables,
    events_path: str | None,
    persona: str | None = None,
    track: str | None = None,
) -> tuple[list[TaskSource], dict[str, list[str]]]:
    """Task sources with case ids resolved to their variants; also unresolved case ids."""
    chosen = {"log_name": log_name, "persona": persona, "track": track}
    if task_filter == TaskFilter.approved:
        rows = task_sources(session=session, statuses=("approved",), **chosen)
    elif task_filter == TaskFilter.rated:
        rows = task_sources(session=session, rated_only=True, **chosen)
    else:
        rows = task_sources(session=session, **chosen)
    return resolve_sources(rows, tables=tables, events_path=events_path)


def resolve_sources(
    rows: list[tuple[str, dict]], *, tables: LogTables, events_path: str | None
) -> tuple[list[TaskSource], dict[str, list[str]]]:
    """(task id, source) pairs as TaskSources, case ids resolved to their variants; also the
    case ids the log does not contain (task id -> case ids)."""
    wanted = {str(c) for _, source in rows for c in source.get("case_ids", [])}
    case_variant = _case_variants(events_path, wanted)
    by_key = dict(zip(tables.raw["sequence_key"], tables.raw["sequence"], strict=True))
    sources, unresolved = [], {}
    for task_id, source in rows:
        sequences = [tuple(s) for s in source.get("variants", [])]
        for case_id in source.get("case_ids", []):
            key = case_variant.get(str(case_id))
            if key is None:
                unresolved.setdefault(task_id, []).append(str(case_id))
            elif tuple(by_key[key]) not in sequences:
                sequences.append(tuple(by_key[key]))
        roles = {
            attribute: set(map(str, values))
            for attribute, values in (source.get("roles") or {}).items()
        }
        sources.append(
            TaskSource(
                task_id,
                sequences,
                roles,
                case_ids=tuple(str(c) for c in source.get("case_ids", [])),
                outcomes=declared_outcomes(source),
            )
        )
    return sources, unresolved


def configured_sla_hours() -> dict[str, float] | None:
    """The SLA targets of ITSMREVIEW_SLA_HOURS, or None. Raises InvalidInput when malformed."""
    from itsmreview.coverage.outcomes import parse_sla_hours
    from itsmreview.settings import get_settings

    text = get_settings().sla_hours
    if not text:
        return None
    try:
        return parse_sla_hours(text)
    except ValueError as exc:
        raise InvalidInput(f"ITSMREVIEW_SLA_HOURS: {exc}") from None


def _with_teams(
    session: Session, log_name: str, tables: LogTables, sources: list[TaskSource]
) -> tuple[LogTables, list[TaskSource]]:
    """With a team mapping of the log, its teams (and levels) as the role attributes `team`
    (and `level`) as well."""
    from itsmreview.coverage.teams import at_team_level

    mapping = queries.newest_team_mapping(session=session, log_name=log_name)
    if mapping is None:
        return tables, sources
    return at_team_level(tables, sources, mapping.attribute, mapping.teams, mapping.levels)


def _case_outcomes(events_path: str | None, sla_hours: dict[str, float] | None):
    """The outcomes of the log's cases (coverage.outcomes), or None for a log whose cases
    carry no attributes."""
    if not events_path:
        return None
    storage = get_storage()
    if not storage.exists(events_path, "cases.parquet"):
        return None
    schema = storage.read_schema(events_path, "cases.parquet")
    wanted = [n for n in schema.names if n.startswith(ATTRIBUTE_PREFIX)]
    if not wanted:
        return None
    extra = ["throughput_s"] if sla_hours else []
    cases = storage.read_table(
        events_path, "cases.parquet", columns=["case_id", *extra, *wanted]
    ).to_pandas()
    return case_outcomes(cases, sla_hours)


def _report(
    session: Session, log_name: str, tables: LogTables, sources: list[TaskSource], outcomes
) -> CoverageReport:
    """Coverage by `sources`, by team too where the log has a mapping, with the outcomes."""
    tables, sources = _with_teams(session, log_name, tables, sources)
    report = compute_coverage(tables, sources)
    if outcomes is not None:
        report.outcomes = outcome_coverage(
            outcomes, [s.case_ids for s in sources], [s.outcomes for s in sources]
        )
    return report


def _task_filter(task_filter: TaskFilter | str) -> TaskFilter:
    try:
        return TaskFilter(task_filter)
    except ValueError:
        raise InvalidInput(
            f"task filter {task_filter!r} is not one of approved, rated, all"
        ) from None


def _newest_log(session: Session, log_name: str):
    log = queries.latest_log(session=session, name=log_name)
    if log is None:
        raise NotFound(f"no log named {log_name!r}; `itsmreview log list` shows the names")
    return log


def coverage_report(
    *,
    session: Session,
    log_name: str,
    task_filter: TaskFilter | str = TaskFilter.all,
    sla_hours: dict[str, float] | None = None,
    persona: str | None = None,
    track: str | None = None,
) -> tuple[CoverageReport, dict[str, list[str]]]:
    """Coverage of the newest version of `log_name` by the filtered tasks, and the case ids
    that tasks declare but the log does not contain (task id -> case ids). A log whose cases
    carry attributes gets outcome coverage too (`sla_hours`: hours per priority, for the SLA
    outcome). `persona` and `track` restrict the tasks to that persona or track."""
    return _reports(
        session=session,
        log_name=log_name,
        personas=[persona],
        task_filter=task_filter,
        track=track,
        sla_hours=sla_hours,
    )[persona]


def coverage_by_persona(
    *,
    session: Session,
    log_name: str,
    personas: list[str | None],
    task_filter: TaskFilter | str = TaskFilter.all,
    track: str | None = None,
) -> dict[str | None, CoverageReport]:
    """`coverage_report` for each persona (None: every task), the log's tables and case
    outcomes read once for all of them."""
    found = _reports(
        session=session,
        log_name=log_name,
        personas=personas,
        task_filter=task_filter,
        track=track,
        sla_hours=None,
    )
    return {persona: report for persona, (report, _) in found.items()}


def _reports(
    *,
    session: Session,
    log_name: str,
    personas: list[str | None],
    task_filter: TaskFilter | str,
    track: str | None,
    sla_hours: dict[str, float] | None,
) -> dict[str | None, tuple[CoverageReport, dict[str, list[str]]]]:
    task_filter = _task_filter(task_filter)
    log = _newest_log(session, log_name)
    tables = load_log_tables(session=session, log_id=log.id, n_cases=log.n_cases)
    outcomes = _case_outcomes(
        log.events_path, configured_sla_hours() if sla_hours is None else sla_hours
    )
    found = {}
    for persona in personas:
        sources, unresolved = declared_sources(
            session=session,
            log_name=log_name,
            task_filter=task_filter,
            tables=tables,
            events_path=log.events_path,
            persona=persona,
            track=track,
        )
        found[persona] = (_report(session, log_name, tables, sources, outcomes), unresolved)
    return found


def coverage_of(
    *, session: Session, log_name: str, rows: list[tuple[str, dict]]
) -> tuple[CoverageReport, dict[str, list[str]]]:
    """Coverage of the newest version of `log_name` by the given (task id, source) pairs
    (an export's task set). Raises NotFound for an unknown log."""
    log = _newest_log(session, log_name)
    tables = load_log_tables(session=session, log_id=log.id, n_cases=log.n_cases)
    sources, unresolved = resolve_sources(rows, tables=tables, events_path=log.events_path)
    outcomes = _case_outcomes(log.events_path, None)
    return _report(session, log_name, tables, sources, outcomes), unresolved
