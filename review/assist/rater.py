"""The model rater: Claude rates a round's tasks on the round's rubric from the material an
expert sees, through a forced tool call. Its ratings are ratings of a model rater (a user of
role `model`, one per model and prompt version): never among the k human ratings, never in the
human alpha or the gate. A run resumes by running again: a task its rater has rated is never
sent twice."""

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import timedelta

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.db import session_scope, utcnow, write_transaction
from itsmreview.errors import Conflict, InvalidInput
from itsmreview.ledger.chain import canonical_json
from itsmreview.ledger.service import append_entry
from itsmreview.processes import process_alive, this_process
from itsmreview.review.assist import client as model_client
from itsmreview.review.assist import queries
from itsmreview.review.assist.material import estimated_tokens, task_material
from itsmreview.review.assist.models import ModelRequest, ModelRun, ModelRunStatus, RequestOutcome
from itsmreview.review.assist.rating import (
    ModelJudgement,
    UnusableAnswer,
    parse_rating,
    rate_prompt_sha256,
    rating_request,
)
from itsmreview.review.commitments import rating_digest
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.gate.round_data import find_round
from itsmreview.review.models import (
    Assignment,
    AssignmentStatus,
    Rating,
    RatingScore,
    RatingStatus,
    ReviewRound,
    RoundStatus,
    Rubric,
    Verdict,
)
from itsmreview.review.ratings import queries as rating_queries
from itsmreview.review.ratings.service import applicable_scores
from itsmreview.review.rounds import queries as review_queries
from itsmreview.review.rubrics.service import RubricDefinition
from itsmreview.review.scorevector import pack
from itsmreview.settings import get_settings
from sqlmodel import Session

ESTIMATE_SAMPLE = 10  # tasks whose material is laid out for the cost estimate
ESTIMATED_OUTPUT_TOKENS = 350  # a rating tool call of a seven-dimension rubric
STALE_AFTER = timedelta(minutes=3)  # a running run silent this long has lost its process
HEARTBEAT_SECONDS = 30  # a run waiting on slow answers still says it is alive this often
ERRORS_IN_A_ROW = 3  # API errors after retries that stop a run
FATAL_STATUS = {401, 403, 404}  # key, permission or model wrong: no other task can fare better

Progress = Callable[[str, float], None]


def rater_username(model: str, prompt_sha256: str) -> str:
    return f"model:{model[:48]}@{prompt_sha256[:8]}"


def model_rater(*, session: Session, model: str, prompt_sha256: str) -> User:
    """The user that holds a model's ratings under one prompt version (made on first use; it
    cannot log in)."""
    username = rater_username(model, prompt_sha256)
    found = queries.user_by_username(session=session, username=username)
    if found is not None:
        return found
    user = User(
        username=username,
        display_name=f"{model} (prompt {prompt_sha256[:8]})",
        role=Role.model,
        password_hash="!",  # no argon2 hash: no password ever verifies
        active=False,
        expertise=[],
    )
    session.add(user)
    session.flush()
    return user


@dataclass
class ReviewPlan:
    """What a model review of a round would do, before anything is sent."""

    round_name: str
    model: str
    prompt_sha256: str
    rater: str
    round_tasks: int
    already_rated: int
    to_rate: list[int]
    estimated_input_tokens: int
    estimated_output_tokens: int
    estimated_cost_usd: float | None
    sample_request: dict | None = None  # the first request, as it would be sent
    price: tuple[float, float] | None = None

    def as_dict(self) -> dict:
        return {
            "round": self.round_name,
            "model": self.model,
            "prompt_sha256": self.prompt_sha256,
            "rater": self.rater,
            "round_tasks": self.round_tasks,
            "already_rated": self.already_rated,
            "to_rate": len(self.to_rate),
            "estimated_input_tokens": self.estimated_input_tokens,
            "estimated_output_tokens": self.estimated_output_tokens,
            "estimated_cost_usd": self.estimated_cost_usd,
        }


def _rubric_of(session: Session, review_round: ReviewRound) -> RubricDefinition:
    return RubricDefinition.model_validate(session.get(Rubric, review_round.rubric_id).definition)


