"""Applying submitted ratings to the approval gate: the round's coincidence counts (the gate's
alpha) and the decision of each rated task.

A submit writes its rating and queues it (`gate_pending`) in its own transaction; applying
takes queued ratings, moves the round's counts by their tasks' changes and re-decides those
tasks (the whole round only when the move takes the round's alpha across the gate), then
deletes them from the queue, all in one transaction. Nothing is lost whoever applies, when:
a queued rating stays queued until a transaction that applied it commits.

Who applies (setting `gate_apply`):
- `inline`: the submit itself, for its task, in its own transaction;
- `background`: a thread of the submitting process, woken when a submit commits, in batches;
- `queue`: another process (`itsmreview round apply-queued --watch`).

Appliers of a round take turns on its gate lock; nothing else waits for it, and appliers
lock no task. A batch marks the queued rows it takes, then reads each of their tasks' counts
in one statement as if the other queued ratings had not come yet (a rating and its queued
row commit together, so that statement sees both or neither), then deletes what it marked.
"""

import logging
import threading

from itsmreview.db import get_engine, write_transaction
from itsmreview.jobs.service import wake_workers
from itsmreview.ledger.service import append_entry, chain_at_commit
from itsmreview.review.commitments import rating_digest
from itsmreview.review.gate import cache as gatecache
from itsmreview.review.gate.approval import Decision, weak_dimensions
from itsmreview.review.gate.concordance import spread_of_counts
from itsmreview.review.gate.queries import pending as pending_queries
from itsmreview.review.gate.queries import spreads as spread_queries
from itsmreview.review.gate.service import (
    decide_tasks,
    gate_config,
    recompute_statuses,
)
from itsmreview.review.models import ReviewRound
from itsmreview.review.rubrics.service import definition_by_id
from itsmreview.review.scorevector import pack
from itsmreview.settings import get_settings
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session

BATCH = 500  # queued ratings applied in one transaction at most
_QUEUED = "itsmreview.gate.queued"
log = logging.getLogger(__name__)


def queued_wake() -> str | None:
    """The kind of work a submit's write wakes `itsmreview worker`s for when it commits
    (`queries.write_submitted_rating`'s `wake`): the gate's, when workers apply it."""
    return "gate" if get_settings().gate_apply == "queue" else None


def rating_queued(
    *,
    session: Session,
    review_round: ReviewRound,
    task_version_id: int,
    apply: bool = True,
    woken: bool = False,
) -> Decision | None:
    """A submit has queued a rating of this task (`queries.write_submitted_rating`). With the
    `inline` setting and `apply`, apply the task's queued ratings at once, in this
    transaction, and return the task's decision; otherwise the rating waits for the
    background worker (woken when this transaction commits: by the write itself when
    `woken`, with `queued_wake()`) or another process."""
    if apply and get_settings().gate_apply == "inline":
        pending_queries.lock_gate(session=session, round_id=review_round.id)
        pending_queries.take_batch(
            session=session, round_id=review_round.id, task_version_id=task_version_id
        )
        return _apply(session, review_round).get(task_version_id)
    session.info.setdefault(_QUEUED, set()).add(review_round.id)
    if get_settings().gate_apply == "queue" and not woken:
        wake_workers(session=session, kind="gate")  # `itsmreview worker`s, when this commits
    return None


def apply_queued_here(*, session: Session, review_round: ReviewRound, decide: bool = True) -> int:
    """Apply every queued rating of the round in the caller's transaction (a loader that
    submitted with `recompute=False`); `decide` False moves the counts only (the caller
    re-decides the round). Returns how many were applied."""
    pending_queries.lock_gate(session=session, round_id=review_round.id)
    count = pending_queries.take_batch(session=session, round_id=review_round.id)
    _apply(session, review_round, decide=decide)
    return count


