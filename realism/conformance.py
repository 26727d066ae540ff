"""Conformance of cases to a process model discovered from the real log (issue 36): the
inductive miner (pm4py, noise threshold 0.2) discovers a Petri net from the real cases, and
token-based replay gives each case a fitness in [0, 1]. Replay works per variant: cases with
the same activity sequence get the same fitness, so each distinct sequence is replayed once.

The real side replays a seeded sample of at most SAMPLE cases: replaying every variant of a
large log (2,278 for BPI 2013) takes seconds; the sample's mean has its bootstrap interval."""

import numpy as np
import pandas as pd

NOISE_THRESHOLD = 0.2
SAMPLE = 1000


def discover(events: pd.DataFrame):
    """A Petri net (net, initial marking, final marking) of the real cases."""
    import pm4py

    # plain str columns: pm4py's discovery is several times slower on pandas' string dtype
    frame = events[["case_id", "activity", "timestamp"]].astype({"case_id": str, "activity": str})
    return pm4py.discover_petri_net_inductive(
        frame,
        noise_threshold=NOISE_THRESHOLD,
        activity_key="activity",
        case_id_key="case_id",
        timestamp_key="timestamp",
    )


def sequences(events: pd.DataFrame) -> pd.Series:
    """Each case's activities in time order (ties in the log's order), as a tuple."""
    frame = events.assign(
        case_id=events["case_id"].astype("string"), activity=events["activity"].astype("string")
    ).sort_values(["case_id", "timestamp"], kind="stable")
    return frame.groupby("case_id", sort=True)["activity"].apply(tuple)


def trace_fitness(model, cases: pd.Series) -> pd.Series:
    """Token-based replay fitness of each case (a Series of activity tuples) on `model`."""
    from pm4py.algo.conformance.tokenreplay import algorithm as token_replay
    from pm4py.objects.log.obj import Event, EventLog, Trace

    net, initial, final = model
    variants = sorted(set(cases))
    log = EventLog([Trace([Event({"concept:name": a}) for a in v]) for v in variants])
    parameters = {token_replay.Variants.TOKEN_REPLAY.value.Parameters.SHOW_PROGRESS_BAR: False}
    replayed = token_replay.apply(log, net, initial, final, parameters=parameters)
    by_variant = {v: float(r["trace_fitness"]) for v, r in zip(variants, replayed, strict=True)}
    return cases.map(by_variant).astype(float)


def sample_cases(cases: pd.Series, *, seed: int, size: int = SAMPLE) -> pd.Series:
    """At most `size` cases, drawn without replacement from a generator seeded with `seed`."""
    if len(cases) <= size:
        return cases
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(len(cases), size=size, replace=False))
    return cases.iloc[chosen]