def plan_model_review(
    *,
    session: Session,
    actor: User,
    round_name: str | int | None,
    model: str | None = None,
    limit: int | None = None,
) -> ReviewPlan:
    """The tasks a model review would rate (the round's, most valuable first, less those this
    model and prompt rated already, at most `limit`), the request of the first, and the
    estimated tokens and cost (from the material of up to ESTIMATE_SAMPLE tasks). Sends
    nothing. Leads only."""
    require_role(actor, Role.lead)
    if limit is not None and limit < 1:
        raise InvalidInput(f"--limit must be at least 1, got {limit}")
    settings = get_settings()
    model = (model or settings.model).strip()
    if not model:
        raise InvalidInput("give a model name, e.g. claude-sonnet-4-5")
    review_round = find_round(session, round_name)
    rubric = _rubric_of(session, review_round)
    prompt = rate_prompt_sha256()
    username = rater_username(model, prompt)
    rater = queries.user_by_username(session=session, username=username)
    every = review_queries.round_task_ids(session=session, round_id=review_round.id)
    done = (
        queries.rated_by(session=session, round_id=review_round.id, rater_id=rater.id)
        if rater
        else set()
    )
    to_rate = [v for v in every if v not in done]
    if limit is not None:
        to_rate = to_rate[:limit]
    sample_request, sizes = None, []
    for version_id in to_rate[:ESTIMATE_SAMPLE]:
        request = rating_request(
            model=model,
            rubric=rubric,
            material=task_material(session=session, task_version_id=version_id),
            max_tokens=settings.model_max_tokens,
        )
        sample_request = sample_request or request
        sizes.append(estimated_tokens(canonical_json(request)))
    per_task = sum(sizes) / len(sizes) if sizes else 0
    input_tokens = round(per_task * len(to_rate))
    output_tokens = ESTIMATED_OUTPUT_TOKENS * len(to_rate)
    return ReviewPlan(
        round_name=review_round.name,
        model=model,
        prompt_sha256=prompt,
        rater=username,
        round_tasks=len(every),
        already_rated=len(done),
        to_rate=to_rate,
        estimated_input_tokens=input_tokens,
        estimated_output_tokens=output_tokens,
        estimated_cost_usd=model_client.cost_of(model, input_tokens, output_tokens),
        sample_request=sample_request,
        price=model_client.price_of(model),
    )


def start_model_review(
    *,
    session: Session,
    actor: User,
    round_name: str | int | None,
    model: str | None = None,
    limit: int | None = None,
) -> ModelRun:
    """Open a run of the model rater over a round (run it with `run_model_review`). Raises
    NotConfigured without an API key, Conflict while another run of the same rater on the
    round is alive. Leads only."""
    require_role(actor, Role.lead)
    if not model_client.configured():
        raise model_client.NotConfigured(model_client.HOW_TO_ENABLE)
    plan = plan_model_review(
        session=session, actor=actor, round_name=round_name, model=model, limit=limit
    )
    review_round = find_round(session, round_name)
    rater = model_rater(session=session, model=plan.model, prompt_sha256=plan.prompt_sha256)
    alive = queries.running_run(session=session, round_id=review_round.id, rater_id=rater.id)
    if alive is not None:
        beat = alive.heartbeat_at or alive.created_at
        if not is_stale(alive):
            raise Conflict(
                f"model review {alive.id} of {plan.model} on round {review_round.name!r} is "
                f"running (last answer at {beat:%H:%M:%S} UTC); cancel it or wait for it"
            )
        alive.status = ModelRunStatus.failed
        alive.error = "interrupted: its process ended; a new run took over its remaining tasks"
        alive.finished_at = utcnow()
    run = ModelRun(
        round_id=review_round.id,
        rater_id=rater.id,
        model=plan.model,
        prompt_sha256=plan.prompt_sha256,
        task_limit=limit,
        planned=len(plan.to_rate),
        skipped=plan.already_rated,
        estimated_cost_usd=plan.estimated_cost_usd,
        cost_usd=0.0 if plan.price else None,
        started_by_id=actor.id,
        heartbeat_at=utcnow(),
    )
    session.add(run)
    session.flush()
    return run


