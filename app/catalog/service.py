"""Importing tasks into the catalog: versioned by content hash, provenance to the ledger."""

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries
from itsmreview.catalog.models import Task, TaskVersion, Transcript
from itsmreview.catalog.native import NativeTask, load_bundle
from itsmreview.db import utcnow
from itsmreview.errors import InvalidInput
from itsmreview.ledger.service import append_entry
from sqlmodel import Session

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
) -> ImportReport:
    """Store each task as a new task or a new version; unchanged content is a no-op.

    Runs in the caller's transaction: the caller commits the whole batch or nothing.
    """
    report = ImportReport()
    for item in tasks:
        digest = item.content_hash()
        task = queries.task_by_external_id(session=session, external_id=item.id)
        if task is None:
            task = Task(
                external_id=item.id,
                title=item.title,
                persona=item.persona,
                track=item.track,
                author_id=author_id,
            )
            session.add(task)
            session.flush()
            number = 1
            report.created.append(item.id)
        else:
            if queries.version_by_hash(session=session, task_id=task.id, content_hash=digest):
                report.unchanged.append(item.id)
                continue
            latest = queries.latest_version(session=session, task_id=task.id)
            number = (latest.version if latest else 0) + 1
            task.title, task.persona, task.track = item.title, item.persona, item.track
            task.updated_at = utcnow()
            report.new_versions.append(item.id)
        dumped = item.model_dump(mode="json")
        version = TaskVersion(
            task_id=task.id,
            version=number,
            content_hash=digest,
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
        )
        session.add(version)
        session.flush()
        for transcript in dumped["transcripts"]:
            session.add(
                Transcript(
                    task_version_id=version.id,
                    external_id=transcript["id"],
                    title=transcript.get("title", ""),
                    simulator=transcript.get("simulator", {}),
                    messages=transcript["messages"],
                    n_turns=len(transcript["messages"]),
                )
            )
        artifact = f"{item.id}@v{number}"
        append_entry(
            session=session,
            artifact_type="task",
            artifact_id=artifact,
            action="import",
            source_kind="system",
            actor_id=actor_id,
            reference=f"format {source_format}",
            payload={"content_hash": digest},
        )
        for declared in dumped["provenance"]:
            append_entry(
                session=session,
                artifact_type="task",
                artifact_id=artifact,
                field=declared["field"],
                action="declare-provenance",
                source_kind=declared["source"],
                reference=declared.get("reference", ""),
                actor_id=actor_id,
            )
    session.flush()
    return report


def _bundle_from_upload(filename: str, content: bytes) -> list[NativeTask]:
    suffix = Path(filename).suffix.lower()
    if suffix not in (".json", ".jsonl", ".yaml", ".yml"):
        raise InvalidInput(f"{filename}: expected a .json, .jsonl, .yaml or .yml bundle")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"bundle{suffix}"
        path.write_bytes(content)
        try:
            return load_bundle(path)
        except ValueError as exc:
            raise InvalidInput(str(exc).replace(str(path), filename)) from None


def preview_bundle_upload(
    filename: str, content: bytes, *, session: Session, actor: User
) -> ImportReport:
    """What importing the uploaded bundle would do; changes nothing. Admins only."""
    require_role(actor, Role.admin)
    tasks = _bundle_from_upload(filename, content)
    savepoint = session.begin_nested()
    try:
        return import_tasks(tasks, session=session, actor_id=actor.id)
    finally:
        savepoint.rollback()


def import_bundle_upload(
    filename: str, content: bytes, *, session: Session, actor: User
) -> ImportReport:
    """Import the uploaded bundle in the caller's transaction. Admins only."""
    require_role(actor, Role.admin)
    return import_tasks(_bundle_from_upload(filename, content), session=session, actor_id=actor.id)
