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
from itsmreview.ledger.service import append_entry
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
            task.status = TaskStatus.draft  # the newest version is not reviewed yet
            task.updated_at = utcnow()
            report.new_versions.append(item.id)
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
        session.add(version)
        session.flush()
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
    if len(report.created) + len(report.new_versions) >= ANALYZE_AFTER:
        analyze(session, "tasks", "task_versions", "task_version_variants", "transcripts")
    return report


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
