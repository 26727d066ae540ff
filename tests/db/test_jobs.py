"""The job queue on both databases: one job per kind and key at a time, each claimed by one
worker, a dead worker's job taken over when its lease lapses, retries, NOTIFY wake-ups, and a
worker process killed mid-export whose export a second worker finishes intact."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta

import pytest
from itsmreview.db import session_scope, utcnow, write_transaction
from itsmreview.errors import InvalidInput
from itsmreview.jobs import service
from itsmreview.jobs.models import Job, JobStatus
from itsmreview.jobs.service import enqueue, run_next
from itsmreview.settings import get_settings


@pytest.fixture
def handlers():
    """Handlers of test-only kinds, removed afterwards."""
    added = []

    def add(kind, function):
        service.HANDLERS[kind] = function
        added.append(kind)

    yield add
    for kind in added:
        service.HANDLERS.pop(kind, None)


def _job(job_id: int) -> Job:
    with session_scope() as session:
        job = session.get(Job, job_id)
        session.expunge(job)
        return job


def _enqueue(kind: str, key: str = "", **payload) -> int:
    with session_scope() as session:
        return enqueue(session=session, kind=kind, key=key, payload=payload).id


def test_one_active_job_per_kind_and_key(configured, handlers):
    handlers("t-echo", lambda job: {"echo": job.payload["n"]})
    first = _enqueue("t-echo", "a", n=1)
    assert _enqueue("t-echo", "a", n=2) == first  # queued: the same job
    other = _enqueue("t-echo", "b", n=3)
    assert other != first
    assert run_next(kinds=["t-echo"]).job_id == first
    done = _job(first)
    assert (done.status, done.result, done.progress, done.attempts) == ("done", {"echo": 1}, 1.0, 1)
    again = _enqueue("t-echo", "a", n=4)  # the first one ended: a new job
    assert again not in (first, other)
    with session_scope() as session, pytest.raises(InvalidInput):
        enqueue(session=session, kind="", key="x")


def test_progress_is_stored_and_a_failure_is_retried_then_failed(configured, handlers):
    calls = []

    def flaky(job):
        calls.append(job.job_id)
        job.progress(0.4, "reading", every_s=0)
        assert _job(job.job_id).message == "reading"  # readable by a page while it runs
        raise RuntimeError(f"attempt {len(calls)} broke")

    handlers("t-flaky", flaky)
    with session_scope() as session:
        job_id = enqueue(session=session, kind="t-flaky", max_attempts=2).id
    run_next(kinds=["t-flaky"])
    job = _job(job_id)
    assert (job.status, job.attempts, job.error) == ("queued", 1, "RuntimeError: attempt 1 broke")
    assert job.run_after > utcnow()  # backs off
    assert run_next(kinds=["t-flaky"]) is None  # not due yet
    _due_now(job_id)
    run_next(kinds=["t-flaky"])
    job = _job(job_id)
    assert (job.status, job.attempts, job.error) == ("failed", 2, "RuntimeError: attempt 2 broke")
    assert len(calls) == 2


def _due_now(job_id: int) -> None:
    def move(session):
        job = session.get(Job, job_id)
        job.run_after = utcnow() - timedelta(seconds=1)
        session.add(job)

    write_transaction(move)


def test_a_dead_workers_job_is_taken_over_and_the_dead_one_cannot_close_it(configured, handlers):
    handlers("t-work", lambda job: {"by": job.worker})
    job_id = _enqueue("t-work")
    from sqlalchemy import Engine

    engine: Engine = __import__("itsmreview.db", fromlist=["get_engine"]).get_engine()
    dead = service._claim(engine, "dead-worker", ["t-work"])  # claimed, then the process died
    assert dead.job_id == job_id
    assert run_next(worker="second", kinds=["t-work"]) is None  # its lease still holds

    def lapse(session):
        job = session.get(Job, job_id)
        job.lease_until = utcnow() - timedelta(seconds=1)
        session.add(job)

    write_transaction(lapse)
    taken = run_next(worker="second", kinds=["t-work"])
    assert taken.job_id == job_id
    job = _job(job_id)
    assert (job.status, job.attempts, job.result) == ("done", 2, {"by": "second"})
    assert not service._close(dead, status=JobStatus.failed, error="late")  # changes nothing
    assert _job(job_id).status == "done"


def test_two_workers_run_every_job_exactly_once(configured, handlers):
    ran: list[int] = []
    lock = threading.Lock()

    def work(job):
        time.sleep(0.01)
        with lock:
            ran.append(job.job_id)

    handlers("t-many", work)
    ids = [_enqueue("t-many", str(n)) for n in range(30)]

    def drain(name):
        while run_next(worker=name, kinds=["t-many"]):
            pass

    workers = [threading.Thread(target=drain, args=(f"w{n}",)) for n in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert sorted(ran) == sorted(ids)  # each once
    with session_scope() as session:
        statuses = {session.get(Job, i).status for i in ids}
    assert statuses == {"done"}


def test_a_waiting_worker_runs_a_new_job_at_once(configured, handlers):
    """PostgreSQL wakes a waiting worker by NOTIFY (its poll here is far longer than the test
    may take); SQLite's worker polls."""
    from itsmreview.jobs.service import Worker

    postgres = not configured.resolved_database_url().startswith("sqlite")
    handlers("t-wake", lambda job: None)
    waiting = Worker(poll_s=60.0 if postgres else 0.1, kinds=["t-wake"])
    thread = threading.Thread(target=waiting.run)
    thread.start()
    try:
        time.sleep(0.5)  # waiting now
        started = time.monotonic()
        job_id = _enqueue("t-wake")
        while _job(job_id).status != "done":
            assert time.monotonic() - started < 30, "the worker was not woken"
            time.sleep(0.05)
    finally:
        waiting.stop()
        if postgres:  # wake it so that it sees the stop
            _enqueue("t-wake", "stop")
        thread.join(90)
    assert not thread.is_alive()
    assert waiting.ran >= 1