def cancel_model_review(*, session: Session, actor: User, run_id: int) -> ModelRun:
    """Ask a running model review to stop: requests in flight finish and are kept, no new
    one is sent. A run whose process ended is marked cancelled at once. Leads only."""
    require_role(actor, Role.lead)
    run = queries.run_for_update(session=session, run_id=run_id)
    if run is None:
        raise InvalidInput(f"no model review {run_id}")
    if run.status != ModelRunStatus.running:
        raise Conflict(f"model review {run_id} is {run.status} already")
    run.cancel_requested = True
    if is_stale(run):
        run.status = ModelRunStatus.cancelled
        run.finished_at = utcnow()
    session.add(run)
    session.flush()
    return run


@dataclass
class _Answer:
    version_id: int
    message: object = None
    error: Exception | None = None
    seconds: float = 0.0


def _ask(client, version_id: int, build: Callable[[str], dict]) -> _Answer:
    """Lay out the task's material (in this worker thread: reading a variant's cases takes a
    while) and send its request."""
    with session_scope() as reading:
        material = task_material(session=reading, task_version_id=version_id)
    request = build(material)
    started = time.perf_counter()
    try:
        message = client.messages.create(**request)
        return _Answer(version_id, message=message, seconds=time.perf_counter() - started)
    except Exception as exc:  # recorded as the task's failure; the run goes on or stops
        return _Answer(version_id, error=exc, seconds=time.perf_counter() - started)


def _error_reason(exc: Exception) -> tuple[str, bool]:
    """(what went wrong, in one line; whether no other task can fare better)."""
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        detail = exc.message
        if status in FATAL_STATUS:
            return f"HTTP {status} from {model_client.endpoint()}: {detail}", True
        return f"HTTP {status} after the SDK's retries: {detail}", False
    if isinstance(exc, anthropic.APIConnectionError):
        return f"no answer from {model_client.endpoint()} after the SDK's retries: {exc}", False
    return f"{type(exc).__name__}: {exc}", False


def _store_rating(
    session: Session,
    *,
    run: ModelRun,
    review_round: ReviewRound,
    version_id: int,
    judgement: ModelJudgement,
    dimension_keys: list[str],
) -> Rating:
    now = utcnow()
    assignment = Assignment(
        round_id=review_round.id,
        task_version_id=version_id,
        expert_id=run.rater_id,
        status=AssignmentStatus.model,
        submitted_at=now,
    )
    session.add(assignment)
    session.flush()
    rating = Rating(
        assignment_id=assignment.id,
        round_id=review_round.id,
        task_version_id=version_id,
        expert_id=run.rater_id,
        rubric_id=review_round.rubric_id,
        revision=1,
        is_current=True,
        status=RatingStatus.submitted,
        verdict=Verdict(judgement.verdict),
        flags=judgement.flags,
        comment=judgement.rationale,
        confidence=judgement.confidence,
        rater_kind="model",
        created_at=now,
        submitted_at=now,
        score_vector=pack(dimension_keys, judgement.scores),
    )
    session.add(rating)
    session.flush()
    for key, value in judgement.scores.items():
        session.add(RatingScore(rating_id=rating.id, dimension=key, value=value))
    append_entry(
        session=session,
        artifact_type="rating",
        artifact_id=str(rating.id),
        action="model-rate",
        source_kind="system",
        actor_id=run.started_by_id,
        payload={
            "task_version_id": version_id,
            "round": review_round.name,
            "revision": 1,
            "content_sha256": rating_digest(rating, judgement.scores),
            "generated_by": {
                "model": run.model,
                "prompt_sha256": run.prompt_sha256,
                "model_review": run.id,
            },
        },
    )
    return rating


