"""Queries of exports: the approved versions a filter selects and the evidence behind them.
Every set of task versions is passed on as a subquery, never as one parameter per version."""

from collections.abc import Iterator
from types import SimpleNamespace

import pandas as pd
from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion, Transcript
from itsmreview.db import frame_of, in_ids
from itsmreview.exports.models import Export
from itsmreview.ledger import queries as ledger_queries
from itsmreview.ledger.models import LedgerEntry
from itsmreview.review.gate.queries import reads as review_queries
from itsmreview.review.models import (
    Adjudication,
    Rating,
    RatingScore,
    ReviewRound,
    RoundTask,
    Rubric,
)
from sqlalchemy import func
from sqlmodel import Session, select


def exports_frame(*, session: Session) -> pd.DataFrame:
    return frame_of(
        session,
        select(
            Export.name,
            Export.format,
            Export.task_count.label("tasks"),
            Export.content_hash,
            Export.path,
            Export.created_at,
        ).order_by(Export.created_at.desc(), Export.id.desc()),
    )


def approved_version_ids(*, round_id: int | None = None, persona: str | None = None):
    """Subquery of the ids of each task's newest approved version (in one round, of one
    persona, when given)."""
    newest = select(TaskVersion.task_id, func.max(TaskVersion.version).label("version")).where(
        TaskVersion.status == "approved"
    )
    if round_id is not None:
        newest = newest.where(
            TaskVersion.id.in_(
                select(RoundTask.task_version_id).where(RoundTask.round_id == round_id)
            )
        )
    newest = newest.group_by(TaskVersion.task_id).subquery()
    query = select(TaskVersion.id).join(
        newest,
        (newest.c.task_id == TaskVersion.task_id) & (newest.c.version == TaskVersion.version),
    )
    if persona is not None:
        query = query.join(Task, Task.id == TaskVersion.task_id).where(Task.persona == persona)
    return query


def versions_in(*, session: Session, ids) -> Iterator:
    """(task external id, persona, version id, version, source log) of these versions by task
    external id, not their texts (read a batch at a time by `tasks_of`) nor their sources
    (`sources_of`): a selection of 100,000 versions stays a few MB."""
    rows = session.connection().execute(
        select(
            Task.external_id,
            Task.persona,
            TaskVersion.id,
            TaskVersion.version,
            TaskVersion.source,
        )
        .join(TaskVersion, TaskVersion.task_id == Task.id)
        .where(TaskVersion.id.in_(ids))
        .order_by(Task.external_id)
    )
    for r in rows:
        yield r.external_id, r.persona, r.id, r.version, (r.source or {}).get("log")


def sources_of(*, session: Session, version_ids: list[int]) -> dict[int, dict]:
    """{version id: source} of these versions (a batch)."""
    if not version_ids:
        return {}
    return {
        int(i): source
        for i, source in session.connection().execute(
            select(TaskVersion.id, TaskVersion.source).where(
                in_ids(session, TaskVersion.id, version_ids)
            )
        )
    }


def tasks_of(*, session: Session, version_ids: list[int]) -> tuple[dict, dict[int, list]]:
    """{version id: (task, version)} of these versions as rows with the fields
    `catalog.service.version_to_native` reads, and their transcripts by version id."""
    if not version_ids:
        return {}, {}
    connection = session.connection()
    pairs = {}
    for row in connection.execute(
        select(
            Task.external_id,
            Task.title.label("task_title"),
            Task.persona.label("task_persona"),
            Task.track.label("task_track"),
            TaskVersion.id,
            TaskVersion.version,
            TaskVersion.content_hash,
            TaskVersion.title,
            TaskVersion.persona,
            TaskVersion.track,
            TaskVersion.instruction,
            TaskVersion.environment,
            TaskVersion.ground_truth,
            TaskVersion.verifier,
            TaskVersion.tags,
            TaskVersion.source,
            TaskVersion.provenance,
            TaskVersion.extra,
        )
        .join(TaskVersion, TaskVersion.task_id == Task.id)
        .where(in_ids(session, TaskVersion.id, version_ids))
    ):
        task = SimpleNamespace(
            external_id=row.external_id,
            title=row.task_title,
            persona=row.task_persona,
            track=row.task_track,
        )
        pairs[row.id] = (task, row)
    transcripts: dict[int, list] = {}
    for transcript in connection.execute(
        select(
            Transcript.task_version_id,
            Transcript.external_id,
            Transcript.title,
            Transcript.simulator,
            Transcript.messages,
            Transcript.extra,
        )
        .where(in_ids(session, Transcript.task_version_id, version_ids))
        .order_by(Transcript.task_version_id, Transcript.id)
    ):
        transcripts.setdefault(transcript.task_version_id, []).append(transcript)
    return pairs, transcripts


