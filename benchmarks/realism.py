"""Simulator realism: `python benchmarks/realism.py` (part of `make bench`).

Issue 36 asks for the report of 10,000 real cases and 1,000 transcripts in at most 5 s. The real
side is a 10,000-case synthetic log in BPI 2013's shape (and, when ../shared/data has it, the
real BPI 2013 log, 7,554 cases); the simulated side is the 100 real tau-bench airline
trajectories in ../shared/data mapped by the shipped `taubench-airline` spec, each ten times
(1,000 transcripts). Timed: mapping the 1,000 transcripts, and the comparison (every metric
with its intervals and floors, both distributions, and fitness: a model discovered with
pm4py's inductive miner, 1,000 real cases and every simulated one replayed on it). Baseline,
measured in the same run on the same real cases: the log's own behaviour profile (`realism
report --log`), which computes the real side's statistics once. Prints medians over --runs
and the ratio to the baseline.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import peak_mb  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = Path(os.environ.get("ITSMREVIEW_TEST_DATA") or ROOT.parent / "shared" / "data")
BPI2013 = REAL_DATA / "logs" / "bpi2013_incidents.csv.gz"
TAUBENCH = REAL_DATA / "transcripts" / "taubench_gpt4o_airline_even.json"
WAIT = ("Accepted-Wait - User",)
CANCEL = ("Completed-Cancelled",)


def _real_logs() -> dict:
    from itsmreview.coverage.eventlog import PRESETS, read_log
    from itsmreview.coverage.synthetic import generate_log

    rows = generate_log(10_000, seed=36)
    synthetic = rows.rename(
        columns={
            "SR Number": "case_id",
            "Activity": "activity",
            "Change Date+Time": "timestamp",
            "Involved ST": "group",
        }
    )[["case_id", "activity", "timestamp", "group"]]
    synthetic["timestamp"] = synthetic["timestamp"].map(str)
    logs = {"synthetic 10,000 cases": synthetic}
    if BPI2013.exists():
        events, _ = read_log(BPI2013, PRESETS["bpi2013"])
        logs["BPI 2013 (real)"] = events.rename(columns={"role:Involved ST": "group"})[
            ["case_id", "activity", "timestamp", "group"]
        ]
    return logs


def _transcripts(copies: int) -> list[list[dict]]:
    from itsmreview.catalog.formats.trajectories import read_taubench

    if not TAUBENCH.exists():
        raise SystemExit(f"{TAUBENCH}: the real tau-bench trajectories are needed")
    found = [t["messages"] for runs in read_taubench(TAUBENCH).values() for t in runs]
    return found * copies


def _simulated(messages: list[list[dict]]):
    import pandas as pd
    from itsmreview.realism.mapping import load_spec, map_messages

    spec = load_spec("taubench-airline")
    base, rows = pd.Timestamp("2000-01-01", tz="UTC"), []
    for case, one in enumerate(messages):
        for position, event in enumerate(map_messages(one, spec).events):
            rows.append(
                (
                    f"t{case}",
                    event["activity"],
                    base + pd.Timedelta(seconds=position),
                    event["group"],
                )
            )
    return pd.DataFrame(rows, columns=["case_id", "activity", "timestamp", "group"])


def _timed(function, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--copies", type=int, default=10, help="copies of the 100 transcripts")
    args = parser.parse_args()
    import pandas as pd
    from itsmreview.realism import metrics
    from itsmreview.realism.service import measure_simulated
    from itsmreview.realism.vocabulary import PRESET_VOCABULARIES

    vocab = PRESET_VOCABULARIES["bpi2013"]
    options = {"wait_user": vocab.wait_user, "cancel": vocab.cancel}
    messages = _transcripts(args.copies)
    map_s, simulated = _timed(lambda: _simulated(messages), args.runs)
    print(f"mapping {len(messages):,} transcripts: median {map_s * 1000:.0f} ms")
    for name, real in _real_logs().items():
        real = real.assign(timestamp=pd.to_datetime(real["timestamp"], utc=True, format="ISO8601"))
        measure_simulated(real.head(2000), simulated.head(500), vocab=vocab)  # warm-up
        base_s, _ = _timed(lambda real=real: metrics.profile(real, **options), args.runs)
        compare_s, report = _timed(
            lambda real=real: measure_simulated(real, simulated, vocab=vocab), args.runs
        )
        total = map_s + compare_s
        print(
            f"{name}: {report['real_cases']:,} real cases, {report['simulated_cases']:,} "
            f"simulated; log profile (baseline) {base_s:.2f} s, comparison {compare_s:.2f} s "
            f"(x{compare_s / base_s:.2f}); mapping + comparison {total:.2f} s "
            f"({'within' if total <= 5 else 'beyond'} the 5 s target); peak {peak_mb():.0f} MB"
        )


if __name__ == "__main__":
    main()
