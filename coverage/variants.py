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

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from itsmreview.coverage.eventlog import ROLE_PREFIX, role_columns
from itsmreview.sequences import SEQUENCE_SEPARATOR, sequence_key

__all__ = ["SEQUENCE_SEPARATOR", "sequence_key"]

EXAMPLE_CASES_PER_VARIANT = 5


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


def _codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes and their labels; categoricals keep their categories' order."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy().astype(np.int64), np.asarray(
            column.cat.categories, dtype=object
        )
    codes, labels = pd.factorize(column, sort=False)
    return codes.astype(np.int64), np.asarray(labels, dtype=object)


_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def _variant_ids(starts: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per case, the id of its activity sequence (ids in order of first appearance), and
    each id's first case. Sequences are grouped by a 64-bit polynomial hash and then
    verified element by element, so the result is exact."""
    lengths = np.diff(np.append(starts, len(act)))
    position = np.arange(len(act)) - np.repeat(starts, lengths)
    powers = np.cumprod(np.full(int(lengths.max()), _MULTIPLIER, dtype=np.uint64), dtype=np.uint64)
    with np.errstate(over="ignore"):
        terms = (act.astype(np.uint64) + np.uint64(1)) * powers[position]
        hashes = np.add.reduceat(terms, starts) + lengths.astype(np.uint64)
    ids, _ = pd.factorize(hashes, sort=False)
    first_case = _first_occurrences(ids)
    representative = first_case[ids]
    same_length = lengths == lengths[representative]
    same_codes = (
        act == act[np.repeat(starts[representative], lengths) + position]
        if bool(same_length.all())
        else False
    )
    if not (bool(same_length.all()) and bool(np.all(same_codes))):
        return _variant_ids_exact(starts, act)
    return ids.astype(np.int64), first_case


def _variant_ids_exact(starts: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slow path, used only if two different sequences ever share a hash."""
    sequences = [tuple(x) for x in np.split(act, starts[1:])]
    ids, _ = pd.factorize(pd.Series(sequences, dtype=object), sort=False)
    return ids.astype(np.int64), _first_occurrences(ids)


def _first_occurrences(ids: np.ndarray) -> np.ndarray:
    """Where each id first occurs, for ids numbered in order of first appearance (as
    `pd.factorize(sort=False)` numbers them): exactly the places where the running maximum grows."""
    running = np.maximum.accumulate(ids)
    grows = np.ones(len(ids), dtype=bool)
    grows[1:] = running[1:] > running[:-1]
    return np.flatnonzero(grows)


def _variant_table(
    ids: np.ndarray,
    first_case: np.ndarray,
    starts: np.ndarray,
    act: np.ndarray,
    names: np.ndarray,
    throughput: np.ndarray,
    case_ids: np.ndarray,
    level: str,
) -> tuple[pd.DataFrame, np.ndarray]:
    """The variants ordered by rank, and their sequence keys indexed by variant id."""
    n_cases, n_variants = len(ids), len(first_case)
    counts = np.bincount(ids, minlength=n_variants)
    order = np.lexsort((np.arange(n_variants), -counts))
    rank = np.empty(n_variants, dtype=np.int64)
    rank[order] = np.arange(1, n_variants + 1)
    medians = pd.Series(throughput).groupby(ids).median().to_numpy()
    by_variant = np.argsort(ids, kind="stable")
    sorted_ids = ids[by_variant]
    nth = np.arange(n_cases) - np.searchsorted(sorted_ids, sorted_ids)
    keep = by_variant[nth < EXAMPLE_CASES_PER_VARIANT]
    kept_ids = ids[keep]
    kept_case_ids = case_ids[keep].tolist()
    bounds = [0, *(np.flatnonzero(kept_ids[1:] != kept_ids[:-1]) + 1).tolist(), len(keep)]
    examples = [kept_case_ids[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    ends = np.append(starts, len(act))
    sequences = [names[act[ends[c] : ends[c + 1]]].tolist() for c in first_case]
    table = variant_frame(level, rank, sequences, counts, n_cases, medians, examples)
    return table.iloc[order].reset_index(drop=True), table["sequence_key"].to_numpy()


DENSE_LIMIT = 64_000_000


def variant_frame(level, rank, sequences, counts, n_cases, medians, examples) -> pd.DataFrame:
    """A level's variants table, one row per variant in the order given."""
    return pd.DataFrame(
        {
            "level": level,
            "rank": rank,
            "sequence": sequences,
            "sequence_key": [sequence_key(seq) for seq in sequences],
            "length": [len(seq) for seq in sequences],
            "case_count": counts,
            "share": counts / n_cases,
            "median_throughput_s": medians,
            "example_case_ids": examples,
        }
    )


def _cases_per_value(
    case_of_event: np.ndarray, values: np.ndarray, n_cases: int, n_values: int
) -> np.ndarray:
    """For each value code, the number of distinct cases with at least one event of it."""
    keys = case_of_event.astype(np.int64) * n_values + values
    if n_cases * n_values <= DENSE_LIMIT:
        seen = np.zeros(n_cases * n_values, dtype=bool)
        seen[keys] = True
        return seen.reshape(n_cases, n_values).sum(axis=0)
    return np.bincount(pd.unique(keys) % n_values, minlength=n_values)


def materialise(events: pd.DataFrame) -> Materialised:
    """Variants (raw and collapsed), DF pairs, activities and role values of `events`.

    `events` must be ordered: cases contiguous, events in case order. Variant rank 1
    is the most frequent; ties go to the variant seen first. Durations in seconds.
    """
    if events.empty:
        raise ValueError("cannot materialise an empty log")
    case_ids, starts, boundary = _split_cases(events["case_id"])
    act, names = _codes(events["activity"])
    n_cases = len(starts)
    stamps = events["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64)
    started = np.minimum.reduceat(stamps, starts)
    ended = np.maximum.reduceat(stamps, starts)
    throughput = (ended - started) / 1e9
    n_events = np.diff(np.append(starts, len(act)))

    raw_ids, raw_first = _variant_ids(starts, act)
    keep = np.ones(len(act), dtype=bool)
    keep[1:] = (act[1:] != act[:-1]) | boundary[1:]  # the first of each run of one activity
    kept_act = act[keep]
    kept_starts = np.flatnonzero(boundary[keep])
    collapsed_ids, collapsed_first = _variant_ids(kept_starts, kept_act)
    raw, raw_keys = _variant_table(
        raw_ids, raw_first, starts, act, names, throughput, case_ids, "raw"
    )
    collapsed, collapsed_keys = _variant_table(
        collapsed_ids,
        collapsed_first,
        kept_starts,
        kept_act,
        names,
        throughput,
        case_ids,
        "collapsed",
    )
    cases = pd.DataFrame(
        {
            "case_id": case_ids,
            "n_events": n_events,
            "started_at": pd.to_datetime(started, unit="ns", utc=True),
            "ended_at": pd.to_datetime(ended, unit="ns", utc=True),
            "throughput_s": throughput,
            "variant_key": pd.Categorical.from_codes(raw_ids, raw_keys),
            "collapsed_variant_key": pd.Categorical.from_codes(collapsed_ids, collapsed_keys),
        }
    )
    df_pairs = _df_pairs(act, names, boundary)
    case_of_event = np.repeat(np.arange(n_cases), n_events)
    summary = {
        "cases": n_cases,
        "events": len(events),
        "activities": len(names),
        "variants": len(raw),
        "collapsed_variants": len(collapsed),
        "df_pairs": len(df_pairs),
        "singleton_variants": int((raw["case_count"] == 1).sum()),
        "first_timestamp": pd.Timestamp(int(stamps.min()), unit="ns", tz="UTC"),
        "last_timestamp": pd.Timestamp(int(stamps.max()), unit="ns", tz="UTC"),
    }
    return Materialised(
        pd.concat([raw, collapsed], ignore_index=True),
        df_pairs,
        _activities(act, names, case_of_event, n_cases),
        _role_values(events, case_of_event, n_cases),
        cases,
        summary,
    )


def _split_cases(case_column: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The case ids in order, where each case's events start, and a mask of the events
    that start a case. Raises ValueError for events without a case or not grouped by case."""
    case_codes, case_labels = _codes(case_column)
    boundary = np.ones(len(case_codes), dtype=bool)
    boundary[1:] = case_codes[1:] != case_codes[:-1]
    starts = np.flatnonzero(boundary)
    if case_codes.min() < 0:
        raise ValueError("events without a case id; normalise the log first")
    if np.bincount(case_codes[starts]).max() > 1:
        raise ValueError("events are not grouped by case; normalise the log first")
    case_ids = case_labels[case_codes[starts]]
    if not all(type(label) is str for label in case_labels):
        case_ids = case_ids.astype(str).astype(object)
    return case_ids, starts, boundary


def _df_pairs(act: np.ndarray, names: np.ndarray, boundary: np.ndarray) -> pd.DataFrame:
    """Directly-follows pairs inside cases with their counts, most frequent first."""
    n_names = len(names)
    follows = ~boundary[1:]
    pair_codes = act[:-1][follows] * n_names + act[1:][follows]
    pair_counts = np.bincount(pair_codes, minlength=n_names * n_names)
    present = np.flatnonzero(pair_counts)
    return pd.DataFrame(
        {
            "source": names[present // n_names],
            "target": names[present % n_names],
            "count": pair_counts[present],
        }
    ).sort_values(["count", "source", "target"], ascending=[False, True, True], ignore_index=True)


def _activities(
    act: np.ndarray, names: np.ndarray, case_of_event: np.ndarray, n_cases: int
) -> pd.DataFrame:
    """Each activity's event and case counts, most events first."""
    n_names = len(names)
    return pd.DataFrame(
        {
            "name": names,
            "event_count": np.bincount(act, minlength=n_names),
            "case_count": _cases_per_value(case_of_event, act, n_cases, n_names),
        }
    ).sort_values(["event_count", "name"], ascending=[False, True], ignore_index=True)


def _role_values(events: pd.DataFrame, case_of_event: np.ndarray, n_cases: int) -> pd.DataFrame:
    """Per role attribute and value, its event and case counts (values sorted)."""
    role_tables = []
    for column in role_columns(events):
        codes, labels = _codes(events[column])
        present_mask = codes >= 0
        n_labels = max(len(labels), 1)
        event_counts = np.bincount(codes[present_mask], minlength=n_labels)
        case_counts = _cases_per_value(
            case_of_event[present_mask], codes[present_mask], n_cases, n_labels
        )
        used = np.flatnonzero(event_counts)
        table = pd.DataFrame(
            {
                "attribute": column[len(ROLE_PREFIX) :],
                "value": labels[used].astype(str),
                "event_count": event_counts[used],
                "case_count": case_counts[used],
            }
        )
        role_tables.append(table.sort_values("value", ignore_index=True))
    if not role_tables:
        return pd.DataFrame(columns=["attribute", "value", "event_count", "case_count"])
    return pd.concat(role_tables, ignore_index=True)
