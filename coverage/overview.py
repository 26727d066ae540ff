"""A log's materialised statistics, with the variants that tasks declare marked as covered."""

from dataclasses import dataclass

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.queries import declared_sources
from itsmreview.coverage import queries
from itsmreview.coverage.models import EventLog, VariantLevel
from itsmreview.coverage.variants import sequence_key
from itsmreview.errors import NotFound
from sqlmodel import Session


@dataclass
class LogOverview:
    log: EventLog
    variants: pd.DataFrame
    activities: pd.DataFrame
    role_values: pd.DataFrame
    covered_share: float


def log_overview(*, session: Session, actor: User, name: str) -> LogOverview:
    """Variants (with `covered` and `cumulative_share`), activities and roles of a log."""
    require_role(actor, Role.lead)
    log = queries.latest_log(session=session, name=name)
    if log is None:
        raise NotFound(f"no log named {name!r}")
    variants = queries.variants_frame(session=session, log_id=log.id, level=VariantLevel.raw)
    declared = {
        sequence_key(sequence)
        for source in declared_sources(session=session, log_name=name)
        for sequence in source.get("variants", [])
    }
    variants["covered"] = variants["sequence_key"].isin(declared)
    variants["cumulative_share"] = variants["share"].cumsum()
    return LogOverview(
        log=log,
        variants=variants,
        activities=queries.activities_frame(session=session, log_id=log.id),
        role_values=queries.role_values_frame(session=session, log_id=log.id),
        covered_share=float(variants.loc[variants["covered"], "share"].sum()),
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