def _record(
    answer: _Answer, *, run_id: int, rubric: RubricDefinition, round_id: int
) -> tuple[RequestOutcome, str, bool]:
    """Store one answer (the rating, or why there is none) and the run's counts, in one
    transaction. Returns (outcome, reason, whether the run must stop)."""

    def work(session: Session):
        run = queries.run_for_update(session=session, run_id=run_id)
        review_round = session.get(ReviewRound, round_id)
        fatal = False
        request = ModelRequest(
            run_id=run_id, task_version_id=answer.version_id, seconds=answer.seconds
        )
        if answer.error is not None:
            request.outcome = RequestOutcome.error
            request.reason, fatal = _error_reason(answer.error)
        else:
            message = answer.message
            usage = getattr(message, "usage", None)
            request.input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
            request.output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
            request.stop_reason = getattr(message, "stop_reason", None)
            request.request_id = getattr(message, "_request_id", None) or getattr(
                message, "id", None
            )
            request.cost_usd = model_client.cost_of(
                run.model, request.input_tokens, request.output_tokens
            )
            try:
                judgement = parse_rating(message, rubric)
                if rubric.conditional:  # what does not apply to the task stays empty
                    has_variant = rating_queries.declares_variant(
                        session=session, task_version_id=answer.version_id
                    )
                    judgement.scores = applicable_scores(
                        rubric, judgement.scores, has_source_variant=has_variant
                    )
                if queries.has_rated(
                    session=session,
                    round_id=round_id,
                    rater_id=run.rater_id,
                    task_version_id=answer.version_id,
                ):
                    raise UnusableAnswer(RequestOutcome.malformed, "rated already by this rater")
                rating = _store_rating(
                    session,
                    run=run,
                    review_round=review_round,
                    version_id=answer.version_id,
                    judgement=judgement,
                    dimension_keys=[d.key for d in rubric.dimensions],
                )
                request.outcome, request.rating_id = RequestOutcome.rated, rating.id
            except UnusableAnswer as exc:
                request.outcome, request.reason = exc.outcome, exc.reason
        session.add(request)
        if request.outcome == RequestOutcome.rated:
            run.rated += 1
        else:
            run.failed += 1
        run.input_tokens += request.input_tokens
        run.output_tokens += request.output_tokens
        if run.cost_usd is not None and request.cost_usd is not None:
            run.cost_usd = round(run.cost_usd + request.cost_usd, 6)
        run.heartbeat_at = utcnow()
        session.add(run)
        return request.outcome, request.reason, fatal

    return write_transaction(work)


def _finish(run_id: int, status: ModelRunStatus, error: str = "") -> ModelRun:
    def work(session: Session) -> ModelRun:
        run = queries.run_for_update(session=session, run_id=run_id)
        if run.status == ModelRunStatus.running:
            run.status = status
            run.error = error
            run.finished_at = utcnow()
            session.add(run)
        return run

    return write_transaction(work)