WORKER = textwrap.dedent(
    """
    import sys, time
    from itsmreview.jobs import service
    from itsmreview.worker import worker

    original = service.JobContext.progress

    def slow(self, fraction, message="", **options):  # a long export, for the test to kill
        held = original(self, fraction, message, every_s=0)
        time.sleep(0.4)
        return held

    service.JobContext.progress = slow
    worker(poll_s=0.1, kinds=["export"]).run()
    """
)


def test_a_worker_killed_mid_export_loses_nothing(reviewed, monkeypatch):
    """kill -9 of the worker while it writes an export: nothing is published half-written; a
    second worker takes the job over when its lease lapses and publishes the whole export."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.exports.service import verify_export
    from itsmreview.worker import queue_export

    monkeypatch.setenv("ITSMREVIEW_JOB_LEASE_S", "2")
    get_settings.cache_clear()
    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        job_id = queue_export(session=session, actor=lead, name="killed", bootstrap=200).id
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    process = subprocess.Popen([sys.executable, "-c", WORKER], env=env)
    try:
        deadline = time.monotonic() + 120
        while _job(job_id).progress <= 0.0:
            assert process.poll() is None, "the worker ended before the export started"
            assert time.monotonic() < deadline, "the worker never started the export"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
    killed = _job(job_id)
    assert killed.status == "running" and 0.0 < killed.progress < 1.0
    exports = get_settings().data_dir / "exports"
    assert not (exports / "killed").exists()  # nothing published half-written

    time.sleep(2.5)  # its lease lapses
    taken = run_next(worker="second", kinds=["export"])
    assert taken is not None and taken.job_id == job_id
    job = _job(job_id)
    assert (job.status, job.attempts) == ("done", 2), job.error
    assert job.result["tasks"] > 0
    report = verify_export(exports / "killed")
    assert report.ok, report


def test_a_log_uploaded_on_one_replica_is_imported_by_a_worker(configured, tmp_path):
    """The Imports page with ITSMREVIEW_JOBS=worker: the file goes to the storage, a worker
    imports it as the admin who asked, and the upload is removed; a refusal is not retried."""
    from itsmreview.accounts.service import create_user
    from itsmreview.coverage.synthetic import generate_log, write_csv
    from itsmreview.storage import get_storage
    from itsmreview.worker import queue_log_import

    source = write_csv(generate_log(120, seed=5), tmp_path / "replica-upload.csv")
    with session_scope() as session:
        admin, _ = create_user(session=session, username="admin", role="admin", password="a" * 12)
        job_id = queue_log_import(
            session=session,
            actor=admin,
            source=source,
            name="uploaded",
            preset="bpi2013",
            mapping=None,
        ).id
    upload = _job(job_id).payload["upload"]
    assert get_storage().exists(upload)
    run_next(kinds=["log_import"])
    job = _job(job_id)
    assert (job.status, job.result["log"], job.result["created"]) == ("done", "uploaded", True)
    assert job.result["cases"] == 120
    assert not get_storage().exists(upload)

    with session_scope() as session:
        again = queue_log_import(
            session=session,
            actor=session.merge(admin),
            source=source,
            name="uploaded",
            preset="bpi2013",
            mapping=None,
        ).id
    with session_scope() as session:  # deactivated before a worker got to it
        session.merge(admin).active = False
    run_next(kinds=["log_import"])
    refused = _job(again)
    assert (refused.status, refused.attempts) == ("failed", 1)  # not retried
    assert "no longer active" in refused.error


def _harbor_folder(root, name="reset-password"):
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(f'[task]\nname = "itsm/{name}"\n')
    (folder / "instruction.md").write_text("Unlock the account of user U-1042.\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/sh\npytest /tests/test_state.py\n")
    return folder


def test_a_task_folder_given_on_one_replica_is_imported_by_a_worker(configured, tmp_path):
    """A Harbor task folder from the Imports page with ITSMREVIEW_JOBS=worker: every file goes
    to the storage, a worker imports the folder as the admin who asked, the upload is removed,
    and the same folder again changes nothing."""
    from itsmreview.accounts.service import create_user
    from itsmreview.catalog.queries import latest_version, task_by_external_id
    from itsmreview.storage import get_storage
    from itsmreview.worker import queue_task_import

    folder = _harbor_folder(tmp_path)
    with session_scope() as session:
        admin, _ = create_user(session=session, username="admin", role="admin", password="a" * 12)
        job_id = queue_task_import(
            session=session, actor=admin, source=folder, fmt="auto", log=None, task=None
        ).id
    upload = _job(job_id).payload["upload"]
    names = ("instruction.md", "task.toml", "tests/test.sh")
    assert get_storage().list(upload) == [f"{upload}/reset-password/{name}" for name in names]
    run_next(kinds=["task_import"])
    job = _job(job_id)
    assert job.status == "done", job.error
    assert job.result["format"] == "harbor"
    assert (job.result["created"], job.result["unchanged"]) == (1, 0)
    assert not get_storage().exists(upload)
    with session_scope() as session:
        task = task_by_external_id(session=session, external_id="itsm/reset-password")
        assert "U-1042" in latest_version(session=session, task_id=task.id).instruction

    with session_scope() as session:
        admin = session.merge(admin)
        again = queue_task_import(
            session=session, actor=admin, source=folder, fmt="auto", log=None, task=None
        ).id
    run_next(kinds=["task_import"])
    assert (_job(again).result["created"], _job(again).result["unchanged"]) == (0, 1)


def test_a_task_import_job_refuses_links_out_and_names_outside_its_folder(configured, tmp_path):
    """A folder with a link out of it is refused before anything is queued; a job whose file
    name leaves its folder fails at once, not retried."""
    from itsmreview.accounts.service import create_user
    from itsmreview.worker import queue_task_import

    folder = _harbor_folder(tmp_path)
    (folder / "tests" / "passwd").symlink_to("/etc/passwd")
    with session_scope() as session:
        admin, _ = create_user(session=session, username="admin", role="admin", password="a" * 12)
        with pytest.raises(InvalidInput, match="a link out of"):
            queue_task_import(
                session=session, actor=admin, source=folder, fmt="auto", log=None, task=None
            )
        payload = {"upload": "uploads/x", "filename": "../x", "fmt": "auto", "log": None}
        payload |= {"task": None, "actor_id": admin.id, "actor_epoch": admin.session_epoch or 0}
        job_id = enqueue(session=session, kind="task_import", payload=payload).id
    run_next(kinds=["task_import"])
    job = _job(job_id)
    assert (job.status, job.attempts) == ("failed", 1) and "file name" in job.error


def _gate_tests():
    return _load_test_module("test_gatework")


def _load_test_module(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def queued_gate(configured, monkeypatch):
    """Submits only queue their gate work (ITSMREVIEW_GATE_APPLY=queue, as with workers)."""
    monkeypatch.setenv("ITSMREVIEW_GATE_APPLY", "queue")
    get_settings.cache_clear()
    yield configured
    get_settings.cache_clear()


def _queued() -> int:
    from itsmreview.review.gate.work import pending

    with session_scope() as session:
        return pending(session=session)[0]


def test_a_waiting_worker_applies_a_queued_rating_at_once(queued_gate):
    """A submit wakes the workers (NOTIFY on PostgreSQL, where this worker would otherwise
    look only once a minute); the gate ends where a recomputation puts it."""
    from itsmreview.jobs.service import Worker
    from itsmreview.worker import apply_gate_queue

    gate = _gate_tests()
    postgres = not queued_gate.resolved_database_url().startswith("sqlite")
    with session_scope() as session:
        review_round, experts, _, assignments = gate.open_round(session, 4, 2)
    waiting = Worker(poll_s=60.0 if postgres else 0.1, between=apply_gate_queue)
    thread = threading.Thread(target=waiting.run)
    thread.start()
    try:
        time.sleep(0.5)
        with session_scope() as session:
            first = assignments[0]
            gate.rate(session, session.merge(experts[first.expert_id]), first.id, 4)
        started = time.monotonic()
        while _queued():
            assert time.monotonic() - started < 30, "the worker was not woken by the submit"
            time.sleep(0.05)
    finally:
        waiting.stop()
        with session_scope() as session:  # wake it so that it sees the stop
            service.wake_workers(session=session, kind="stop")
        thread.join(90)
    assert not thread.is_alive()
    with session_scope() as session:
        gate.assert_gate_as_recomputed(session, session.merge(review_round))


GATE_WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from itsmreview.review.gate import work
    from itsmreview.worker import worker

    original = work._apply

    def slow(session, review_round, decide=True):  # a batch long enough to be killed in
        decided = original(session, review_round, decide)
        Path(sys.argv[1]).write_text("applying")
        time.sleep(60)
        return decided

    work._apply = slow
    worker(poll_s=0.1).run()
    """
)


