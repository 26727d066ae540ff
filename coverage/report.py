"""Coverage of an imported log by the tasks derived from it (service layer)."""

from enum import StrEnum
from pathlib import Path

import pandas as pd
from itsmreview.catalog.queries import task_sources
from itsmreview.coverage import queries
from itsmreview.coverage.metrics import CoverageReport, LogTables, TaskSource, compute_coverage
from itsmreview.errors import InvalidInput, NotFound
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
    cases = pd.read_parquet(Path(events_path) / "cases.parquet", columns=["case_id", "variant_key"])
    found = cases[cases["case_id"].isin(case_ids)]
    return dict(zip(found["case_id"], found["variant_key"], strict=True))


def declared_sources(
    *,
    session: Session,
    log_name: str,
    task_filter: TaskFilter,
    tables: LogTables,
    events_path: str | None,
) -> tuple[list[TaskSource], dict[str, list[str]]]:
    """Task sources with case ids resolved to their variants; also unresolved case ids."""
    if task_filter == TaskFilter.approved:
        rows = task_sources(session=session, log_name=log_name, statuses=("approved",))
    elif task_filter == TaskFilter.rated:
        rows = task_sources(session=session, log_name=log_name, rated_only=True)
    else:
        rows = task_sources(session=session, log_name=log_name)
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
        sources.append(TaskSource(task_id, sequences, roles))
    return sources, unresolved


def coverage_report(
    *, session: Session, log_name: str, task_filter: TaskFilter | str = TaskFilter.all
) -> tuple[CoverageReport, dict[str, list[str]]]:
    """Coverage of the newest version of `log_name` by the filtered tasks, and the case ids
    that tasks declare but the log does not contain (task id -> case ids)."""
    try:
        task_filter = TaskFilter(task_filter)
    except ValueError:
        raise InvalidInput(
            f"task filter {task_filter!r} is not one of approved, rated, all"
        ) from None
    log = queries.latest_log(session=session, name=log_name)
    if log is None:
        raise NotFound(f"no log named {log_name!r}; `itsmreview log list` shows the names")
    tables = load_log_tables(session=session, log_id=log.id, n_cases=log.n_cases)
    sources, unresolved = declared_sources(
        session=session,
        log_name=log_name,
        task_filter=task_filter,
        tables=tables,
        events_path=log.events_path,
    )
    return compute_coverage(tables, sources), unresolved


def coverage_of(
    *, session: Session, log_name: str, rows: list[tuple[str, dict]]
) -> tuple[CoverageReport, dict[str, list[str]]]:
    """Coverage of the newest version of `log_name` by the given (task id, source) pairs
    (an export's task set). Raises NotFound for an unknown log."""
    log = queries.latest_log(session=session, name=log_name)
    if log is None:
        raise NotFound(f"no log named {log_name!r}; `itsmreview log list` shows the names")
    tables = load_log_tables(session=session, log_id=log.id, n_cases=log.n_cases)
    sources, unresolved = resolve_sources(rows, tables=tables, events_path=log.events_path)
    return compute_coverage(tables, sources), unresolved
