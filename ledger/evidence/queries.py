"""Queries of the provenance audit: objects read in id batches, ledger entries as plain rows."""

import json
from collections import namedtuple
from collections.abc import Iterator
from types import SimpleNamespace

import pandas as pd
from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion, Transcript
from itsmreview.db import (
    distinct_walk,
    driver_rows,
    frame_of,
    ids_in,
    ids_param,
    in_ids,
    json_reader,
    values_param,
)
from itsmreview.exports.models import Export
from itsmreview.ledger import queries as ledger_queries
from itsmreview.ledger.models import LedgerEntry
from itsmreview.review.models import Adjudication, Rating, ReviewRound
from sqlalchemy import func, or_
from sqlmodel import Session, select


def head(*, session: Session) -> tuple[int, str] | None:
    return ledger_queries.head(session=session)


def entries(*, session: Session, where=None) -> Iterator:
    return ledger_queries.entry_rows(session=session, where=where, batch=20_000)


def rating_commitments_after(
    *, session: Session, rating_ids: list[int], after: int
) -> dict[int, tuple[int, str | None]]:
    """rating id -> (seq, content digest) of the newest entry of each of these ratings chained
    after seq `after` (while the audit read the chain)."""
    if not rating_ids:
        return {}
    found: dict[int, tuple[int, str | None]] = {}
    for ident, seq, payload in session.exec(
        select(LedgerEntry.artifact_id, LedgerEntry.seq, LedgerEntry.payload)
        .where(
            LedgerEntry.seq > after,
            LedgerEntry.artifact_type == "rating",
            LedgerEntry.artifact_id.in_([str(i) for i in rating_ids]),
        )
        .order_by(LedgerEntry.seq)
    ).all():
        found[int(ident)] = (seq, (payload or {}).get("content_sha256"))
    return found


def rounds(*, session: Session) -> list[ReviewRound]:
    return list(session.exec(select(ReviewRound).order_by(ReviewRound.id)).all())


def rubric_dimension_keys(*, session: Session) -> dict[int, list[str]]:
    """rubric id -> its dimension keys in order (what a rating's packed scores follow)."""
    from itsmreview.review.models import Rubric

    return {
        rubric_id: [d["key"] for d in (definition or {}).get("dimensions", [])]
        for rubric_id, definition in session.exec(select(Rubric.id, Rubric.definition)).all()
    }


def exports(*, session: Session) -> list[Export]:
    return list(session.exec(select(Export).order_by(Export.id)).all())


def task_entries(*, session: Session, external_id: str) -> list:
    """Ledger entries about one task (any version), oldest first."""
    return list(
        session.exec(
            select(*ledger_queries.ENTRY_COLUMNS)
            .where(
                LedgerEntry.artifact_type == "task",
                or_(
                    LedgerEntry.artifact_id == external_id,
                    LedgerEntry.artifact_id.like(f"{_escape(external_id)}@v%", escape="\\"),
                ),
            )
            .order_by(LedgerEntry.seq)
        ).all()
    )


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def current_versions(*, session: Session) -> list[tuple[Task, TaskVersion]]:
    newest = (
        select(TaskVersion.task_id, func.max(TaskVersion.version).label("version"))
        .group_by(TaskVersion.task_id)
        .subquery()
    )
    return list(
        session.exec(
            select(Task, TaskVersion)
            .join(TaskVersion, TaskVersion.task_id == Task.id)
            .join(
                newest,
                (newest.c.task_id == TaskVersion.task_id)
                & (newest.c.version == TaskVersion.version),
            )
            .order_by(Task.external_id)
        ).all()
    )


def added_sources(*, session: Session) -> list:
    """Every `ledger add` entry (sources recorded after import), oldest first."""
    return list(
        session.exec(
            select(*ledger_queries.ENTRY_COLUMNS)
            .where(LedgerEntry.action == "add-source")
            .order_by(LedgerEntry.seq)
        ).all()
    )


def activity_counts(*, session: Session) -> dict[str, int]:
    rows = session.exec(
        select(LedgerEntry.artifact_type, LedgerEntry.action, func.count()).group_by(
            LedgerEntry.artifact_type, LedgerEntry.action
        )
    ).all()
    return {f"{kind}:{action}": int(n) for kind, action, n in rows}


def user_names(*, session: Session) -> dict[int, str]:
    return {i: n for i, n in session.exec(select(User.id, User.username)).all()}


def user_id_named(*, session: Session, username: str) -> int | None:
    return session.exec(select(User.id).where(User.username == username)).first()


