"""Importing tasks into the catalog: versioned by content hash, provenance to the ledger."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from itsmreview.catalog import queries
from itsmreview.catalog.models import (
    Task,
    TaskStatus,
    TaskVersion,
    TaskVersionVariant,
    Transcript,
)
from itsmreview.catalog.native import NativeTask
from itsmreview.catalog.state import simulator_backbone, simulator_user_type
from itsmreview.db import analyze, utcnow
from itsmreview.ledger.service import append_entries
from itsmreview.sequences import declared_sequences
from sqlmodel import Session

TRANSCRIPT_FIELDS = {"id", "title", "simulator", "messages"}
CORE_FIELDS = {
    "id",
    "title",
    "persona",
    "track",
    "instruction",
    "environment",
    "ground_truth",
    "verifier",
    "tags",
    "source",
    "provenance",
    "transcripts",
}


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    new_versions: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "created": self.created,
            "new_versions": self.new_versions,
            "unchanged": self.unchanged,
        }


def import_tasks(
    tasks: Iterable[NativeTask],
    *,
    session: Session,
    source_format: str = "native",
    actor_id: int | None = None,
    author_id: int | None = None,
    dry_run: bool = False,
) -> ImportReport:
    """Store each task as a new task or a new version; unchanged content is a no-op.

    Runs in the caller's transaction: the caller commits the whole batch or nothing. The
    stored tasks and versions are read in one query a BATCH of tasks, rows are written a batch
    at a time and the batch's ledger entries appended at once. With `dry_run` nothing is
    written: the report says what an import would do.
    """
    report = ImportReport()
    batch: list[NativeTask] = []
    for item in tasks:
        batch.append(item)
        if len(batch) == BATCH:
            _import_batch(batch, session, source_format, actor_id, author_id, dry_run, report)
            batch = []
    if batch:
        _import_batch(batch, session, source_format, actor_id, author_id, dry_run, report)
    if dry_run:
        return report
    session.flush()
    if len(report.created) + len(report.new_versions) >= ANALYZE_AFTER:
        analyze(session, "tasks", "task_versions", "task_version_variants", "transcripts")
    return report


BATCH = 1_000  # tasks looked up, written and chained into the ledger together


def _import_batch(
    items: list[NativeTask],
    session: Session,
    source_format: str,
    actor_id: int | None,
    author_id: int | None,
    dry_run: bool,
    report: ImportReport,
) -> None:
    """One batch: plan (new task, new version or unchanged), then write the versions, their
    variants and transcripts, and append their ledger entries at once."""
    planned = _plan_batch(items, session, author_id, dry_run, report)
    if dry_run or not planned:
        return
    session.flush()  # new tasks get their ids, in one statement per table
    versions = [
        _new_version(item, digest, task, number, source_format, author_id)
        for item, digest, task, number in planned
    ]
    session.add_all([version for version, _ in versions])
    session.flush()
    entries = []
    for (version, dumped), (item, digest, _, number) in zip(versions, planned, strict=True):
        _add_parts(session, version, dumped)
        entries += _ledger_entries(item.id, number, digest, dumped, source_format, actor_id)
    append_entries(session=session, entries=entries)


def _plan_batch(
    items: list[NativeTask],
    session: Session,
    author_id: int | None,
    dry_run: bool,
    report: ImportReport,
) -> list[tuple[NativeTask, str, Task, int]]:
    """(item, content hash, task, version number) of each item whose content is new, in
    order; new tasks are added to the session and changed ones updated (unless `dry_run`).
    The report says which items were created, got a new version or were unchanged."""
    stored = queries.tasks_by_external_ids(session=session, external_ids=[i.id for i in items])
    hashes: dict[int, set[str]] = {}
    newest: dict[int, int] = {}
    for task_id, _, number, content_hash in queries.version_keys_of_tasks(
        session=session, task_ids=[t.id for t in stored.values()]
    ):
        hashes.setdefault(task_id, set()).add(content_hash)
        newest[task_id] = max(newest.get(task_id, 0), number)
    planned: list[tuple[NativeTask, str, Task, int]] = []
    written: dict[str, tuple[set[str], int]] = {}  # tasks of this batch, if named twice
    for item in items:
        digest = item.content_hash()
        task = stored.get(item.id)
        known, number = written.get(item.id) or (
            (hashes.get(task.id, set()), newest.get(task.id, 0)) if task else (set(), 0)
        )
        if digest in known:
            report.unchanged.append(item.id)
            continue
        if task is None and item.id not in written:
            report.created.append(item.id)
            task = Task(
                external_id=item.id,
                title=item.title,
                persona=item.persona,
                track=item.track,
                author_id=author_id,
            )
            stored[item.id] = task
            if not dry_run:
                session.add(task)
        else:
            report.new_versions.append(item.id)
            if not dry_run:
                task.title, task.persona, task.track = item.title, item.persona, item.track
                task.status = TaskStatus.draft  # the newest version is not reviewed yet
                task.updated_at = utcnow()
        written[item.id] = ({*known, digest}, number + 1)
        planned.append((item, digest, task, number + 1))
    return planned


def _new_version(
    item: NativeTask,
    digest: str,
    task: Task,
    number: int,
    source_format: str,
    author_id: int | None,
) -> tuple[TaskVersion, dict]:
    """The version `number` of `task` holding `item` (not yet added), and the item as
    stored; the task takes the version's authoring fields (difficulty, user type, backbone)."""
    dumped = item.stored()
    simulators = [t.get("simulator") or {} for t in dumped["transcripts"]]
    authoring = {
        "difficulty": item.difficulty,
        "user_type": item.user_type or simulator_user_type(simulators),
        "simulator_backbone": simulator_backbone(simulators),
    }
    for name, value in authoring.items():
        setattr(task, name, value)
    version = TaskVersion(
        task_id=task.id,
        version=number,
        content_hash=digest,
        title=item.title,
        persona=item.persona,
        track=item.track,
        source_format=source_format,
        instruction=item.instruction,
        environment=item.environment,
        ground_truth=item.ground_truth,
        verifier=item.verifier,
        tags=item.tags,
        source=dumped["source"],
        provenance=dumped["provenance"],
        extra={k: v for k, v in dumped.items() if k not in CORE_FIELDS},
        edited_by_id=author_id,
        **authoring,
    )
    return version, dumped


