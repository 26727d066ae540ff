"""Every select of coverage: event logs, their materialised variants, pairs, activities, roles."""

import pandas as pd
from itsmreview.coverage.models import (
    EventLog,
    ImportLease,
    LeaseState,
    LogActivity,
    LogDirectlyFollows,
    LogRoleValue,
    LogVariant,
    VariantLevel,
)
from itsmreview.db import frame_of
from sqlalchemy import and_, delete, exists, func, or_, update
from sqlmodel import Session, select


def log_by_digest(*, session: Session, sha256: str, mapping_hash: str) -> EventLog | None:
    return session.exec(
        select(EventLog).where(EventLog.sha256 == sha256, EventLog.mapping_hash == mapping_hash)
    ).first()


def imported_from(*, session: Session, source_path: str, mapping_hash: str) -> bool:
    """Whether a log was imported from this path with this mapping before."""
    return (
        session.exec(
            select(EventLog.id).where(
                EventLog.source_path == source_path, EventLog.mapping_hash == mapping_hash
            )
        ).first()
        is not None
    )


def latest_version(*, session: Session, name: str) -> int:
    return session.exec(select(func.max(EventLog.version)).where(EventLog.name == name)).one() or 0


def latest_log(*, session: Session, name: str) -> EventLog | None:
    return session.exec(
        select(EventLog).where(EventLog.name == name).order_by(EventLog.version.desc()).limit(1)
    ).first()


def list_logs(*, session: Session) -> list[EventLog]:
    return list(session.exec(select(EventLog).order_by(EventLog.name, EventLog.version)).all())


def variants_frame(
    *,
    session: Session,
    log_id: int,
    level: VariantLevel = VariantLevel.raw,
    limit: int | None = None,
) -> pd.DataFrame:
    query = (
        select(
            LogVariant.rank,
            LogVariant.sequence,
            LogVariant.sequence_key,
            LogVariant.length,
            LogVariant.case_count,
            LogVariant.share,
            LogVariant.median_throughput_s,
            LogVariant.example_case_ids,
        )
        .where(LogVariant.log_id == log_id, LogVariant.level == level)
        .order_by(LogVariant.rank)
    )
    if limit:
        query = query.limit(limit)
    return frame_of(session, query)


def activities_frame(*, session: Session, log_id: int) -> pd.DataFrame:
    return frame_of(
        session,
        select(LogActivity.name, LogActivity.event_count, LogActivity.case_count)
        .where(LogActivity.log_id == log_id)
        .order_by(LogActivity.event_count.desc()),
    )


def df_pairs_frame(*, session: Session, log_id: int) -> pd.DataFrame:
    return frame_of(
        session,
        select(LogDirectlyFollows.source, LogDirectlyFollows.target, LogDirectlyFollows.count)
        .where(LogDirectlyFollows.log_id == log_id)
        .order_by(LogDirectlyFollows.count.desc()),
    )


def role_values_frame(*, session: Session, log_id: int) -> pd.DataFrame:
    return frame_of(
        session,
        select(
            LogRoleValue.attribute,
            LogRoleValue.value,
            LogRoleValue.event_count,
            LogRoleValue.case_count,
        )
        .where(LogRoleValue.log_id == log_id)
        .order_by(LogRoleValue.attribute, LogRoleValue.event_count.desc()),
    )


def variant_by_key(
    *, session: Session, log_id: int, sequence_key: str, level: VariantLevel = VariantLevel.raw
) -> LogVariant | None:
    return session.exec(
        select(LogVariant).where(
            LogVariant.log_id == log_id,
            LogVariant.level == level,
            LogVariant.sequence_key == sequence_key,
        )
    ).first()


def log_tables_frames(*, session: Session, log_id: int) -> dict[str, pd.DataFrame]:
    """The frames `metrics.LogTables` is built from, straight from the materialised tables."""
    frames = {}
    for level in (VariantLevel.raw, VariantLevel.collapsed):
        frames[level.value] = frame_of(
            session,
            select(LogVariant.sequence, LogVariant.case_count, LogVariant.sequence_key)
            .where(LogVariant.log_id == log_id, LogVariant.level == level)
            .order_by(LogVariant.rank),
        )
    frames["df_pairs"] = df_pairs_frame(session=session, log_id=log_id)
    frames["activities"] = activities_frame(session=session, log_id=log_id)
    frames["roles"] = role_values_frame(session=session, log_id=log_id)
    return frames


def newest_team_mapping(*, session: Session, log_name: str, attribute: str | None = None):
    from itsmreview.coverage.models import TeamMapping

    query = select(TeamMapping).where(TeamMapping.log_name == log_name)
    if attribute is not None:
        query = query.where(TeamMapping.attribute == attribute)
    return session.exec(query.order_by(TeamMapping.id.desc()).limit(1)).first()


def team_mapping_versions(*, session: Session, log_name: str) -> list:
    from itsmreview.coverage.models import TeamMapping

    return list(
        session.exec(
            select(TeamMapping)
            .where(TeamMapping.log_name == log_name)
            .order_by(TeamMapping.id.desc())
        ).all()
    )


def begin_lease(*, session: Session, key: str, holder: str, expires_at) -> None:
    session.add(ImportLease(key=key, holder=holder[:255], expires_at=expires_at))


def renew_lease(*, session: Session, key: str, expires_at) -> int:
    """Move a running lease's expiry; 0 when it is no longer running (published, ended,
    reaped)."""
    return session.exec(
        update(ImportLease)
        .where(ImportLease.key == key, ImportLease.state == LeaseState.running)
        .values(expires_at=expires_at)
        .execution_options(synchronize_session=False)
    ).rowcount


def settle_lease(*, session: Session, key: str, state: LeaseState) -> int:
    """Mark a running lease published or ended; 0 when it was not running any more (a
    cleanup reaped it after it expired)."""
    return session.exec(
        update(ImportLease)
        .where(ImportLease.key == key, ImportLease.state == LeaseState.running)
        .values(state=state)
        .execution_options(synchronize_session=False)
    ).rowcount


def _reapable(now):
    """Leases whose files a cleanup may remove: ended, already reaped, or running past their
    expiry; never one whose key a stored log points at."""
    return and_(
        or_(
            ImportLease.state.in_((LeaseState.ended, LeaseState.reaped)),
            and_(ImportLease.state == LeaseState.running, ImportLease.expires_at < now),
        ),
        ~exists().where(EventLog.events_path == ImportLease.key),
    )


def reapable_leases(*, session: Session, now) -> list[str]:
    """The keys of the leases a cleanup may reap now, oldest first."""
    return list(
        session.exec(select(ImportLease.key).where(_reapable(now)).order_by(ImportLease.id)).all()
    )


def reap_lease(*, session: Session, key: str, now) -> int:
    """Mark one lease reaped if it still may be (see `_reapable`); 1 when it was. A running
    import's publish and this update take turns on the row, so exactly one of them wins."""
    return session.exec(
        update(ImportLease)
        .where(ImportLease.key == key, _reapable(now))
        .values(state=LeaseState.reaped)
        .execution_options(synchronize_session=False)
    ).rowcount


def forget_lease(*, session: Session, key: str, state: LeaseState = LeaseState.reaped) -> None:
    """Drop a lease in `state` once its files are gone (reaped by a cleanup, or running when
    its own import removed them)."""
    session.exec(delete(ImportLease).where(ImportLease.key == key, ImportLease.state == state))


def lease_states(*, session: Session) -> dict[str, str]:
    """Every lease's key and state (tests and diagnostics)."""
    return dict(session.exec(select(ImportLease.key, ImportLease.state)).all())