def test_a_worker_killed_mid_batch_loses_no_rating_and_applies_none_twice(queued_gate, tmp_path):
    """kill -9 while a worker applies a batch of queued ratings: its transaction never
    commits, so every rating is still queued; the next applier applies each exactly once."""
    from itsmreview.ledger.evidence.service import verify_ledger
    from itsmreview.review.gate.work import apply_pending

    gate = _gate_tests()
    with session_scope() as session:
        review_round, experts, _, assignments = gate.open_round(session, 4, 2)
        for n, assignment in enumerate(assignments[:6]):
            gate.rate(
                session, session.merge(experts[assignment.expert_id]), assignment.id, 3 + n % 3
            )
    assert _queued() == 6
    marker = tmp_path / "applying"
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    process = subprocess.Popen([sys.executable, "-c", GATE_WORKER, str(marker)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None, "the worker ended before it applied anything"
            assert time.monotonic() < deadline, "the worker never started a batch"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
    assert _queued() == 6  # the killed batch committed nothing
    assert apply_pending() == 6
    assert _queued() == 0
    with session_scope() as session:
        gate.assert_gate_as_recomputed(session, session.merge(review_round))
        assert verify_ledger(session=session).ok


def test_an_export_by_a_worker_is_offered_from_s3(s3_storage, reviewed):
    """With an S3 storage, the worker puts the export's zip there, so a replica on another
    host offers the same bytes for download."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.worker import export_zip, queue_export

    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        job_id = queue_export(
            session=session, actor=lead, name="to-s3", bootstrap=200, make_zip=True
        ).id
    run_next(kinds=["export"])
    job = _job(job_id)
    assert job.status == "done", job.error
    assert job.result["zip_key"] == "exports/to-s3.zip"
    assert s3_storage.location().startswith("s3://") and s3_storage.exists("exports/to-s3.zip")
    local = get_settings().data_dir / "exports" / "to-s3.zip"
    name, data = export_zip({"zip_key": job.result["zip_key"]})  # as another host reads it
    assert (name, data) == ("to-s3.zip", local.read_bytes())


def test_a_log_import_job_never_writes_outside_its_folder(configured, tmp_path):
    """The upload's file name in a job is checked again by the worker: `..` fails the job."""
    from itsmreview.accounts.service import create_user
    from itsmreview.storage import get_storage

    get_storage().write_bytes(b"case,activity\n", "uploads/x/log.csv")
    with session_scope() as session:
        admin, _ = create_user(session=session, username="admin", role="admin", password="a" * 12)
        payload = {"upload": "uploads/x/log.csv", "filename": "..", "name": None, "preset": None}
        payload |= {"actor_id": admin.id, "actor_epoch": admin.session_epoch or 0}
        job_id = enqueue(session=session, kind="log_import", payload=payload).id
    run_next(kinds=["log_import"])
    job = _job(job_id)
    assert (job.status, job.attempts) == ("failed", 1) and "file name" in job.error