def entries_page(
    *,
    session: Session,
    source_kind: str | None = None,
    artifact_type: str | None = None,
    actor_id: int | None = None,
    since=None,
    until=None,
    offset: int = 0,
    limit: int = 200,
) -> tuple[pd.DataFrame, int]:
    """One page of entries, newest first, with the actor's name, and how many match."""
    conditions = []
    if source_kind:
        conditions.append(LedgerEntry.source_kind == source_kind)
    if artifact_type:
        conditions.append(LedgerEntry.artifact_type == artifact_type)
    if actor_id is not None:
        conditions.append(LedgerEntry.actor_id == actor_id)
    if since is not None:
        conditions.append(LedgerEntry.created_at >= since)
    if until is not None:
        conditions.append(LedgerEntry.created_at < until)
    total = session.exec(select(func.count()).select_from(LedgerEntry).where(*conditions)).one()
    frame = frame_of(
        session,
        select(
            LedgerEntry.seq,
            LedgerEntry.created_at,
            LedgerEntry.artifact_type,
            LedgerEntry.artifact_id,
            LedgerEntry.field,
            LedgerEntry.source_kind,
            LedgerEntry.reference,
            LedgerEntry.action,
            User.username.label("actor"),
        )
        .outerjoin(User, User.id == LedgerEntry.actor_id)
        .where(*conditions)
        .order_by(LedgerEntry.seq.desc())
        .offset(offset)
        .limit(limit),
    )
    return frame, int(total)


def artifact_types(*, session: Session) -> list[str]:
    return list(session.exec(distinct_walk(LedgerEntry.artifact_type)).all())


def versions_with_transcripts(*, session: Session) -> set[int]:
    return set(session.exec(select(Transcript.task_version_id).distinct()).all())


def versions_by_ids(*, session: Session, round_id: int) -> list[tuple[Task, TaskVersion]]:
    """The task versions of a round with their tasks."""
    from itsmreview.review.models import RoundTask

    in_round = select(RoundTask.task_version_id).where(RoundTask.round_id == round_id)
    return list(
        session.exec(
            select(Task, TaskVersion)
            .join(TaskVersion, TaskVersion.task_id == Task.id)
            .where(TaskVersion.id.in_(in_round))
        ).all()
    )


# --- the audit: objects read in batches keyed by the entries that commit to them -----------


RATING_FIELDS = (
    Rating.id,
    Rating.task_version_id,
    Rating.round_id,
    Rating.expert_id,
    Rating.rubric_id,
    Rating.revision,
    Rating.rater_kind,
    Rating.status,
    Rating.verdict,
    Rating.flags,
    Rating.comment,
    Rating.confidence,
    Rating.score_vector,
    Rating.not_applicable,
)


RatingRow = namedtuple("RatingRow", [c.key for c in RATING_FIELDS])
RATINGS_SQL = f"SELECT {', '.join(RatingRow._fields)} FROM ratings WHERE "


def ratings_by_ids(*, session: Session, ids: list[int]) -> tuple[dict, dict]:
    """{id: rating row} of these ratings (any status; the fields a rating's content and its
    packed scores are made of, as attributes) and {rating id: {dimension: value}}."""
    if not ids:
        return {}, {}
    # the driver's rows: SQLAlchemy's rows cost three times the read for 600,000 scores
    listed = ids_param(session, ids)
    read_json = json_reader(session)
    fields = RatingRow._fields
    flags, marks, packed = (fields.index(f) for f in ("flags", "not_applicable", "score_vector"))
    ratings = {}
    for row in driver_rows(session, RATINGS_SQL + ids_in(session, "id"), (listed,)):
        values = list(row)
        values[flags], values[marks] = read_json(row[flags]), read_json(row[marks])
        values[packed] = None if row[packed] is None else bytes(row[packed])
        rating = RatingRow._make(values)
        ratings[rating.id] = rating
    return ratings, _scores_of(session, listed)


def _scores_of(session: Session, listed) -> dict[int, dict]:
    """{rating id: {dimension: value}} of the listed ratings' score rows. PostgreSQL sends
    each rating's scores as one JSON object (a tenth of the rows to convert; float8 prints
    the shortest text that reads back as the same number); SQLite sends the rows, which it
    reads faster than its JSON would print every float exactly."""
    if session.get_bind().dialect.name == "postgresql":
        return {
            rating_id: json.loads(scores)
            for rating_id, scores in driver_rows(
                session,
                "SELECT rating_id, json_object_agg(dimension, value)::text FROM rating_scores"
                " WHERE " + ids_in(session, "rating_id") + " GROUP BY rating_id",
                (listed,),
            )
        }
    scores: dict[int, dict] = {}
    for rating_id, dimension, value in driver_rows(
        session,
        "SELECT rating_id, dimension, value FROM rating_scores WHERE "
        + ids_in(session, "rating_id"),
        (listed,),
    ):
        if rating_id in scores:
            scores[rating_id][dimension] = value
        else:
            scores[rating_id] = {dimension: value}
    return scores


