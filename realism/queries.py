"""Reads and writes of mapped transcripts, waivers and blind tests (the only module of realism
that builds queries)."""

from itsmreview.accounts.models import User
from itsmreview.catalog.models import Task, TaskVersion, TaskVersionVariant, Transcript
from itsmreview.catalog.queries import latest_version_ids
from itsmreview.coverage.models import LogActivity
from itsmreview.db import in_ids
from itsmreview.ledger.models import LedgerEntry
from itsmreview.ledger.queries import entry_rows
from itsmreview.realism.models import (
    BlindAnswer,
    BlindFragment,
    BlindTest,
    MappedTranscript,
    TurnLabel,
)
from sqlalchemy import delete, func, update
from sqlmodel import Session, select


def transcripts_of_latest(
    *, session: Session, external_ids: list[str] | None = None
) -> list[tuple[Transcript, str]]:
    """The transcripts of the newest version of every task (of those named), with the task's
    id, in task and transcript order."""
    version_ids = latest_version_ids(session=session, external_ids=external_ids)
    if not version_ids:
        return []
    query = (
        select(Transcript, Task.external_id)
        .join(TaskVersion, TaskVersion.id == Transcript.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(in_ids(session, Transcript.task_version_id, version_ids))
        .order_by(Task.external_id, Transcript.id)
    )
    return [(transcript, external_id) for transcript, external_id in session.exec(query).all()]


def replace_mapped(
    *, session: Session, spec: str, rows: list[MappedTranscript], everything: bool
) -> None:
    """Store `rows`, replacing the mappings under `spec` of the same transcripts or, with
    `everything`, all of them (a transcript the spec no longer maps keeps no stale events)."""
    stale = delete(MappedTranscript).where(MappedTranscript.spec == spec)
    if not everything:
        ids = [row.transcript_id for row in rows]
        stale = stale.where(in_ids(session, MappedTranscript.transcript_id, ids))
    session.exec(stale)
    session.add_all(rows)
    session.flush()


def simulator_summary(*, session: Session) -> list[tuple[str, str, int, str, int, int]]:
    """(simulator, spec, spec version, log, transcripts, events) per simulator and spec."""
    query = (
        select(
            MappedTranscript.simulator,
            MappedTranscript.spec,
            func.max(MappedTranscript.spec_version),
            func.max(MappedTranscript.log),
            func.count(),
        )
        .group_by(MappedTranscript.simulator, MappedTranscript.spec)
        .order_by(MappedTranscript.simulator, MappedTranscript.spec)
    )
    return [tuple(row) for row in session.exec(query).all()]


def mapped_of(
    *, session: Session, simulator: str, spec: str, limit: int | None = None
) -> list[tuple[MappedTranscript, str, int, str, str]]:
    """The mappings of `simulator`'s transcripts under `spec` (the first `limit`), with each
    transcript's external id, its task version id, its task's id and persona."""
    query = (
        select(
            MappedTranscript,
            Transcript.external_id,
            Transcript.task_version_id,
            Task.external_id,
            Task.persona,
        )
        .join(Transcript, Transcript.id == MappedTranscript.transcript_id)
        .join(TaskVersion, TaskVersion.id == Transcript.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .where(MappedTranscript.simulator == simulator, MappedTranscript.spec == spec)
        .order_by(MappedTranscript.transcript_id)
        .limit(limit)
    )
    return [tuple(row) for row in session.exec(query).all()]


def transcript_messages(*, session: Session, transcript_id: int) -> list[dict] | None:
    return session.exec(select(Transcript.messages).where(Transcript.id == transcript_id)).first()


def declared_sequence_keys(*, session: Session, version_ids: list[int]) -> list[str]:
    """The variant sequence keys the given task versions declare."""
    if not version_ids:
        return []
    query = (
        select(TaskVersionVariant.sequence_key)
        .where(in_ids(session, TaskVersionVariant.task_version_id, version_ids))
        .distinct()
    )
    return sorted(session.exec(query).all())


def simulators_of_versions(*, session: Session, version_ids: list[int]) -> list[tuple[str, str]]:
    """(simulator, spec) of the mapped transcripts of the given task versions."""
    if not version_ids:
        return []
    query = (
        select(MappedTranscript.simulator, MappedTranscript.spec)
        .join(Transcript, Transcript.id == MappedTranscript.transcript_id)
        .where(in_ids(session, Transcript.task_version_id, version_ids))
        .distinct()
        .order_by(MappedTranscript.simulator, MappedTranscript.spec)
    )
    return [tuple(row) for row in session.exec(query).all()]


WAIVER = "realism_waiver"


def waivers_of(*, session: Session, simulator: str) -> list[dict]:
    """The ledger's waivers for `simulator`, oldest first: seq, payload, actor id."""
    where = (LedgerEntry.artifact_type == WAIVER) & (LedgerEntry.artifact_id == simulator)
    return [
        {"seq": row.seq, "payload": row.payload, "actor_id": row.actor_id}
        for row in entry_rows(session=session, where=where)
    ]


# blind tests -------------------------------------------------------------------------------


def blind_test(*, session: Session, name: str) -> BlindTest | None:
    return session.exec(select(BlindTest).where(BlindTest.name == name)).first()


def blind_tests(*, session: Session) -> list[BlindTest]:
    return list(session.exec(select(BlindTest).order_by(BlindTest.created_at, BlindTest.id)))


def fragments_of(*, session: Session, test_id: int) -> list[BlindFragment]:
    query = (
        select(BlindFragment)
        .where(BlindFragment.test_id == test_id)
        .order_by(BlindFragment.position)
    )
    return list(session.exec(query).all())


def next_fragment(*, session: Session, test_id: int, expert_id: int) -> BlindFragment | None:
    """The first fragment of the test (by position) the expert has not answered."""
    answered = select(BlindAnswer.fragment_id).where(BlindAnswer.expert_id == expert_id)
    query = (
        select(BlindFragment)
        .where(BlindFragment.test_id == test_id, BlindFragment.id.not_in(answered))
        .order_by(BlindFragment.position)
        .limit(1)
    )
    return session.exec(query).first()


def answer_counts(*, session: Session, test_id: int, expert_id: int) -> tuple[int, int]:
    """(fragments answered by the expert, fragments of the test)."""
    total = session.exec(
        select(func.count()).select_from(BlindFragment).where(BlindFragment.test_id == test_id)
    ).one()
    done = session.exec(
        select(func.count())
        .select_from(BlindAnswer)
        .join(BlindFragment, BlindFragment.id == BlindAnswer.fragment_id)
        .where(BlindFragment.test_id == test_id, BlindAnswer.expert_id == expert_id)
    ).one()
    return int(done), int(total)


def has_answer(*, session: Session, fragment_id: int, expert_id: int) -> bool:
    query = select(BlindAnswer.id).where(
        BlindAnswer.fragment_id == fragment_id, BlindAnswer.expert_id == expert_id
    )
    return session.exec(query).first() is not None


def answers_of(*, session: Session, test_id: int) -> list[tuple]:
    """(source, judged, confidence, expert id, expert username, expert's expertise) of every
    answer."""
    query = (
        select(
            BlindFragment.source,
            BlindAnswer.judged,
            BlindAnswer.confidence,
            BlindAnswer.expert_id,
            User.username,
            User.expertise,
        )
        .join(BlindFragment, BlindFragment.id == BlindAnswer.fragment_id)
        .join(User, User.id == BlindAnswer.expert_id)
        .where(BlindFragment.test_id == test_id)
        .order_by(BlindAnswer.id)
    )
    return [tuple(row) for row in session.exec(query).all()]


# turn labels -------------------------------------------------------------------------------


def with_unmapped(*, session: Session, spec: str) -> list[tuple[MappedTranscript, list[dict]]]:
    """The mappings under `spec` with turns no rule matched, and their transcripts' messages,
    in transcript order."""
    query = (
        select(MappedTranscript, Transcript.messages)
        .join(Transcript, Transcript.id == MappedTranscript.transcript_id)
        .where(MappedTranscript.spec == spec)
        .order_by(MappedTranscript.transcript_id)
    )
    return [(row, messages) for row, messages in session.exec(query).all() if row.unmapped]


def labels_of(*, session: Session, spec: str, transcript_ids: list[int]) -> list[TurnLabel]:
    if not transcript_ids:
        return []
    query = select(TurnLabel).where(
        TurnLabel.spec == spec, in_ids(session, TurnLabel.transcript_id, transcript_ids)
    )
    return list(session.exec(query).all())


def labels_with_context(
    *, session: Session, state: str | None = None, limit: int = 200
) -> list[tuple[TurnLabel, str, str, list[dict]]]:
    """Labels (in one state), oldest first, with the transcript's id, its task's id and its
    messages."""
    query = (
        select(TurnLabel, Transcript.external_id, Task.external_id, Transcript.messages)
        .join(Transcript, Transcript.id == TurnLabel.transcript_id)
        .join(TaskVersion, TaskVersion.id == Transcript.task_version_id)
        .join(Task, Task.id == TaskVersion.task_id)
        .order_by(TurnLabel.id)
        .limit(limit)
    )
    if state is not None:
        query = query.where(TurnLabel.state == state)
    return [tuple(row) for row in session.exec(query).all()]


def mapped_row(*, session: Session, transcript_id: int, spec: str) -> MappedTranscript | None:
    """The mapping, locked until the transaction ends (PostgreSQL; a writing transaction on
    SQLite holds the database): two labels of one transcript confirmed at once both land."""
    query = (
        select(MappedTranscript)
        .where(MappedTranscript.transcript_id == transcript_id, MappedTranscript.spec == spec)
        .with_for_update()
    )
    return session.exec(query).first()


def settle_label(*, session: Session, label_id: int, state: str, user_id: int, at) -> bool:
    """Decide a proposed label in one statement; False when it was decided meanwhile."""
    done = session.exec(
        update(TurnLabel)
        .where(TurnLabel.id == label_id, TurnLabel.state == "proposed")
        .values(state=state, decided_by_id=user_id, decided_at=at)
    )
    return done.rowcount == 1


def activity_names(*, session: Session, log_id: int) -> list[str]:
    query = (
        select(LogActivity.name)
        .where(LogActivity.log_id == log_id)
        .order_by(LogActivity.event_count.desc(), LogActivity.name)
    )
    return list(session.exec(query).all())


def close_test(*, session: Session, test_id: int, at) -> bool:
    """Close an open blind test in one statement; False when it was closed meanwhile."""
    done = session.exec(
        update(BlindTest)
        .where(BlindTest.id == test_id, BlindTest.state == "open")
        .values(state="closed", closed_at=at)
    )
    return done.rowcount == 1
