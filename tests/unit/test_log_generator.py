"""benchmarks/logs.py's generator: the shape issue 34 asks of the benchmark's log (power-law
variants, 20-200 assignment groups, ping-pong and waits for the user, a long tail of rare
activities), streamed, and read by the `bpi2013` preset."""

import importlib.util
import sys
from pathlib import Path

import pandas as pd

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _generator():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("bench_logs", BENCHMARKS / "logs.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_the_generated_log_has_a_service_desks_shape(tmp_path):
    from itsmreview.coverage.eventlog import PRESETS, read_log
    from itsmreview.coverage.variants import materialise

    path = tmp_path / "log.csv"
    made = _generator().write_log(path, 150_000, seed=3)
    assert made["events"] >= 150_000
    events, _ = read_log(path, PRESETS["bpi2013"])
    assert len(events) == made["events"] and events.case_id.nunique() == made["cases"]
    variants = materialise(events).variants
    raw = variants[variants.level == "raw"].sort_values("rank")
    shares = raw.case_count.to_numpy() / raw.case_count.sum()
    assert shares[:10].sum() > 0.3  # a few variants hold much of the log ...
    assert (raw.case_count == 1).sum() > 0.3 * len(raw)  # ... and a long tail one case each
    frame = pd.read_csv(path, dtype=str)
    assert 20 <= frame["Involved ST"].nunique() <= 200
    rare = frame["Sub Status"].str.startswith("Rare step")
    assert 0 < rare.mean() < 0.05 and frame.loc[rare, "Sub Status"].nunique() > 50
    per_case = frame.groupby("SR Number", sort=False)
    waits = per_case["Sub Status"].apply(lambda s: (s == "Wait - User").sum())
    assert (waits >= 2).any()  # a wait for the user more than once in a case
    handovers = per_case["Involved ST"].apply(
        lambda s: [g for i, g in enumerate(s) if i == 0 or s.iloc[i - 1] != g]
    )
    ping_pong = handovers.map(
        lambda g: any(a == c != b for a, b, c in zip(g, g[1:], g[2:], strict=False))
    )
    assert ping_pong.any()  # a case handed to another group and back


def test_the_same_seed_writes_the_same_log(tmp_path):
    generate = _generator().write_log
    generate(tmp_path / "a.csv", 20_000, seed=5)
    generate(tmp_path / "b.csv", 20_000, seed=5)
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
