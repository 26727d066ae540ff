"""Model rater: `python benchmarks/model_rater.py` (one command).

A model review of a 1,000-task round (built as benchmarks/scale.py builds it, SQLite) against
the real `anthropic` SDK over a replayed Messages API that answers after a realistic latency,
with the concurrency of ITSMREVIEW_MODEL_CONCURRENCY:

1. baseline: the same number of requests through the SDK and the same transport with the
   same concurrency, nothing stored (what the API and the SDK alone allow);
2. the review is killed (SIGKILL) part way, then run again: it must finish without a second
   request for any task that was rated before the kill;
3. throughput of the review against the baseline (ratio), and the cost estimate shown before
   the start against the tokens the answers reported.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from measure import peak_mb  # noqa: E402


def _responder(latency_s: float, log: Path | None):
    """A rating answer whose token counts follow the request's size; each request's task is
    appended to `log` as it arrives (before the answer), so a kill loses none."""
    import random

    from anthropic_replay import message, task_of, tool_use
    from itsmreview.review.rubrics.service import load_rubric

    rubric = load_rubric()
    rng = random.Random(7)
    handle = open(log, "a", buffering=1) if log else None  # noqa: SIM115 - kept open

    def respond(body: dict) -> dict:
        if handle:
            handle.write((task_of(body) or "?") + "\n")
        scores = {d.key: rng.randint(2, 5) for d in rubric.dimensions}
        answer = {
            **scores,
            "verdict": "accept",
            "flags": [],
            "confidence": 4,
            "rationale": "Follows the variant; the hand-over matches the log.",
        }
        size = len(json.dumps(body))
        return message(
            [tool_use("record_rating", answer)], input_tokens=size // 4, output_tokens=180
        )

    return respond


def _api(latency_s: float, log: Path | None):
    from anthropic_replay import ReplayAPI
    from itsmreview.review.assist import client as model_client

    api = ReplayAPI(_responder(latency_s, log), latency_s=latency_s)
    model_client.http_client_factory = api.client
    return api


def worker(latency_s: float, log: Path) -> None:
    """One run of the review, in this process (killed by the parent in phase 2)."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.assist.rater import run_model_review, start_model_review

    _api(latency_s, log)
    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        run = start_model_review(session=session, actor=lead, round_name=None)
    started = time.perf_counter()
    run = run_model_review(run.id)
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "rated": run.rated,
                "skipped": run.skipped,
                "failed": run.failed,
                "seconds": seconds,
                "cost_usd": run.cost_usd,
                "input_tokens": run.input_tokens,
                "status": str(run.status),
                "peak_mb": peak_mb(),
            }
        )
    )


def baseline(requests: int, latency_s: float, concurrency: int) -> float:
    """Seconds for `requests` rating-sized requests through the SDK and the replayed API."""
    from itsmreview.review.assist import client as model_client

    api = _api(latency_s, None)
    client = model_client.make_client()
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "<task_material>\n# Task t-1 (version 1)"}],
    }
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda _: client.messages.create(**body), range(requests)))
    assert len(api.requests) == requests
    return time.perf_counter() - started


def _model_ratings(url: str) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as connection:
        count = connection.execute(
            text("SELECT count(*) FROM ratings WHERE rater_kind = 'model'")
        ).scalar_one()
    engine.dispose()
    return int(count)


def _rated_tasks(url: str) -> set[str]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT t.external_id FROM ratings r JOIN task_versions v ON v.id = "
                "r.task_version_id JOIN tasks t ON t.id = v.task_id WHERE r.rater_kind = 'model'"
            )
        ).all()
    engine.dispose()
    return {r[0] for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per answer")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--kill-at", type=float, default=0.4, help="share rated before the kill")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(float(args.worker[0]), Path(args.worker[1]))
        return
    folder = Path(tempfile.mkdtemp(prefix="itsmreview-model-bench-"))
    url = f"sqlite:///{folder / 'bench.db'}"
    env = dict(
        os.environ,
        ITSMREVIEW_DATABASE_URL=url,
        ITSMREVIEW_DATA_DIR=str(folder / "data"),
        ITSMREVIEW_MODEL_CONCURRENCY=str(args.concurrency),
        ANTHROPIC_API_KEY="sk-ant-benchmark-not-a-key",
    )
    os.environ.update(env)
    import scale

    print(f"building {args.tasks:,} tasks in {folder} ...", flush=True)
    scale.build(url, args.tasks, folder)

    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.assist.rater import plan_model_review

    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        plan = plan_model_review(session=session, actor=lead, round_name=None)
    print(
        f"plan: {len(plan.to_rate):,} tasks, estimated {plan.estimated_input_tokens:,} input "
        f"tokens, ${plan.estimated_cost_usd:,.2f}",
        flush=True,
    )

    base = [baseline(200, args.latency, args.concurrency) for _ in range(3)]
    base_rate = 200 / statistics.median(base)

    log = folder / "requests.log"
    command = [sys.executable, __file__, "--worker", str(args.latency), str(log)]
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE)
    target = int(args.tasks * args.kill_at)
    while _model_ratings(url) < target and first.poll() is None:
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    rated_before_kill = _rated_tasks(url)
    asked_before_kill = log.read_text().split()
    second = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result = json.loads(second.stdout.strip().splitlines()[-1])
    asked_after = log.read_text().split()[len(asked_before_kill) :]
    asked_again = sorted(set(asked_after) & rated_before_kill)
    in_flight = len(set(asked_before_kill) - rated_before_kill)
    rate = result["rated"] / result["seconds"]
    print()
    print(
        f"| model review of {args.tasks:,} tasks, latency {args.latency:g} s, concurrency "
        f"{args.concurrency} | value |"
    )
    print("|---|---|")
    print(
        f"| baseline: SDK + transport alone, 200 requests (median of 3) | "
        f"{base_rate:.2f} requests/s (spread {min(base):.1f}-{max(base):.1f} s) |"
    )
    print(f"| ideal: concurrency / latency | {args.concurrency / args.latency:.2f} requests/s |")
    print(
        f"| resumed review | {rate:.2f} ratings/s, {result['rated']:,} rated in "
        f"{result['seconds']:.1f} s, ratio to baseline {rate / base_rate:.2f} |"
    )
    print(f"| killed at | {len(rated_before_kill):,} rated, {in_flight} in flight (lost) |")
    print(f"| resume skipped | {result['skipped']:,} (rated before the kill) |")
    print(f"| second requests for a task rated before the kill | {len(asked_again)} |")
    total = len(rated_before_kill) + result["rated"]
    print(f"| rated in all | {total:,} of {args.tasks:,}, failed {result['failed']} |")
    actual = result["cost_usd"]
    print(
        f"| cost: estimated before the start / reported by the answers of the resumed run | "
        f"${plan.estimated_cost_usd:,.2f} / ${actual:,.2f} for {result['rated']:,} tasks "
        f"(estimate per task {plan.estimated_cost_usd / len(plan.to_rate):.4f}, actual "
        f"{actual / max(result['rated'], 1):.4f}) |"
    )
    print(f"| peak memory of the resumed run | {result['peak_mb']:.0f} MB |")
    if asked_again or total != args.tasks:
        raise SystemExit("FAILED: a rated task was asked again, or tasks are missing")


if __name__ == "__main__":
    main()