def rows_by_ids(*, session: Session, model, ids: list[int]) -> dict:
    """{id: row} of one table's rows with these ids."""
    if not ids:
        return {}
    return {
        row.id: row
        for row in session.exec(select(model).where(in_ids(session, model.id, ids))).all()
    }


VersionRow = namedtuple(
    "VersionRow",
    "id version content_hash title persona track instruction environment ground_truth verifier"
    " tags source provenance extra",
)
TranscriptRow = namedtuple(
    "TranscriptRow", "task_version_id external_id title simulator messages extra"
)
_VERSION_JSON = ("tags", "source", "provenance", "extra")
_TRANSCRIPT_JSON = ("simulator", "messages", "extra")


def versions_by_names(
    *, session: Session, names: list[tuple[str, int]], content: set[tuple[str, int]] = frozenset()
) -> tuple[dict[tuple[str, int], tuple], dict[int, list]]:
    """{(external id, version): (task, version)} of these versions as rows (the fields
    `catalog.service.version_to_native` reads, as attributes; only id and version for those
    not in `content`, whose content is not checked), with the transcripts of the versions in
    `content` by version id. Driver rows: SQLAlchemy's row and JSON processing cost a fifth
    of the ledger check."""
    if not names:
        return {}, {}
    wanted = set(names)
    read_json = json_reader(session)
    pairs = {}
    # a version named by status entries only needs its id: its texts are not read
    for fields, chosen in (
        (VersionRow._fields, set(content)),
        (("id", "version"), wanted - content),
    ):
        if not chosen:
            continue
        rows = driver_rows(
            session,
            "SELECT t.external_id, t.title, t.persona, t.track, "
            + ", ".join(f"v.{f}" for f in fields)
            + " FROM tasks t JOIN task_versions v ON v.task_id = t.id WHERE "
            + ids_in(session, "t.external_id", of="text")
            + " AND "
            + ids_in(session, "v.version"),
            (
                values_param(session, sorted({n for n, _ in chosen})),
                ids_param(session, sorted({v for _, v in chosen})),
            ),
        )
        decoded = [i + 4 for i, f in enumerate(fields) if f in _VERSION_JSON]
        for row in rows:
            if (row[0], row[5]) not in chosen:
                continue
            values = list(row)
            for i in decoded:
                values[i] = read_json(values[i])
            task = SimpleNamespace(external_id=row[0], title=row[1], persona=row[2], track=row[3])
            version = (
                VersionRow._make(values[4:])
                if len(fields) == len(VersionRow._fields)
                else SimpleNamespace(id=row[4], version=row[5])
            )
            pairs[(row[0], row[5])] = (task, version)
    transcripts: dict[int, list] = {}
    ids = [version.id for name, (_, version) in pairs.items() if name in content]
    if ids:
        decoded = [TranscriptRow._fields.index(f) for f in _TRANSCRIPT_JSON]
        for row in driver_rows(
            session,
            f"SELECT {', '.join(TranscriptRow._fields)} FROM transcripts WHERE "
            + ids_in(session, "task_version_id")
            + " ORDER BY id",
            (ids_param(session, ids),),
        ):
            values = list(row)
            for i in decoded:
                values[i] = read_json(values[i])
            transcripts.setdefault(row[0], []).append(TranscriptRow._make(values))
    return pairs, transcripts


def team_mappings_of_versions(*, session: Session, versions: list[int]) -> list:
    """Every team mapping version numbered one of `versions` (a few per log attribute)."""
    from itsmreview.coverage.models import TeamMapping

    if not versions:
        return []
    return list(session.exec(select(TeamMapping).where(TeamMapping.version.in_(versions))).all())


def event_logs_named(*, session: Session, names: list[str]) -> list:
    from itsmreview.coverage.models import EventLog

    if not names:
        return []
    return list(session.exec(select(EventLog).where(EventLog.name.in_(names))).all())