def _apply(session: Session, review_round: ReviewRound, decide: bool = True) -> dict[int, Decision]:
    """Apply the batch's queued ratings (`queries.take_batch`) and unqueue them."""
    rubric = definition_by_id(session=session, rubric_id=review_round.rubric_id)
    config = gate_config(review_round, rubric)
    tasks = pending_queries.pending_tasks(round_id=review_round.id, applying=True)
    batch = _hold_changed(session, review_round, rubric)
    for _, _, rating_id, entry in batch:  # the ratings' entries, in the order submitted
        if entry is not None:
            append_entry(session=session, **{"artifact_id": str(rating_id), **entry})
    actors = {task: actor for task, actor, _, _ in batch}  # each task's last rater
    last_actor = batch[-1][1] if batch else None
    changes = gatecache.queued_changes(session=session, round_id=review_round.id)
    was, alphas = gatecache.move(
        session=session,
        review_round=review_round,
        rubric=rubric,
        changes=list(changes.values()),
        dimensions=config.gating_dimensions,
    )
    _keep_blind_spreads(session, review_round.id, changes)
    decisions: dict[int, Decision] = {}
    # a task's decision reads the alpha of the gating dimensions its ratings have: any
    # dimension that turns weak or strong may change tasks anywhere in the round
    if decide and weak_dimensions(config, alphas) != weak_dimensions(config, was):
        decisions = recompute_statuses(
            session=session, round_name=review_round.id, actor_id=last_actor
        )
    elif decide:
        decisions = decide_tasks(
            session=session,
            review_round=review_round,
            config=config,
            alphas=alphas,
            counts={task: after for task, (_, after) in changes.items()},
            tasks=tasks,
            actors=actors,
        )
    pending_queries.delete_batch(session=session, round_id=review_round.id)
    return decisions


def _keep_blind_spreads(session: Session, round_id: int, changes: dict) -> None:
    """In a Delphi round's blind phase, each changed task's spread per item from its counts
    after the batch (the consensus' phase change counts them)."""
    if not changes or not spread_queries.collects_blind_spreads(session=session, round_id=round_id):
        return
    spreads = {
        (task, item): spread_of_counts(counts)
        for task, (_, after) in changes.items()
        for item, counts in after.items()
        if counts
    }
    spread_queries.replace_spreads(
        session=session, round_id=round_id, tasks=list(changes), spreads=spreads
    )


def _hold_changed(session: Session, review_round: ReviewRound, rubric) -> list[tuple]:
    """The batch's rows whose rating still is what its submit committed to (the queued
    entry's `content_sha256`, and packed scores equal to its score rows). A rating changed
    since is held: taken out of the batch, left queued with the reason, logged; it reaches
    neither the gate nor the ledger, and `ledger verify` names it."""
    batch = pending_queries.batch_rows(session=session, round_id=review_round.id)
    ratings, scores = pending_queries.ratings_with_scores(
        session=session, rating_ids=[row[2] for row in batch if row[3] is not None]
    )
    keys = [d.key for d in rubric.dimensions]
    held: dict[int, str] = {}
    for _, _, rating_id, entry in batch:
        if entry is None or rating_id not in ratings:
            continue
        rating, values = ratings[rating_id], scores.get(rating_id, {})
        committed = (entry.get("payload") or {}).get("content_sha256")
        if committed and rating_digest(rating, values) != committed:
            held[rating_id] = (
                f"rating {rating_id} changed after its submit: its content no longer matches "
                f"the content_sha256 {committed[:12]}... its queued ledger entry commits to"
            )
        elif rating.score_vector is not None and bytes(rating.score_vector) != pack(keys, values):
            held[rating_id] = (
                f"rating {rating_id} changed after its submit: its packed scores differ from "
                "its score rows"
            )
    if not held:
        return batch
    for reason in held.values():
        log.error("gate of round %s: %s; held in the queue, not applied", review_round.name, reason)
    pending_queries.hold_queued(session=session, round_id=review_round.id, reasons=held)
    return [row for row in batch if row[2] not in held]


