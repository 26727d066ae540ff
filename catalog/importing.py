"""Importing task and transcript files of any supported format (service layer)."""

from dataclasses import dataclass, field
from pathlib import Path

from itsmreview.catalog import queries
from itsmreview.catalog.formats import (
    TRANSCRIPT_FORMATS,
    detect_format,
    read_tasks,
    read_transcripts,
)
from itsmreview.catalog.formats.common import ORIGINAL
from itsmreview.catalog.formats.trajectories import taubench_task
from itsmreview.catalog.native import NativeTask, load_bundle, parse_bundle
from itsmreview.catalog.service import ImportReport, import_tasks, version_to_native
from itsmreview.coverage import queries as coverage_queries
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.sequences import sequence_key
from itsmreview.storage import get_storage
from sqlmodel import Session

FORMAT_CHOICES = ("auto", "native", "harbor", "tau2", "eogym", *TRANSCRIPT_FORMATS)


@dataclass
class FileImport:
    format: str
    report: ImportReport
    unresolved: dict[str, dict] = field(default_factory=dict)
    dry_run: bool = False
    requeued: list[str] = field(default_factory=list)  # set by review.repair.import_path

    def as_dict(self) -> dict:
        return {
            "format": self.format,
            **self.report.as_dict(),
            "unresolved": self.unresolved,
            "dry_run": self.dry_run,
            "requeued": self.requeued,
        }


def _with_transcripts(
    session: Session,
    path: Path,
    fmt: str,
    task: str | None,
    persona: str = "L1 service desk agent",
    log: str | None = None,
) -> list[dict]:
    """The tasks the transcripts belong to, with them added. A tau-bench (v1) result that
    carries its task (`info.task`) creates the task when the catalog lacks it."""
    natives = []
    for task_id, transcripts in read_transcripts(path, fmt, task=task).items():
        stored = queries.task_by_external_id(session=session, external_id=task_id)
        carried = (
            taubench_task(transcripts[0][ORIGINAL], task_id, persona, log)
            if stored is None and fmt == "taubench"
            else None
        )
        if carried is not None:
            natives.append({**carried, "transcripts": transcripts})
            continue
        if stored is None:
            raise NotFound(
                f"{path}: transcripts belong to task {task_id!r}, which is not in "
                "the catalog; import the task first or pass --task ID"
            )
        version = queries.latest_version(session=session, task_id=stored.id)
        native = version_to_native(
            stored, version, queries.transcripts_of(session=session, task_version_id=version.id)
        )
        known = {t["id"] for t in native["transcripts"]}
        native["transcripts"] += [t for t in transcripts if t["id"] not in known]
        natives.append(native)
    return natives


def read_path(
    path: Path,
    *,
    session: Session,
    fmt: str = "auto",
    log: str | None = None,
    task: str | None = None,
    persona: str = "L1 service desk agent",
) -> tuple[str, list[NativeTask]]:
    """The validated native tasks that importing `path` would store, and its format."""
    if fmt not in FORMAT_CHOICES:
        raise InvalidInput(f"format {fmt!r} is not one of {', '.join(FORMAT_CHOICES)}")
    try:
        fmt = detect_format(path) if fmt == "auto" else fmt
        if fmt in TRANSCRIPT_FORMATS:
            natives = _with_transcripts(session, path, fmt, task, persona=persona, log=log)
            tasks = parse_bundle(natives, str(path))
        elif fmt == "native":
            tasks = load_bundle(path)
        else:
            tasks = parse_bundle(read_tasks(path, fmt, persona=persona, log=log), str(path))
    except NotFound:
        raise
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if log and fmt == "native":
        for item in tasks:
            if not item.source.log:
                item.source.log = log
    return fmt, tasks


def unresolved_links(tasks: list[NativeTask], *, session: Session) -> dict[str, dict]:
    """Per task, what its source declares that the named log does not contain."""
    out: dict[str, dict] = {}
    logs: dict[str, tuple] = {}
    for item in tasks:
        name = item.source.log
        if not name:
            continue
        if name not in logs:
            log = coverage_queries.latest_log(session=session, name=name)
            if log is None:
                logs[name] = (None, set(), set(), {})
            else:
                keys = set(
                    coverage_queries.variants_frame(session=session, log_id=log.id)["sequence_key"]
                )
                cases = set()
                storage = get_storage()
                if log.events_path and storage.exists(log.events_path, "cases.parquet"):
                    cases = set(
                        storage.read_table(log.events_path, "cases.parquet", columns=["case_id"])
                        .column("case_id")
                        .cast("string")
                        .to_pylist()
                    )
                roles = coverage_queries.role_values_frame(session=session, log_id=log.id)
                values = {a: set(r["value"]) for a, r in roles.groupby("attribute")}
                logs[name] = (log, keys, cases, values)
        log, keys, cases, values = logs[name]
        if log is None:
            out[item.id] = {"log": f"log {name!r} is not imported"}
            continue
        missing = {
            "variants": [s for s in item.source.variants if sequence_key(s) not in keys],
            "case_ids": [c for c in item.source.case_ids if str(c) not in cases],
            "roles": {
                a: [v for v in vs if v not in values.get(a, set())]
                for a, vs in item.source.roles.items()
                if any(v not in values.get(a, set()) for v in vs)
            },
        }
        missing = {k: v for k, v in missing.items() if v}
        if missing:
            out[item.id] = missing
    return out


def import_path(
    path: Path | str,
    *,
    session: Session,
    fmt: str = "auto",
    log: str | None = None,
    task: str | None = None,
    persona: str = "L1 service desk agent",
    actor_id: int | None = None,
    dry_run: bool = False,
) -> FileImport:
    """Import tasks (or transcripts for existing tasks) from `path`, all or nothing, in the
    caller's transaction; with `dry_run` nothing is kept. Raises InvalidInput or NotFound."""
    path = Path(path)
    fmt, tasks = read_path(path, session=session, fmt=fmt, log=log, task=task, persona=persona)
    report = import_tasks(
        tasks, session=session, source_format=fmt, actor_id=actor_id, dry_run=dry_run
    )
    return FileImport(fmt, report, unresolved_links(tasks, session=session), dry_run)


def show_task(*, session: Session, external_id: str, version: int | None = None) -> dict:
    """The native form of a task's newest (or given) version, with its version number."""
    task = queries.task_by_external_id(session=session, external_id=external_id)
    if task is None:
        raise NotFound(f"no task {external_id!r}; `itsmreview tasks list` shows the ids")
    stored = (
        queries.version_number(session=session, task_id=task.id, number=version)
        if version
        else queries.latest_version(session=session, task_id=task.id)
    )
    if stored is None:
        raise NotFound(f"task {external_id!r} has no version {version}")
    native = version_to_native(
        task, stored, queries.transcripts_of(session=session, task_version_id=stored.id)
    )
    return {
        "task_version_id": stored.id,
        "version": stored.version,
        "status": stored.status,
        "content_hash": stored.content_hash,
        "task": native,
    }