def usernames(*, session: Session, ids: list[int]) -> dict[int, str]:
    """User names of the given ids (a rater list: tens, not thousands)."""
    if not ids:
        return {}
    return dict(session.exec(select(User.id, User.username).where(User.id.in_(ids))).all())


def _current_of(session: Session, version_ids: list[int]):
    return (
        in_ids(session, Rating.task_version_id, version_ids),
        Rating.is_current,
        Rating.status == "submitted",
    )


def current_rating_ids(*, session: Session, version_ids: list[int]) -> set[int]:
    """The ids of the current submitted ratings of a batch of versions."""
    return {
        int(i) for i in session.exec(select(Rating.id).where(*_current_of(session, version_ids)))
    }


def raters_and_rubrics(*, session: Session, version_ids: list[int]) -> tuple[set, set]:
    """Who rated a batch of versions, and with which rubrics (current submitted ratings)."""
    rows = session.exec(
        select(Rating.expert_id, Rating.rubric_id)
        .where(*_current_of(session, version_ids))
        .distinct()
    ).all()
    return {int(e) for e, _ in rows}, {int(r) for _, r in rows}


def ratings_of(*, session: Session, version_ids: list[int]) -> pd.DataFrame:
    """Current submitted ratings of a batch of versions (passed as one parameter), with
    their marks of dimensions that do not apply and their round's name."""
    return frame_of(
        session,
        select(
            *review_queries.rating_columns(),
            Rating.not_applicable,
            ReviewRound.name.label("round"),
        )
        .join(ReviewRound, ReviewRound.id == Rating.round_id)
        .where(*_current_of(session, version_ids))
        .order_by(Rating.id),
    )


def scores_of(*, session: Session, version_ids: list[int]) -> pd.DataFrame:
    return frame_of(
        session,
        select(RatingScore.rating_id, RatingScore.dimension, RatingScore.value)
        .join(Rating, Rating.id == RatingScore.rating_id)
        .where(*_current_of(session, version_ids)),
    )


def adjudications_in(*, session: Session, ids) -> pd.DataFrame:
    return frame_of(
        session,
        select(
            Adjudication.task_version_id,
            ReviewRound.name.label("round"),
            Adjudication.lead_id,
            Adjudication.decision,
            Adjudication.reason,
            Adjudication.created_at,
        )
        .join(ReviewRound, ReviewRound.id == Adjudication.round_id)
        .where(Adjudication.task_version_id.in_(ids))
        .order_by(Adjudication.task_version_id, Adjudication.id),
    )


def rounds_of(*, session: Session, ids) -> list[ReviewRound]:
    """The rounds holding any of the versions, oldest first."""
    in_round = select(RoundTask.round_id).where(RoundTask.task_version_id.in_(ids))
    return list(
        session.exec(
            select(ReviewRound).where(ReviewRound.id.in_(in_round)).order_by(ReviewRound.id)
        ).all()
    )


def rubrics_by_id(*, session: Session, rubric_ids: list[int]) -> list[Rubric]:
    if not rubric_ids:
        return []
    return list(
        session.exec(select(Rubric).where(Rubric.id.in_(rubric_ids)).order_by(Rubric.id)).all()
    )


def ledger_entries_of(*, session: Session, artifact_types: tuple[str, ...]) -> Iterator:
    """Entries of the given artifact types in chain order, as plain rows, in batches."""
    return ledger_queries.entries_of_types(session=session, artifact_types=artifact_types)


def log_entries(*, session: Session, artifact_id: str) -> list[LedgerEntry]:
    """The ledger entries of one log version (`name@version`): its import and the sources
    recorded for it, in chain order."""
    return list(
        session.exec(
            select(LedgerEntry)
            .where(
                LedgerEntry.artifact_type == "event_log",
                LedgerEntry.artifact_id == artifact_id,
            )
            .order_by(LedgerEntry.seq)
        ).all()
    )


def ledger_head(*, session: Session, excluding: tuple[str, ...] = ()) -> tuple[int, str] | None:
    return ledger_queries.head(session=session, excluding=excluding)


def filter_choices(*, session: Session) -> dict[str, list[str]]:
    """Rounds, source logs and personas an export can be filtered by."""
    from itsmreview.coverage.models import EventLog

    return {
        "rounds": list(session.exec(select(ReviewRound.name).order_by(ReviewRound.id)).all()),
        "logs": list(session.exec(select(EventLog.name).distinct().order_by(EventLog.name)).all()),
        "personas": list(
            session.exec(select(Task.persona).distinct().order_by(Task.persona)).all()
        ),
    }
