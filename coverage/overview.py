"""A log's materialised statistics, with the variants that tasks declare marked as covered."""

import json
from dataclasses import dataclass
from datetime import datetime

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries as catalog_queries
from itsmreview.coverage import queries
from itsmreview.coverage.metrics import CoverageReport
from itsmreview.coverage.models import EventLog, VariantLevel
from itsmreview.coverage.report import TaskFilter, coverage_report
from itsmreview.errors import NotFound
from itsmreview.ledger import queries as ledger_queries
from itsmreview.settings import get_settings
from itsmreview.summaries.service import Materialised, computation, materialised
from sqlmodel import Session

INLINE_TASKS = 5000  # catalogs up to this size get their coverage computed at once


@dataclass
class LogOverview:
    log: EventLog
    report: CoverageReport | None  # None while the first computation runs in the background
    computed_at: datetime | None
    current: bool  # False: the catalog changed since; newer figures are being computed
    unresolved_case_ids: dict[str, list[str]]
    variants: pd.DataFrame  # rank, sequence, case_count, share, covered, cumulative_share
    df_pairs: pd.DataFrame  # source, target, count, covered
    activities: pd.DataFrame
    role_values: pd.DataFrame


def log_overview(
    *,
    session: Session,
    actor: User,
    name: str,
    task_filter: TaskFilter | str = TaskFilter.all,
    persona: str | None = None,
    track: str | None = None,
) -> LogOverview:
    """Coverage of a log by the filtered tasks (of one persona or track, when given), with
    the tables the Coverage page draws. Leads only."""
    require_role(actor, Role.lead)
    log = queries.latest_log(session=session, name=name)
    if log is None:
        raise NotFound(f"no log named {name!r}")
    report, unresolved, figures = _report_materialised(
        session=session,
        log=log,
        task_filter=TaskFilter(task_filter),
        persona=persona,
        track=track,
    )
    variants = queries.variants_frame(session=session, log_id=log.id, level=VariantLevel.raw)
    declared_keys = report.declared_keys if report else set()
    declared_pairs = report.declared_pairs if report else set()
    variants["covered"] = variants["sequence_key"].isin(declared_keys)
    variants["cumulative_share"] = variants["share"].cumsum()
    pairs = queries.df_pairs_frame(session=session, log_id=log.id)
    pairs["covered"] = [
        (a, b) in declared_pairs for a, b in zip(pairs["source"], pairs["target"], strict=True)
    ]
    return LogOverview(
        log=log,
        report=report,
        computed_at=figures.computed_at,
        current=figures.current,
        unresolved_case_ids=unresolved,
        variants=variants,
        df_pairs=pairs,
        activities=queries.activities_frame(session=session, log_id=log.id),
        role_values=queries.role_values_frame(session=session, log_id=log.id),
    )


def _report_materialised(
    *,
    session: Session,
    log: EventLog,
    task_filter: TaskFilter,
    persona: str | None = None,
    track: str | None = None,
) -> tuple[CoverageReport | None, dict[str, list[str]], Materialised]:
    """The coverage report of `log` by the filtered tasks as stored for the catalog's state:
    computed at once for a small catalog, else in the background."""
    if task_filter == TaskFilter.approved:
        head = ledger_queries.head(session=session)  # decisions append ledger entries
        state = (0 if head is None else head[0],)
    else:
        state = catalog_queries.catalog_state(
            session=session, ratings=task_filter == TaskFilter.rated
        )
    mapping = queries.newest_team_mapping(session=session, log_name=log.name)
    # a new team mapping changes team coverage, other SLA targets the SLA outcome
    state = (*state, mapping.id if mapping else 0, get_settings().sla_hours or "")

    figures = materialised(
        session=session,
        kind="coverage",
        key=_coverage_key(log.id, task_filter, persona, track),
        fingerprint=json.dumps(list(state)),
        inline=catalog_queries.count_tasks(session=session) <= INLINE_TASKS,
    )
    if figures.payload is None:
        return None, {}, figures
    return (
        CoverageReport.from_record(figures.payload["report"]),
        figures.payload["unresolved"],
        figures,
    )


def _coverage_key(log_id: int, task_filter: TaskFilter, persona, track) -> str:
    from urllib.parse import quote

    key = f"{log_id}:{task_filter.value}"
    if persona is None and track is None:
        return key
    return f"{key}:{quote(persona or '', safe='')}:{quote(track or '', safe='')}"


@computation("coverage")
def coverage_figures(session: Session, key: str) -> dict:
    """The coverage report of a log by the filtered tasks; `key` is "LOG_ID:FILTER", or
    "LOG_ID:FILTER:PERSONA:TRACK" for one persona or track (empty for any)."""
    from urllib.parse import unquote

    log_id, task_filter, *rest = key.split(":")
    persona, track = (unquote(part) for part in (rest or ["", ""]))
    log = session.get(EventLog, int(log_id))
    if log is None:
        raise LookupError(f"no event log has id {log_id} (deleted since the view asked?)")
    report, unresolved = coverage_report(
        session=session,
        log_name=log.name,
        task_filter=TaskFilter(task_filter),
        persona=persona or None,
        track=track or None,
    )
    return {"report": report.to_record(), "unresolved": unresolved}


def log_names(*, session: Session) -> list[str]:
    return sorted({log.name for log in queries.list_logs(session=session)})


def logs_table(*, session: Session) -> pd.DataFrame:
    rows = [
        {
            "name": log.name,
            "version": log.version,
            "cases": log.n_cases,
            "events": log.n_events,
            "variants": log.n_variants,
            "imported_at": log.imported_at,
        }
        for log in queries.list_logs(session=session)
    ]
    return pd.DataFrame(
        rows, columns=["name", "version", "cases", "events", "variants", "imported_at"]
    )


def variant_choices(*, session: Session, name: str, limit: int = 1000) -> dict[int, dict]:
    """The most frequent raw variants of a log, rank -> label and sequence, for a picker."""
    log = queries.latest_log(session=session, name=name)
    if log is None:
        raise NotFound(f"no log named {name!r}")
    frame = queries.variants_frame(session=session, log_id=log.id, limit=limit)
    return {
        int(r.rank): {
            "sequence": list(r.sequence),
            "label": f"#{r.rank} · {r.case_count:,} cases · " + " → ".join(r.sequence)[:160],
        }
        for r in frame.itertuples()
    }
