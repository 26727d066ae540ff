"""`itsmreview worker`: the handler of each job kind, and a loop that also applies the gate.

A worker process runs what the web processes queue (setting `jobs=worker`): model reviews,
log and task imports and exports started from pages, the figures the lead's pages show
(`summaries`), and, between jobs, the ratings waiting for the
approval gate (their own queue, `gate_pending`). Any number of workers
may run, on any hosts that reach the database; see docs/deployment.md."""

from pathlib import Path

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import SessionCheck, require_role, revalidate
from itsmreview.db import session_scope
from itsmreview.jobs.models import Job
from itsmreview.jobs.service import JobContext, Worker, enqueue, handler
from itsmreview.settings import get_settings
from sqlmodel import Session


def in_workers() -> bool:
    """Whether background work goes to `itsmreview worker` processes (ITSMREVIEW_JOBS=worker)."""
    return get_settings().jobs == "worker"


def start_model_review_run(run_id: int) -> bool:
    """Run an opened model review in the background: a worker's job, or a thread of this
    process. False when it runs already."""
    if in_workers():
        with session_scope() as session:
            job = enqueue(
                session=session, kind="model_review", key=str(run_id), payload={"run_id": run_id}
            )
            return job.attempts == 0 and job.started_at is None
    from itsmreview.review.assist.rater import run_in_background

    return run_in_background(run_id)


def queue_export(*, session: Session, actor: User, name: str, **options) -> Job:
    """Queue an export into the data folder's exports/NAME for a worker (the Exports page with
    ITSMREVIEW_JOBS=worker); options as `exports.service.export_set` takes them (JSON-ready).
    Leads only; the worker acts as this lead while their session lasts."""
    from itsmreview.exports.service import export_folder

    require_role(actor, Role.lead)
    folder = export_folder(name)  # a bad name fails here, before anything is queued
    return enqueue(
        session=session,
        kind="export",
        key=folder.name,
        payload={"name": folder.name, **actor_fields(actor), **options},
        max_attempts=3,
    )


def job_of(job_id: int) -> Job:
    """A job as stored now (the pages poll it for progress)."""
    from itsmreview.jobs.service import job_status

    with session_scope() as session:
        job = job_status(session=session, job_id=job_id)
        session.expunge(job)
        return job


@handler("model_review")
def run_model_review_job(job: JobContext) -> dict:
    """Idempotent: a model review resumes where it stopped (tasks already answered are skipped)."""
    from itsmreview.review.assist.rater import run_model_review

    run = run_model_review(
        int(job.payload["run_id"]),
        progress=lambda stage, fraction: job.progress(fraction, stage),
    )
    return {"run_id": run.id, "status": str(run.status)}


@handler("export")
def run_export_job(job: JobContext) -> dict:
    """Idempotent: an export is staged and published by one rename; a rerun of a published one
    with the same name fails cleanly instead of writing twice."""
    from itsmreview.exports.service import export_named
    from itsmreview.review.gate.work import apply_pending

    options = dict(job.payload)
    name = options.pop("name")
    check = SessionCheck(int(options.pop("actor_id")), int(options.pop("actor_epoch")))
    apply_pending()  # ratings on their way to the gate decide what is approved, too
    with session_scope() as session:
        actor = revalidate(session=session, check=check)  # still the lead who asked
        result = export_named(
            name,
            session=session,
            actor=actor,
            progress=lambda stage, fraction: job.progress(fraction, stage),
            **options,
        )
    zip_key = None
    if result.zip_path is not None:  # for a replica on another host to offer it
        from itsmreview.storage import get_storage

        zip_key = f"exports/{result.zip_path.name}"
        get_storage().upload(result.zip_path, zip_key)
    return {
        "path": str(result.path),
        "zip_path": str(result.zip_path) if result.zip_path else None,
        "zip_key": zip_key,
        "tasks": result.tasks,
        "manifest_sha256": result.manifest_sha256,
    }


