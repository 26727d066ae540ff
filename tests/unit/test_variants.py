"""Variants and DF pairs on tiny hand-built logs, checked against a direct computation."""

from collections import Counter

import pandas as pd
import pytest
from itsmreview.coverage.eventlog import ColumnMapping, normalise
from itsmreview.coverage.variants import collapse, materialise, sequence_key

MAPPING = ColumnMapping(
    case="case", activity="act", timestamp="ts", resource="who", roles=("team",)
)


def frame(rows):
    return pd.DataFrame(rows, columns=["case", "act", "ts", "who", "team"])


def test_ties_keep_file_order_and_time_orders_the_rest():
    events = normalise(
        frame(
            [
                ("c1", "b", "2024-01-01T10:00:00Z", "x", "L1"),
                ("c1", "a", "2024-01-01T09:00:00Z", "x", "L1"),
                ("c1", "c", "2024-01-01T10:00:00Z", "x", "L1"),  # tie with b: stays after b
            ]
        ),
        MAPPING,
    )
    assert events["activity"].tolist() == ["a", "b", "c"]


def test_variant_counts_match_a_direct_count():
    rows = []
    sequences = {"c1": "abc", "c2": "abc", "c3": "aabbc", "c4": "ac", "c5": "abc", "c6": "aabbc"}
    for case, seq in sequences.items():
        for i, act in enumerate(seq):
            rows.append((case, act, f"2024-01-01T10:{i:02d}:00Z", "r", "L1"))
    m = materialise(normalise(frame(rows), MAPPING))
    raw = m.variants[m.variants.level == "raw"]
    expected = Counter(tuple(s) for s in sequences.values())
    assert {tuple(s): c for s, c in zip(raw.sequence, raw.case_count, strict=True)} == expected
    assert raw["rank"].tolist() == [1, 2, 3]
    assert raw["share"].sum() == pytest.approx(1.0)
    collapsed = m.variants[m.variants.level == "collapsed"]
    expected_collapsed = Counter(tuple(collapse(list(s))) for s in sequences.values())
    assert {
        tuple(s): c for s, c in zip(collapsed.sequence, collapsed.case_count, strict=True)
    } == expected_collapsed
    pairs = Counter()
    for seq in sequences.values():
        pairs.update(zip(seq, seq[1:], strict=False))
    assert {(r.source, r.target): r.count for r in m.df_pairs.itertuples()} == pairs
    assert m.summary["singleton_variants"] == 1
    assert set(m.cases["variant_key"]) == {sequence_key(list(s)) for s in sequences.values()}


def test_equal_counts_rank_by_first_appearance():
    rows = [("c1", "x", "2024-01-01", "r", "L1"), ("c2", "y", "2024-01-01", "r", "L1")]
    m = materialise(normalise(frame(rows), MAPPING))
    raw = m.variants[m.variants.level == "raw"]
    assert raw.sequence.tolist() == [["x"], ["y"]]


def test_missing_role_values_are_not_counted():
    rows = [
        ("c1", "a", "2024-01-01T10:00:00Z", "r", "L1"),
        ("c1", "b", "2024-01-01T11:00:00Z", "r", None),
        ("c2", "a", "2024-01-01T10:00:00Z", "r", "L2"),
    ]
    m = materialise(normalise(frame(rows), MAPPING))
    roles = {(r.value): (r.event_count, r.case_count) for r in m.role_values.itertuples()}
    assert roles == {"L1": (1, 1), "L2": (1, 1)}


def test_throughput_is_last_minus_first_event():
    rows = [
        ("c1", "a", "2024-01-01T10:00:00Z", "r", "L1"),
        ("c1", "b", "2024-01-01T12:30:00Z", "r", "L1"),
    ]
    m = materialise(normalise(frame(rows), MAPPING))
    assert m.variants.iloc[0].median_throughput_s == 9000.0


def test_sequence_key_is_order_sensitive_and_stable():
    assert sequence_key(["a", "b"]) != sequence_key(["b", "a"])
    assert sequence_key(["a", "b"]) == sequence_key(("a", "b"))
    assert sequence_key(["ab"]) != sequence_key(["a", "b"])
