"""Materialising an ordered event table: variants, directly-follows pairs, activities, roles.

Pure functions over the canonical event table of `itsmreview.coverage.eventlog`.

>>> import pandas as pd
>>> events = pd.DataFrame({
...     "case_id": ["c1", "c1", "c1", "c2", "c2", "c3", "c3", "c3"],
...     "activity": ["open", "work", "close", "open", "close", "open", "work", "close"],
...     "timestamp": pd.to_datetime(["2024-01-01 10:00"] * 8, utc=True)})
>>> m = materialise(events)
>>> m.variants[m.variants.level == "raw"][["rank", "case_count"]].values.tolist()
[[1, 2], [2, 1]]
>>> m.variants.iloc[0].sequence
['open', 'work', 'close']
>>> m.summary["df_pairs"], m.summary["singleton_variants"]
(3, 1)
"""

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from itsmreview.coverage.eventlog import ROLE_PREFIX, role_columns

EXAMPLE_CASES_PER_VARIANT = 5
SEQUENCE_SEPARATOR = "\x1f"


def sequence_key(sequence: list[str] | tuple[str, ...]) -> str:
    """A stable id for an activity sequence: equal sequences in any log share it."""
    return hashlib.sha256(SEQUENCE_SEPARATOR.join(sequence).encode("utf-8")).hexdigest()


def collapse(sequence: list[str] | tuple[str, ...]) -> list[str]:
    """The sequence with consecutive repeats of one activity folded into one.

    >>> collapse(["a", "a", "b", "a", "a"])
    ['a', 'b', 'a']
    """
    return [a for i, a in enumerate(sequence) if i == 0 or sequence[i - 1] != a]


@dataclass
class Materialised:
    """What an import keeps, so pages never recompute from raw events."""

    variants: pd.DataFrame
    df_pairs: pd.DataFrame
    activities: pd.DataFrame
    role_values: pd.DataFrame
    cases: pd.DataFrame
    summary: dict = field(default_factory=dict)


def _case_boundaries(case_codes: np.ndarray) -> np.ndarray:
    starts = np.ones(len(case_codes), dtype=bool)
    starts[1:] = case_codes[1:] != case_codes[:-1]
    return starts


def _variant_keys(case_codes: np.ndarray, act_codes: np.ndarray, keep: np.ndarray) -> pd.Series:
    """Per case, its kept activity codes joined as text (a compact variant identity)."""
    frame = pd.DataFrame({"case": case_codes[keep], "code": act_codes[keep].astype(str)})
    return frame.groupby("case", sort=False)["code"].agg(",".join)


def _variant_table(
    cases: pd.DataFrame, key_column: str, names: np.ndarray, level: str
) -> pd.DataFrame:
    grouped = cases.groupby(key_column, sort=False)
    table = pd.DataFrame(
        {
            "case_count": grouped.size(),
            "median_throughput_s": grouped["throughput_s"].median(),
            "example_case_ids": grouped["case_id"].agg(
                lambda ids: [str(i) for i in ids.iloc[:EXAMPLE_CASES_PER_VARIANT]]
            ),
        }
    )
    table["first_seen"] = np.arange(len(table))
    table = table.sort_values(["case_count", "first_seen"], ascending=[False, True], kind="stable")
    table["rank"] = np.arange(1, len(table) + 1)
    table["sequence"] = [
        [str(names[int(c)]) for c in code_text.split(",")] for code_text in table.index
    ]
    table["sequence_key"] = [sequence_key(seq) for seq in table["sequence"]]
    table["length"] = table["sequence"].map(len)
    table["share"] = table["case_count"] / len(cases)
    table["level"] = level
    table = table.reset_index(names="code_key")
    return table[
        [
            "level",
            "rank",
            "sequence",
            "sequence_key",
            "length",
            "case_count",
            "share",
            "median_throughput_s",
            "example_case_ids",
            "code_key",
        ]
    ]