@handler("log_import")
def run_log_import_job(job: JobContext) -> dict:
    """Idempotent: an import of a file already imported returns its log (the content hash
    decides), and a killed import leaves only leased staging that cleanup removes."""
    import tempfile

    from itsmreview.coverage.eventlog import ColumnMapping
    from itsmreview.coverage.service import import_log_as
    from itsmreview.errors import InvalidInput
    from itsmreview.files import UnsafePath, safe_join
    from itsmreview.storage import get_storage

    options = dict(job.payload)
    upload = options.pop("upload")
    check = SessionCheck(int(options.pop("actor_id")), int(options.pop("actor_epoch")))
    mapping = options.pop("mapping", None)
    if mapping is not None:
        mapping = ColumnMapping(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in mapping.items()}
        )
    storage = get_storage()
    with tempfile.TemporaryDirectory(prefix="itsmreview-upload-") as folder:
        try:  # the name came from outside (an upload): it must stay inside the temporary folder
            target = safe_join(Path(folder), options.pop("filename"))
        except UnsafePath as exc:
            raise InvalidInput(f"the upload's file name {exc}") from None
        local = storage.download(target, upload)
        with session_scope() as session:
            actor = revalidate(session=session, check=check)  # still the admin who asked
            result = import_log_as(
                local,
                session=session,
                actor=actor,
                mapping=mapping,
                progress=lambda stage, fraction: job.progress(fraction, stage),
                **options,
            )
            log = result.log
            summary = {
                "log": log.name,
                "version": log.version,
                "cases": log.n_cases,
                "events": log.n_events,
                "created": result.created,
            }
    storage.delete(upload.rsplit("/", 1)[0])  # the upload's folder: imported, not needed
    return summary


def queue_log_import(
    *, session: Session, actor: User, source: Path, name: str | None, preset: str | None, mapping
) -> Job:
    """Copy a file to the storage's uploads and queue its import for a worker (the Imports
    page with ITSMREVIEW_JOBS=worker). Admins only; the worker imports as this admin while
    their session lasts."""
    mapping = mapping.to_dict() if mapping is not None else None
    return _queue_upload(
        session=session,
        actor=actor,
        source=source,
        kind="log_import",
        at_file=True,
        payload={"name": name, "preset": preset, "mapping": mapping},
    )


@handler("task_import")
def run_task_import_job(job: JobContext) -> dict:
    """Idempotent: a task file is imported all or nothing in one transaction, and importing
    it again leaves every task unchanged (content decides a new version)."""
    import tempfile

    from itsmreview.errors import InvalidInput
    from itsmreview.files import UnsafePath, safe_join
    from itsmreview.review.repair.service import import_as
    from itsmreview.storage import get_storage

    options = dict(job.payload)
    upload = options.pop("upload")
    name = options.pop("filename")
    check = SessionCheck(int(options.pop("actor_id")), int(options.pop("actor_epoch")))
    storage = get_storage()
    with tempfile.TemporaryDirectory(prefix="itsmreview-upload-") as folder:
        try:  # the name came from outside: it must stay inside the temporary folder
            source = safe_join(Path(folder), name)
        except UnsafePath as exc:
            raise InvalidInput(f"the upload's file name {exc}") from None
        job.progress(0.0, "fetching the upload")
        storage.download_tree(Path(folder), upload)
        if not source.exists():
            raise InvalidInput(f"{name}: the upload is missing from the storage; import it again")
        job.progress(0.2, "importing")
        with session_scope() as session:
            actor = revalidate(session=session, check=check)  # still the admin who asked
            done = import_as(source, session=session, actor=actor, **options)
            summary = {
                "format": done.format,
                "created": len(done.report.created),
                "new_versions": len(done.report.new_versions),
                "unchanged": len(done.report.unchanged),
                "requeued": len(done.requeued),
            }
    storage.delete(upload)  # imported, not needed
    return summary