def _artifact_ids(kind: str):
    """(table, the artifact id its ledger entries name as a SQL expression, extra condition,
    the entry's committing actions as a condition) of a kind of object the ledger covers."""
    from itsmreview.coverage.models import EventLog, TeamMapping
    from itsmreview.review.models import MachineCheck, ResolutionProposal
    from sqlalchemy import String, cast, true

    action = LedgerEntry.action
    if kind == "rating":
        return (
            Rating,
            cast(Rating.id, String),
            Rating.status == "submitted",
            action.in_(("submit", "revise", "model-rate", "commit")),
        )
    if kind == "adjudication":
        return (
            Adjudication,
            cast(Adjudication.id, String),
            true(),
            action.in_(("adjudicate", "commit")),
        )
    if kind == "machine_check":
        return MachineCheck, cast(MachineCheck.id, String), true(), action.like("check:%")
    if kind == "resolution_proposal":
        return (
            ResolutionProposal,
            cast(ResolutionProposal.id, String),
            ResolutionProposal.status != "proposed",
            action.in_(("accepted", "dismissed")),
        )
    if kind == "team_mapping":
        return (
            TeamMapping,
            TeamMapping.log_name
            + ":"
            + TeamMapping.attribute
            + "@v"
            + cast(TeamMapping.version, String),
            true(),
            action == "map-teams",
        )
    if kind == "event_log":
        return (
            EventLog,
            EventLog.name + "@" + cast(EventLog.version, String),
            true(),
            action == "import",
        )
    if kind == "export":
        return Export, Export.name, true(), action == "export"
    raise ValueError(f"no objects of kind {kind!r} are covered")


DIGESTED = ("rating", "adjudication", "machine_check", "resolution_proposal", "team_mapping")


def _carries(key: str):
    """The entry's payload holds `key` (its JSON text, on both databases)."""
    from sqlalchemy import String, cast

    return cast(LedgerEntry.payload, String).like(f'%"{key}"%')


def without_entry(
    *, session: Session, kind: str, up_to: int, batch: int = 5_000
) -> Iterator[tuple[int, str]]:
    """(row id, artifact id) of each object of a covered kind that no committing ledger entry
    up to seq `up_to` names, in id batches (one anti-join each, on the artifact id index)."""
    model, ident, condition, committing = _artifact_ids(kind)
    if kind in DIGESTED:  # an entry from before content commitments covers nothing
        committing = committing & _carries("content_sha256")
    named = (
        select(LedgerEntry.seq)
        .where(
            LedgerEntry.artifact_type == kind,
            LedgerEntry.artifact_id == ident,
            LedgerEntry.seq <= up_to,
            committing,
        )
        .exists()
    )
    after = 0
    while True:
        rows = session.exec(
            select(model.id, ident.label("artifact_id"))
            .where(model.id > after, condition, ~named)
            .order_by(model.id)
            .limit(batch)
        ).all()
        if not rows:
            return
        yield from ((int(i), str(a)) for i, a in rows)
        after = rows[-1][0]


def object_ids(*, session: Session, kind: str, batch: int = 50_000) -> Iterator[list[int]]:
    """Batches of the ids of every object of a kind named by its row id (ratings submitted,
    proposals decided: the ones an entry must cover), in id order, on the primary key; the
    driver's rows (SQLAlchemy's took 0.8 s for 300,000 ratings)."""
    model, _, condition, _ = _artifact_ids(kind)
    where = condition.compile(
        dialect=session.get_bind().dialect, compile_kwargs={"literal_binds": True}
    )
    sql = f"SELECT id FROM {model.__tablename__} WHERE id > ? AND {where} ORDER BY id LIMIT ?"
    after = 0
    while True:
        ids = [row[0] for row in driver_rows(session, sql, (after, batch))]
        if not ids:
            return
        yield ids
        after = ids[-1]


VERSION_STATES = (
    "SELECT v.id, t.external_id, v.version, v.status, t.status, NOT EXISTS (SELECT 1 FROM"
    " task_versions w WHERE w.task_id = v.task_id AND w.version > v.version)"
    " FROM task_versions v JOIN tasks t ON t.id = v.task_id WHERE v.id > ? ORDER BY v.id LIMIT ?"
)


def version_states(*, session: Session, batch: int = 5_000) -> Iterator[list]:
    """Batches of every task version as (version id, external id, version, version status,
    task status, whether it is its task's newest), in version-id order. (Newest by the
    (task, version) index for each row: a grouped subquery was aggregated again for every
    batch, 8 s of PostgreSQL's time at 100,000 versions.)"""
    after = 0
    while True:
        rows = driver_rows(session, VERSION_STATES, (after, batch))
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def queued_entries(*, session: Session, rating_ids: list[int]) -> dict[int, tuple]:
    """rating id -> (its queued ledger entry's fields, why the gate holds it or None) of
    these ratings still in the gate's queue."""
    from itsmreview.review.models import GatePending

    if not rating_ids:
        return {}
    return {
        rating_id: (entry or {}, held)
        for rating_id, entry, held in session.exec(
            select(GatePending.rating_id, GatePending.entry, GatePending.held_reason).where(
                GatePending.rating_id.in_(rating_ids)
            )
        ).all()
    }