def run_model_review(
    run_id: int,
    *,
    client=None,
    concurrency: int | None = None,
    progress: Progress | None = None,
) -> ModelRun:
    """Send the run's tasks to the model, at most `concurrency` requests in flight, and store
    each answer as it arrives (committed one by one: a killed run loses at most the answers in
    flight). Stops when every task is done, when cancelled, on an error no task can escape (a
    wrong key or model) or after ERRORS_IN_A_ROW errors in a row."""
    settings = get_settings()
    concurrency = concurrency or settings.model_concurrency
    client = client or model_client.make_client(settings)
    round_id, model, rubric, todo = _take_run(run_id)
    total = len(todo)
    upcoming = iter(todo)
    pending: dict[Future, int] = {}
    errors_in_a_row, stop, handled = 0, "", 0

    def build(material: str) -> dict:
        return rating_request(
            model=model, rubric=rubric, material=material, max_tokens=settings.model_max_tokens
        )

    def submit_more(pool: ThreadPoolExecutor) -> None:
        while len(pending) < concurrency:
            version_id = next(upcoming, None)
            if version_id is None:
                return
            pending[pool.submit(_ask, client, version_id, build)] = version_id

    if progress:
        progress(f"0 of {total} tasks", 0.0 if total else 1.0)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"model-run-{run_id}")
    cancelled = False
    try:
        submit_more(pool)
        while pending:
            finished, _ = wait(pending, timeout=HEARTBEAT_SECONDS, return_when=FIRST_COMPLETED)
            if not finished:
                _beat(run_id)  # slow answers: the run is alive all the same
            for future in finished:
                pending.pop(future)
                outcome, reason, fatal = _record(
                    future.result(), run_id=run_id, rubric=rubric, round_id=round_id
                )
                handled += 1
                errors_in_a_row = errors_in_a_row + 1 if outcome == RequestOutcome.error else 0
                if fatal:
                    stop = f"stopped: {reason}"
                elif errors_in_a_row >= ERRORS_IN_A_ROW:
                    stop = f"stopped after {errors_in_a_row} errors in a row; last: {reason}"
            if progress and finished:
                progress(f"{handled} of {total} tasks", handled / total if total else 1.0)
            with session_scope() as reading:
                cancelled = queries.cancel_requested(session=reading, run_id=run_id)
            if not stop and not cancelled:
                submit_more(pool)
        if stop:
            return _finish(run_id, ModelRunStatus.failed, stop)
        return _finish(run_id, ModelRunStatus.cancelled if cancelled else ModelRunStatus.finished)
    except KeyboardInterrupt:
        for future in pending:
            future.cancel()
        _finish(run_id, ModelRunStatus.cancelled, "interrupted from the keyboard")
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _take_run(run_id: int) -> tuple[int, str, RubricDefinition, list[int]]:
    """Take a running run over in this process (a run a dead process left is resumed): its
    round, model and rubric, and the tasks it has still to rate, within its limit."""
    with session_scope() as session:
        run = queries.run_for_update(session=session, run_id=run_id)
        if run.status != ModelRunStatus.running:
            raise Conflict(f"model review {run_id} is {run.status}; start a new one")
        run.owner, run.heartbeat_at = this_process(), utcnow()
        session.add(run)
        review_round = session.get(ReviewRound, run.round_id)
        rubric = _rubric_of(session, review_round)
        done = queries.rated_by(session=session, round_id=run.round_id, rater_id=run.rater_id)
        todo = [
            v
            for v in review_queries.round_task_ids(session=session, round_id=run.round_id)
            if v not in done
        ]
        if run.task_limit is not None:
            todo = todo[: max(0, run.task_limit - run.rated)]
        return run.round_id, run.model, rubric, todo


def _beat(run_id: int) -> None:
    def work(session: Session) -> None:
        run = queries.run_for_update(session=session, run_id=run_id)
        run.heartbeat_at = utcnow()
        session.add(run)

    write_transaction(work)


@dataclass
class _Background:
    threads: dict[int, threading.Thread] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_BACKGROUND = _Background()


def run_in_background(run_id: int) -> bool:
    """Run a model review in a thread of this process (the app's): the page shows its
    progress from the database. False when it runs here already."""
    with _BACKGROUND.lock:
        alive = _BACKGROUND.threads.get(run_id)
        if alive is not None and alive.is_alive():
            return False

        def target() -> None:
            try:
                run_model_review(run_id)
            except Exception as exc:  # the page shows it as the run's error
                _finish(run_id, ModelRunStatus.failed, f"{type(exc).__name__}: {exc}")

        thread = threading.Thread(target=target, name=f"model-review-{run_id}", daemon=True)
        _BACKGROUND.threads[run_id] = thread
        thread.start()
        return True


def is_stale(run: ModelRun) -> bool:
    """A running run whose process has ended: known at once on this host, else when it has
    not said it is alive for STALE_AFTER."""
    if run.status != ModelRunStatus.running:
        return False
    alive = process_alive(run.owner) if run.owner else None
    if alive is not None:
        return not alive
    return utcnow() - (run.heartbeat_at or run.created_at) >= STALE_AFTER


def model_runs(
    *, session: Session, actor: User, round_name: str | int | None, newest: int = 5
) -> list[dict]:
    """The round's `newest` model reviews, newest first, each with its tasks left without a
    rating (task, outcome, reason, when). Leads only."""
    require_role(actor, Role.lead)
    review_round = find_round(session, round_name)
    return [
        {"run": run, "failures": queries.failed_requests_frame(session=session, run_id=run.id)}
        for run in queries.runs_of_round(session=session, round_id=review_round.id, limit=newest)
    ]


def review_rounds(*, session: Session, actor: User) -> list[str]:
    """Names of the rounds a model review can rate, open ones first, newest first. Leads
    only."""
    require_role(actor, Role.lead)
    newest_first = list(reversed(gate_queries.list_rounds(session=session)))
    return [r.name for r in sorted(newest_first, key=lambda r: r.status != RoundStatus.open)]
