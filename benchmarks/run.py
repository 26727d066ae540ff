"""Import and coverage benchmarks: `make bench` (or `python benchmarks/run.py --help`).

Every contender runs in a fresh child process, so peak memory is its own. Prints medians
and ratios against baselines measured in the same run: bare `pandas.read_csv` of the same
file, and pm4py's `format_dataframe` + `get_variants`.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import peak_mb  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = Path(os.environ.get("ITSMREVIEW_TEST_DATA") or ROOT.parent / "shared" / "data")
BPI2013 = REAL_DATA / "logs" / "bpi2013_incidents.csv.gz"


def child(task: str, path: str, warm_up: bool = True) -> dict:
    """Run one contender once; returns seconds and memory figures. A first run on a small
    log loads what every contender loads lazily on first use (modules, kernels, thread
    pools), so the figures are those of the file, not of starting up."""
    import pandas as pd
    from itsmreview.coverage.eventlog import PRESETS, read_log
    from itsmreview.coverage.variants import materialise

    if task == "pm4py":
        import pm4py  # noqa: F401 - imported before the clock starts, like our own modules
    if warm_up:
        from itsmreview.coverage.synthetic import generate_log, write_csv

        with tempfile.TemporaryDirectory() as folder:
            small = write_csv(generate_log(200, seed=3), Path(folder) / "small.csv")
            child(task, str(small), warm_up=False)
    before = peak_mb()
    start = time.perf_counter()
    extra = {}
    if task == "read_csv":
        frame = pd.read_csv(path)
        extra["frame_mb"] = frame.memory_usage(deep=True).sum() / 2**20
    elif task == "materialise":
        events, _ = read_log(path, PRESETS["bpi2013"])
        m = materialise(events)
        extra["events_mb"] = events.memory_usage(deep=True).sum() / 2**20
        extra["variants"] = m.summary["variants"]
    elif task == "import":
        from itsmreview.coverage.service import import_log
        from itsmreview.db import create_db_engine, session_scope, upgrade_database

        with tempfile.TemporaryDirectory() as folder:
            engine = create_db_engine(f"sqlite:///{folder}/bench.db")
            upgrade_database(engine)
            _storage_in(folder)
            start = time.perf_counter()
            with session_scope(engine) as session:
                import_log(path, session=session, preset="bpi2013")
            elapsed = time.perf_counter() - start
            engine.dispose()
            return {"seconds": elapsed, "peak_mb": peak_mb(), "baseline_mb": before}
    elif task == "pm4py":
        frame = pd.read_csv(path, dtype={"SR Number": str})
        frame["Change Date+Time"] = pd.to_datetime(
            frame["Change Date+Time"], format="ISO8601", utc=True
        )
        frame = pm4py.format_dataframe(
            frame, case_id="SR Number", activity_key="Activity", timestamp_key="Change Date+Time"
        )
        extra["variants"] = len(pm4py.get_variants(frame))
    else:
        raise SystemExit(f"unknown task {task}")
    return {
        "seconds": time.perf_counter() - start,
        "peak_mb": peak_mb(),
        "baseline_mb": before,
        **extra,
    }


def run_child(task: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", task, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(task: str, path: Path, repeats: int) -> dict:
    runs = [run_child(task, path) for _ in range(repeats)]
    result = {
        k: statistics.median(r[k] for r in runs)
        for k in runs[0]
        if isinstance(runs[0][k], int | float)
    }
    result["all_seconds"] = [round(r["seconds"], 3) for r in runs]
    return result


def import_benchmark(label: str, path: Path, repeats: int, with_pm4py: bool) -> dict:
    print(
        f"\n== {label}: {path.name} ({path.stat().st_size / 2**20:,.0f} MiB), median of {repeats}"
    )
    results = {
        task: measure(task, path, repeats)
        for task in ("read_csv", "materialise", "import", *(("pm4py",) if with_pm4py else ()))
    }
    base = results["read_csv"]["seconds"]
    for task, r in results.items():
        line = f"  {task:<12} {r['seconds']:8.2f} s  {r['seconds'] / base:6.2f}x read_csv"
        if "pm4py" in results and task != "pm4py":
            line += f"  {results['pm4py']['seconds'] / r['seconds']:6.2f}x faster than pm4py"
        line += f"  peak {r['peak_mb']:,.0f} MiB"
        print(line)
    m = results["materialise"]
    work = m["peak_mb"] - m["baseline_mb"]
    print(
        f"  materialise: peak memory above the interpreter {work:,.0f} MiB = "
        f"{work / results['read_csv']['frame_mb']:.2f}x the read_csv dataframe "
        f"({results['read_csv']['frame_mb']:,.0f} MiB), "
        f"{work / m['events_mb']:.2f}x the canonical event table ({m['events_mb']:,.0f} MiB)"
    )
    return results


def coverage_benchmark(path: Path, tasks: int, repeats: int) -> dict:
    from itsmreview.coverage.eventlog import PRESETS, read_log
    from itsmreview.coverage.metrics import LogTables, TaskSource, compute_coverage
    from itsmreview.coverage.variants import materialise

    events, _ = read_log(path, PRESETS["bpi2013"])
    m = materialise(events)
    level = lambda name: m.variants[m.variants.level == name].reset_index(drop=True)  # noqa: E731
    tables = LogTables(
        level("raw"),
        level("collapsed"),
        m.df_pairs,
        m.activities,
        m.role_values,
        m.summary["cases"],
    )
    rng = random.Random(7)
    sequences = [tuple(s) for s in tables.raw["sequence"]]
    teams = m.role_values[m.role_values.attribute == m.role_values.attribute.iloc[0]]
    sources = [
        TaskSource(
            f"t{i}",
            [rng.choice(sequences)],
            {teams.attribute.iloc[0]: {rng.choice(list(teams.value))}},
        )
        for i in range(tasks)
    ]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        report = compute_coverage(tables, sources)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(
        f"\n== coverage of {tasks:,} tasks against {path.name}: median {median * 1000:.1f} ms "
        f"over {repeats} runs (target < 100 ms); variant coverage "
        f"{report.variant_coverage:.1%}"
    )
    return {"median_ms": median * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--events",
        type=int,
        default=5_000_000,
        help="events in the synthetic log (default 5,000,000)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per contender")
    parser.add_argument(
        "--no-pm4py-large",
        action="store_true",
        help="skip the pm4py path on the synthetic log (it is slow)",
    )
    parser.add_argument("--child", nargs=2, metavar=("TASK", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    from itsmreview.coverage.synthetic import generate_log, write_csv

    if BPI2013.is_file():
        import_benchmark("BPI Challenge 2013", BPI2013, args.repeats, True)
        coverage_benchmark(BPI2013, 10_000, 20)
    else:
        print(f"(skipping BPI 2013: {BPI2013} not found)")
    cache = ROOT / "benchmarks" / "results"
    cache.mkdir(parents=True, exist_ok=True)
    synthetic = cache / f"synthetic-{args.events}.csv"
    if not synthetic.exists():
        print(f"\ngenerating {args.events:,} synthetic events ...")
        write_csv(generate_log(events=args.events, seed=5), synthetic)
    import_benchmark(
        f"synthetic log, {args.events:,} events", synthetic, args.repeats, not args.no_pm4py_large
    )


if __name__ == "__main__":
    main()


def _storage_in(folder: str) -> None:
    """The log's files go to `folder` (the storage is a setting: ITSMREVIEW_STORAGE_URL)."""
    import os

    from itsmreview.settings import get_settings

    os.environ["ITSMREVIEW_STORAGE_URL"] = folder
    get_settings.cache_clear()