def apply_batch(*, engine: Engine, round_id: int, limit: int = BATCH) -> int | None:
    """Apply the first `limit` queued ratings of a round in one transaction of its own.
    Returns how many were applied, or
    None when another applier holds the round (it looks for more once it lets go)."""

    def work(session: Session) -> int | None:
        if not pending_queries.lock_gate(session=session, round_id=round_id, wait=False):
            return None
        chain_at_commit(session)  # the ledger's lock at the commit only, not while deciding
        count = pending_queries.take_batch(session=session, round_id=round_id, limit=limit)
        if count:
            _apply(session, session.get(ReviewRound, round_id))
        return count

    return write_transaction(work, engine=engine)


def apply_pending(
    *, engine: Engine | None = None, round_id: int | None = None, limit: int = BATCH
) -> int:
    """Apply the queued ratings of every round (or one), batch after batch, until none is
    left or another applier holds the round. Returns how many this call applied."""
    engine = engine or get_engine()
    if round_id is None:
        with Session(engine) as session:
            rounds = pending_queries.pending_rounds(session=session)
    else:
        rounds = [round_id]
    applied = 0
    for each in rounds:
        while (count := apply_batch(engine=engine, round_id=each, limit=limit)) is not None:
            applied += count
            if count == 0:
                break
    return applied


def pending(*, session: Session, round_id: int | None = None) -> tuple[int, object]:
    """How many ratings wait for the gate (of a round, or all) and when the oldest was
    queued (None when none waits)."""
    return pending_queries.pending_summary(session=session, round_id=round_id)


class GateWorker:
    """A daemon thread that applies queued ratings: at once when woken (`wake`, after a
    submit of this process commits), and every `poll_s` seconds for those other processes
    queued. An error is logged and the work retried at the next wake or poll: the queue
    keeps it."""

    def __init__(self, url: str, poll_s: float):
        self.url = url
        self.poll_s = poll_s
        self._wake = threading.Event()
        self._wake.set()  # a first pass at once: what is queued already
        self._idle = threading.Event()
        self._stopping = False
        self.applied = 0  # ratings this worker applied
        self._thread = threading.Thread(target=self._run, name="itsmreview-gate", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._idle.clear()
        self._wake.set()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the worker has applied what it was woken for; False on timeout."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Apply what is queued, then end the thread."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.poll_s)
            self._wake.clear()
            stopping = self._stopping
            try:
                self.applied += apply_pending(engine=get_engine(self.url))
            except Exception:  # noqa: BLE001 - the queue keeps the work; the log says why
                log.exception("applying queued ratings to the gate failed; retried later")
            if stopping:
                return
            if not self._wake.is_set():
                self._idle.set()


_workers: dict[str, GateWorker] = {}
_workers_lock = threading.Lock()


def _key(url: str | None) -> str:
    """One spelling of a database URL (the configured one by default): one worker each."""
    url = url or get_settings().resolved_database_url()
    return make_url(url).render_as_string(hide_password=False)


def worker(url: str | None = None) -> GateWorker:
    """This process's gate worker for a database (started on first use)."""
    key = _key(url)
    with _workers_lock:
        if key not in _workers:
            _workers[key] = GateWorker(key, get_settings().gate_poll_s)
        return _workers[key]


def start_worker_if_background() -> GateWorker | None:
    """With the `background` setting, this process's gate worker, started now if it is not
    running: it applies at once what is queued (by a server that stopped, or processes in the
    `queue` mode), then looks every `gate_poll_s` seconds and whenever a submit commits."""
    if get_settings().gate_apply != "background":
        return None
    return worker()


def stop_worker(url: str) -> None:
    """Stop this process's gate worker for a database, if it runs, once it has applied what
    is queued."""
    with _workers_lock:
        running = _workers.pop(_key(url), None)
    if running is not None:
        running.stop()


@event.listens_for(OrmSession, "after_commit")
def _wake_worker(session: OrmSession) -> None:
    if session.info.pop(_QUEUED, None) and get_settings().gate_apply == "background":
        worker(session.get_bind().url.render_as_string(hide_password=False)).wake()


@event.listens_for(OrmSession, "after_rollback")
def _forget_queued(session: OrmSession) -> None:
    session.info.pop(_QUEUED, None)
