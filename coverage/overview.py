"""A log's materialised statistics, with the variants that tasks declare marked as covered."""

from dataclasses import dataclass

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.coverage import queries
from itsmreview.coverage.metrics import CoverageReport
from itsmreview.coverage.models import EventLog, VariantLevel
from itsmreview.coverage.report import TaskFilter, coverage_report
from itsmreview.errors import NotFound
from sqlmodel import Session


@dataclass
class LogOverview:
    log: EventLog
    report: CoverageReport
    unresolved_case_ids: dict[str, list[str]]
    variants: pd.DataFrame  # rank, sequence, case_count, share, covered, cumulative_share
    df_pairs: pd.DataFrame  # source, target, count, covered
    activities: pd.DataFrame
    role_values: pd.DataFrame


def log_overview(
    *, session: Session, actor: User, name: str, task_filter: TaskFilter | str = TaskFilter.all
) -> LogOverview:
    """Coverage of a log by the filtered tasks, with the tables the Coverage page draws.
    Leads only."""
    require_role(actor, Role.lead)
    log = queries.latest_log(session=session, name=name)
    if log is None:
        raise NotFound(f"no log named {name!r}")
    report, unresolved = coverage_report(session=session, log_name=name, task_filter=task_filter)
    variants = queries.variants_frame(session=session, log_id=log.id, level=VariantLevel.raw)
    variants["covered"] = variants["sequence_key"].isin(report.declared_keys)
    variants["cumulative_share"] = variants["share"].cumsum()
    pairs = queries.df_pairs_frame(session=session, log_id=log.id)
    pairs["covered"] = [
        (a, b) in report.declared_pairs
        for a, b in zip(pairs["source"], pairs["target"], strict=True)
    ]
    return LogOverview(
        log=log,
        report=report,
        unresolved_case_ids=unresolved,
        variants=variants,
        df_pairs=pairs,
        activities=queries.activities_frame(session=session, log_id=log.id),
        role_values=queries.role_values_frame(session=session, log_id=log.id),
    )


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