def queue_task_import(
    *,
    session: Session,
    actor: User,
    source: Path,
    fmt: str,
    log: str | None,
    task: str | None,
) -> Job:
    """Copy a task or transcript file (or a Harbor task folder) to the storage's uploads and
    queue its import for a worker (the Imports page with ITSMREVIEW_JOBS=worker). Admins only;
    the worker imports as this admin while their session lasts."""
    return _queue_upload(
        session=session,
        actor=actor,
        source=source,
        kind="task_import",
        at_file=False,
        payload={"fmt": fmt, "log": log, "task": task},
        max_attempts=3,
    )


def _queue_upload(
    *,
    session: Session,
    actor: User,
    source: Path,
    kind: str,
    at_file: bool,
    payload: dict,
    **options,
) -> Job:
    """Copy `source` (a file or folder) under a new `uploads/<id>/` of the storage and queue a
    `kind` job for it, as a lead or admin. Its payload's `upload` is that folder, or with `at_file`
    the file's own key; `filename` is the source's name."""
    import uuid

    from itsmreview.storage import get_storage

    require_role(actor, Role.lead)
    folder = f"uploads/{uuid.uuid4().hex}"
    get_storage().upload_tree(source, folder)
    upload = f"{folder}/{source.name}" if at_file else folder
    return enqueue(
        session=session,
        kind=kind,
        key=upload,
        payload={"upload": upload, "filename": source.name, **payload, **actor_fields(actor)},
        **options,
    )


def actor_fields(user: User) -> dict:
    """What a job remembers of who queued it: the worker acts as them only while their
    session is as it was (same epoch: not logged out, deactivated or changed since)."""
    return {"actor_id": int(user.id), "actor_epoch": int(user.session_epoch or 0)}


def export_zip(result: dict) -> tuple[str, bytes] | None:
    """The zip of a finished export (a job's result, or the page's own export) as its file
    name and bytes: from the storage, where a worker on any host put it, else from this host's
    exports folder; None when neither has it."""
    from itsmreview.errors import NotFound
    from itsmreview.storage import get_storage

    if result.get("zip_key"):
        try:
            with get_storage().open(result["zip_key"]) as stored:
                return Path(result["zip_key"]).name, stored.read()
        except NotFound:
            pass
    local = Path(result["zip_path"]) if result.get("zip_path") else None
    if local is not None and local.is_file():
        return local.name, local.read_bytes()
    return None


# the modules whose figures a worker computes for the pages (`summaries`): each registers its
# computations when imported; tests/db/test_jobs.py checks that the pages register no others
SUMMARY_MODULES = (
    "itsmreview.review.dashboard.service",
    "itsmreview.review.gate.item_agreement",
    "itsmreview.coverage.overview",
    "itsmreview.coverage.across_logs",
    "itsmreview.ledger.evidence.service",
)


def load_summary_computations() -> set[str]:
    """Import every module that registers a summary computation; the kinds registered."""
    import importlib

    from itsmreview.summaries.service import registered_kinds

    for module in SUMMARY_MODULES:
        importlib.import_module(module)
    return registered_kinds()


@handler("summary")
def run_summary_job(job: JobContext) -> dict:
    """Idempotent: figures are computed whole and stored in place of the old ones; a build
    (a round's adjudication queue) is one transaction that a rerun finds done."""
    from itsmreview.db import get_engine
    from itsmreview.summaries.service import run_job

    load_summary_computations()
    return run_job(get_engine(), job.payload)


def apply_gate_queue() -> int:
    from itsmreview.review.gate.work import apply_pending

    return apply_pending()


def worker(*, poll_s: float = 2.0, kinds: list[str] | None = None) -> Worker:
    """A worker of this process over the configured database (`run()` it; `stop()` ends it)."""
    return Worker(poll_s=poll_s, kinds=kinds, between=apply_gate_queue)