def _add_parts(session: Session, version: TaskVersion, dumped: dict) -> None:
    """Add a stored version's declared variant sequences and its transcripts."""
    for key, sequence in declared_sequences(dumped["source"]).items():
        session.add(
            TaskVersionVariant(task_version_id=version.id, sequence_key=key, sequence=sequence)
        )
    for transcript in dumped["transcripts"]:
        session.add(
            Transcript(
                task_version_id=version.id,
                external_id=transcript["id"],
                title=transcript.get("title", ""),
                simulator=transcript.get("simulator", {}),
                messages=transcript["messages"],
                n_turns=len(transcript["messages"]),
                extra={k: v for k, v in transcript.items() if k not in TRANSCRIPT_FIELDS},
            )
        )


def _ledger_entries(
    external_id: str,
    number: int,
    digest: str,
    dumped: dict,
    source_format: str,
    actor_id: int | None,
) -> list[dict]:
    """A version's ledger entries: its import, then each field's declared provenance."""
    artifact = f"{external_id}@v{number}"
    imported = {
        "artifact_type": "task",
        "artifact_id": artifact,
        "action": "import",
        "source_kind": "system",
        "actor_id": actor_id,
        "reference": f"format {source_format}",
        "payload": {"content_hash": digest},
    }
    return [imported] + [
        {
            "artifact_type": "task",
            "artifact_id": artifact,
            "field": declared["field"],
            "action": "declare-provenance",
            "source_kind": declared["source"],
            "reference": declared.get("reference", ""),
            "actor_id": actor_id,
        }
        for declared in dumped["provenance"]
    ]


ANALYZE_AFTER = 1000  # tasks written in one import: refresh the planner's statistics


def version_to_native(task: Task, version: TaskVersion, transcripts: list[Transcript]) -> dict:
    """The native task dict of a stored version; its content hash equals the version's."""
    native = {
        "id": task.external_id,
        "title": version.title or task.title,
        "persona": version.persona or task.persona,
        "track": version.track or task.track,
        "instruction": version.instruction,
        "environment": version.environment,
        "ground_truth": version.ground_truth,
        "verifier": version.verifier,
        "tags": list(version.tags),
        "source": version.source,
        "provenance": list(version.provenance),
        "transcripts": [
            {
                "id": t.external_id,
                "title": t.title,
                "simulator": t.simulator,
                "messages": t.messages,
                **(t.extra or {}),
            }
            for t in transcripts
        ],
    }
    native.update({k: v for k, v in version.extra.items() if k not in native})
    return native


def latest_version_ids(*, session: Session, external_ids: list[str] | None = None) -> list[int]:
    """The newest version id of each task (of those named, or of every task)."""
    return queries.latest_version_ids(session=session, external_ids=external_ids)


def tasks_frame(*, session: Session):
    """Every task with its newest version's listed fields, one row each (a DataFrame)."""
    return queries.tasks_frame(session=session)