def materialise(events: pd.DataFrame) -> Materialised:
    """Variants (raw and collapsed), DF pairs, activities and role values of `events`.

    `events` must be ordered: cases contiguous, events in case order. Variant rank 1
    is the most frequent; ties go to the variant seen first. Durations in seconds.
    """
    if events.empty:
        raise ValueError("cannot materialise an empty log")
    case_codes, case_ids = pd.factorize(events["case_id"], sort=False)
    act_codes, names = pd.factorize(events["activity"], sort=False)
    names = np.asarray(names, dtype=object)
    starts = _case_boundaries(case_codes)
    if len(np.unique(case_codes[starts])) != starts.sum():
        raise ValueError("events are not grouped by case; normalise the log first")

    same_as_previous = np.zeros(len(act_codes), dtype=bool)
    same_as_previous[1:] = (act_codes[1:] == act_codes[:-1]) & ~starts[1:]
    raw_keys = _variant_keys(case_codes, act_codes, np.ones(len(act_codes), dtype=bool))
    collapsed_keys = _variant_keys(case_codes, act_codes, ~same_as_previous)

    timestamps = events["timestamp"]
    by_case = pd.DataFrame({"case": case_codes, "timestamp": timestamps.to_numpy()}).groupby(
        "case", sort=False
    )["timestamp"]
    started, ended = by_case.min(), by_case.max()
    n_events = np.bincount(case_codes)
    cases = pd.DataFrame(
        {
            "case_id": np.asarray(case_ids, dtype=object).astype(str),
            "raw_key": raw_keys.to_numpy(),
            "collapsed_key": collapsed_keys.to_numpy(),
            "n_events": n_events,
            "started_at": started.to_numpy(),
            "ended_at": ended.to_numpy(),
        }
    )
    cases["throughput_s"] = (
        pd.to_datetime(cases["ended_at"]) - pd.to_datetime(cases["started_at"])
    ).dt.total_seconds()

    raw = _variant_table(cases, "raw_key", names, "raw")
    collapsed = _variant_table(cases, "collapsed_key", names, "collapsed")
    cases["variant_key"] = cases["raw_key"].map(
        dict(zip(raw.code_key, raw.sequence_key, strict=True))
    )
    cases["collapsed_variant_key"] = cases["collapsed_key"].map(
        dict(zip(collapsed.code_key, collapsed.sequence_key, strict=True))
    )
    cases = cases.drop(columns=["raw_key", "collapsed_key"])
    variants = pd.concat([raw, collapsed], ignore_index=True).drop(columns=["code_key"])

    follows = ~starts[1:]
    pair_frame = pd.DataFrame({"source": act_codes[:-1][follows], "target": act_codes[1:][follows]})
    df_pairs = pair_frame.value_counts().rename("count").reset_index()
    df_pairs["source"] = names[df_pairs["source"].to_numpy()]
    df_pairs["target"] = names[df_pairs["target"].to_numpy()]
    df_pairs = df_pairs.sort_values(
        ["count", "source", "target"], ascending=[False, True, True], ignore_index=True
    )

    act_frame = pd.DataFrame({"case": case_codes, "act": act_codes})
    activities = pd.DataFrame(
        {
            "name": names,
            "event_count": np.bincount(act_codes, minlength=len(names)),
            "case_count": np.bincount(
                act_frame.drop_duplicates()["act"].to_numpy(), minlength=len(names)
            ),
        }
    ).sort_values(["event_count", "name"], ascending=[False, True], ignore_index=True)

    role_tables = []
    for column in role_columns(events):
        values = events[column]
        present = values.notna().to_numpy()
        frame = pd.DataFrame(
            {"value": values[present].astype(str).to_numpy(), "case": case_codes[present]}
        )
        counts = (
            frame.groupby("value", sort=True)
            .agg(event_count=("case", "size"), case_count=("case", "nunique"))
            .reset_index()
        )
        counts.insert(0, "attribute", column[len(ROLE_PREFIX) :])
        role_tables.append(counts)
    role_values = (
        pd.concat(role_tables, ignore_index=True)
        if role_tables
        else pd.DataFrame(columns=["attribute", "value", "event_count", "case_count"])
    )

    summary = {
        "cases": len(cases),
        "events": len(events),
        "activities": len(names),
        "variants": len(raw),
        "collapsed_variants": len(collapsed),
        "df_pairs": len(df_pairs),
        "singleton_variants": int((raw["case_count"] == 1).sum()),
        "first_timestamp": timestamps.min(),
        "last_timestamp": timestamps.max(),
    }
    return Materialised(variants, df_pairs, activities, role_values, cases, summary)
