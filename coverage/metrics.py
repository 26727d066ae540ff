"""Frequency-weighted coverage of a log by a task set, and the gaps. Pure functions.

Definitions (weights come from the log, never from the tasks):

- variant coverage (raw or collapsed): share of the log's cases whose variant at that level
  equals a sequence some task declares (or resolves from a case id);
- directly-follows coverage: share of the log's DF occurrences whose pair (a, b) occurs as
  consecutive activities in a covered task sequence;
- activity coverage: share of the log's events whose activity occurs in a task sequence;
- role coverage, per attribute: share of the log's events with a value for the attribute
  whose value some task declares for that attribute.

>>> log = LogTables.from_frames(
...     variants=pd.DataFrame({"sequence": [["a", "b"], ["a", "a", "c"]], "case_count": [3, 1]}),
...     roles=pd.DataFrame({"attribute": ["team"], "value": ["L1"], "event_count": [7]}))
>>> report = compute_coverage(log, [TaskSource("t1", [("a", "b")], {"team": {"L1"}})])
>>> report.variant_coverage, report.variant_coverage_collapsed, report.role_coverage
(0.75, 0.75, {'team': 1.0})
>>> round(report.df_coverage, 4), round(report.activity_coverage, 4)
(0.6, 0.8889)
"""

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from itsmreview.coverage.variants import collapse, sequence_key

THRESHOLDS = (0.5, 0.8, 0.9)
GAP_ROWS = 20
NEAREST = 3
NEAREST_SEARCH_TOP = 1000


@dataclass(frozen=True)
class TaskSource:
    """What a task declares it comes from: activity sequences and role values per attribute."""

    task_id: str
    sequences: Sequence[tuple[str, ...]] = ()
    roles: dict[str, set[str]] = field(default_factory=dict)
    case_ids: tuple[str, ...] = ()  # the log cases it declares (resolved or not)
    outcomes: dict[str, set[str]] = field(default_factory=dict)  # outcome values it names


@dataclass
class LogTables:
    """The materialised statistics of one log that coverage needs."""

    raw: pd.DataFrame  # sequence, case_count, sequence_key
    collapsed: pd.DataFrame  # sequence, case_count, sequence_key
    df_pairs: pd.DataFrame  # source, target, count
    activities: pd.DataFrame  # name, event_count
    roles: pd.DataFrame  # attribute, value, event_count
    n_cases: int

    @classmethod
    def from_frames(
        cls,
        variants: pd.DataFrame,
        roles: pd.DataFrame | None = None,
        collapsed: pd.DataFrame | None = None,
        df_pairs: pd.DataFrame | None = None,
        activities: pd.DataFrame | None = None,
    ) -> "LogTables":
        """Tables from raw variants alone; collapsed variants, DF pairs and activity counts
        are derived when not given (they are exact: each follows from the raw variants)."""
        raw = variants.copy()
        raw["sequence"] = raw["sequence"].map(list)
        if "sequence_key" not in raw:
            raw["sequence_key"] = raw["sequence"].map(sequence_key)
        if collapsed is None:
            folded = raw.assign(sequence=raw["sequence"].map(collapse))
            folded["sequence_key"] = folded["sequence"].map(sequence_key)
            collapsed = (
                folded.groupby("sequence_key", sort=False)
                .agg(sequence=("sequence", "first"), case_count=("case_count", "sum"))
                .reset_index()
            )
        if df_pairs is None or activities is None:
            pairs, acts = Counter(), Counter()
            for sequence, count in zip(raw["sequence"], raw["case_count"], strict=True):
                for a in sequence:
                    acts[a] += count
                for a, b in zip(sequence, sequence[1:], strict=False):
                    pairs[(a, b)] += count
            if df_pairs is None:
                df_pairs = pd.DataFrame(
                    [(a, b, c) for (a, b), c in pairs.items()],
                    columns=["source", "target", "count"],
                )
            if activities is None:
                activities = pd.DataFrame(list(acts.items()), columns=["name", "event_count"])
        if roles is None:
            roles = pd.DataFrame(columns=["attribute", "value", "event_count"])
        return cls(raw, collapsed, df_pairs, activities, roles, int(raw["case_count"].sum()))


@dataclass
class AbsentSequence:
    task_ids: list[str]
    sequence: list[str]
    nearest: list[dict]  # {"sequence", "rank", "case_count", "distance"}


@dataclass
class CoverageReport:
    tasks: int
    variant_coverage: float
    variant_coverage_collapsed: float
    df_coverage: float
    activity_coverage: float
    role_coverage: dict[str, float]
    covered_variants: int
    covered_collapsed_variants: int
    absent_sequences: list[AbsentSequence]
    gaps: dict
    js_divergence: float | None
    declared_keys: set[str] = field(default_factory=set)
    declared_pairs: set[tuple[str, str]] = field(default_factory=set)
    outcomes: dict = field(default_factory=dict)  # coverage.outcomes; {} without attributes

    def as_dict(self) -> dict:
        return {
            "tasks": self.tasks,
            "variant_coverage": self.variant_coverage,
            "variant_coverage_collapsed": self.variant_coverage_collapsed,
            "df_coverage": self.df_coverage,
            "activity_coverage": self.activity_coverage,
            "role_coverage": self.role_coverage,
            "covered_variants": self.covered_variants,
            "covered_collapsed_variants": self.covered_collapsed_variants,
            "js_divergence_collapsed": self.js_divergence,
            "absent_sequences": [a.__dict__ for a in self.absent_sequences],
            "gaps": self.gaps,
            "outcomes": self.outcomes,
        }

    def to_record(self) -> dict:
        """Everything, JSON-ready (the sets as sorted lists), for `from_record`."""
        return {
            **self.as_dict(),
            "declared_keys": sorted(self.declared_keys),
            "declared_pairs": sorted(list(pair) for pair in self.declared_pairs),
        }

    @classmethod
    def from_record(cls, record: dict) -> "CoverageReport":
        return cls(
            tasks=record["tasks"],
            variant_coverage=record["variant_coverage"],
            variant_coverage_collapsed=record["variant_coverage_collapsed"],
            df_coverage=record["df_coverage"],
            activity_coverage=record["activity_coverage"],
            role_coverage=record["role_coverage"],
            covered_variants=record["covered_variants"],
            covered_collapsed_variants=record["covered_collapsed_variants"],
            absent_sequences=[AbsentSequence(**a) for a in record["absent_sequences"]],
            gaps=record["gaps"],
            js_divergence=record["js_divergence_collapsed"],
            declared_keys=set(record["declared_keys"]),
            declared_pairs={tuple(pair) for pair in record["declared_pairs"]},
            outcomes=record.get("outcomes") or {},
        )


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance over activities (insert, delete, substitute one activity).

    >>> edit_distance(["a", "b", "c"], ["a", "c"]), edit_distance([], ["x"])
    (1, 1)
    """
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def js_divergence(p: Iterable[float], q: Iterable[float]) -> float:
    """Jensen-Shannon divergence in bits (0 = same mix, 1 = disjoint) of two distributions.

    >>> js_divergence([1, 0], [0, 1]), js_divergence([0.5, 0.5], [0.5, 0.5])
    (1.0, 0.0)
    """
    p, q = np.asarray(list(p), dtype=float), np.asarray(list(q), dtype=float)
    if p.sum() <= 0 or q.sum() <= 0:
        raise ValueError("both distributions need positive mass")
    p, q = p / p.sum(), q / q.sum()
    m = (p + q) / 2

    def kl(x: np.ndarray) -> float:
        mask = x > 0
        return float(np.sum(x[mask] * np.log2(x[mask] / m[mask])))

    return max(0.0, (kl(p) + kl(q)) / 2)


def greedy_curve(shares: Sequence[float], current: float) -> dict[str, int | None]:
    """How many more tasks, each covering the next most frequent uncovered variant, reach
    each threshold. `shares`: uncovered variants' shares, any order. 0 = reached already."""
    ordered = sorted(shares, reverse=True)
    cumulative = current + np.cumsum(ordered) if ordered else np.array([])
    out = {}
    for threshold in THRESHOLDS:
        if current >= threshold - 1e-12:
            out[f"{threshold:.0%}"] = 0
            continue
        hits = np.nonzero(cumulative >= threshold - 1e-12)[0]
        out[f"{threshold:.0%}"] = int(hits[0]) + 1 if len(hits) else None
    return out


def _nearest(sequence: Sequence[str], raw: pd.DataFrame) -> list[dict]:
    candidates = raw.head(NEAREST_SEARCH_TOP)
    scored = sorted(
        ((edit_distance(sequence, s), i) for i, s in enumerate(candidates["sequence"])),
    )[:NEAREST]
    return [
        {
            "sequence": list(candidates["sequence"].iloc[i]),
            "distance": d,
            "case_count": int(candidates["case_count"].iloc[i]),
            "rank": i + 1,
        }
        for d, i in scored
    ]


def compute_coverage(log: LogTables, sources: Sequence[TaskSource]) -> CoverageReport:
    """Coverage of `log` by the declared `sources`; see the module docstring."""
    n_cases = log.n_cases
    raw_keys, key_of = _declared_sequences(sources)
    collapsed_key_of = {key: sequence_key(collapse(seq)) for key, (seq, _) in raw_keys.items()}
    raw_covered = log.raw["sequence_key"].isin(raw_keys)
    collapsed_covered = log.collapsed["sequence_key"].isin(set(collapsed_key_of.values()))
    variant_coverage = float(log.raw.loc[raw_covered, "case_count"].sum() / n_cases)
    collapsed_coverage = float(log.collapsed.loc[collapsed_covered, "case_count"].sum() / n_cases)
    covered_pairs, task_activities = set(), set()
    for sequence, _ in raw_keys.values():
        task_activities.update(sequence)
        covered_pairs.update(zip(sequence, sequence[1:], strict=False))
    pair_covered, df_coverage = _df_coverage(log.df_pairs, covered_pairs)
    role_coverage, role_gaps = _role_coverage(log.roles, sources)
    in_log = set(log.raw["sequence_key"])
    absent = [
        AbsentSequence(task_ids=ids, sequence=list(seq), nearest=_nearest(seq, log.raw))
        for key, (seq, ids) in raw_keys.items()
        if key not in in_log
    ]
    uncovered = log.raw.loc[~raw_covered]
    gaps = {
        "variants": [
            {
                "sequence": list(r.sequence),
                "case_count": int(r.case_count),
                "weight": float(r.case_count / n_cases),
            }
            for r in uncovered.nlargest(GAP_ROWS, "case_count").itertuples()
        ],
        "df_pairs": _df_gaps(log.df_pairs, pair_covered),
        "role_values": role_gaps[:GAP_ROWS],
        "greedy_tasks_to_reach": greedy_curve(
            (uncovered["case_count"] / n_cases).tolist(), variant_coverage
        ),
    }
    js = None
    if raw_keys:
        js = _mix_divergence(log.collapsed, sources, lambda s: collapsed_key_of[key_of[s]])
    return CoverageReport(
        tasks=len(sources),
        variant_coverage=variant_coverage,
        variant_coverage_collapsed=collapsed_coverage,
        df_coverage=df_coverage,
        activity_coverage=_activity_coverage(log.activities, task_activities),
        role_coverage=role_coverage,
        covered_variants=int(raw_covered.sum()),
        covered_collapsed_variants=int(collapsed_covered.sum()),
        absent_sequences=absent,
        gaps=gaps,
        js_divergence=js,
        declared_keys=set(raw_keys),
        declared_pairs=covered_pairs,
    )


def _declared_sequences(
    sources: Sequence[TaskSource],
) -> tuple[dict[str, tuple[tuple[str, ...], list[str]]], dict[tuple[str, ...], str]]:
    """The sequences the tasks declare, by key: (sequence, ids of the tasks declaring it);
    and the key of each sequence."""
    raw_keys: dict[str, tuple[tuple[str, ...], list[str]]] = {}
    key_of: dict[tuple[str, ...], str] = {}
    for source in sources:
        for sequence in source.sequences:
            sequence = tuple(sequence)
            key = key_of.get(sequence)
            if key is None:
                key = key_of[sequence] = sequence_key(sequence)
            raw_keys.setdefault(key, (sequence, []))[1].append(source.task_id)
    return raw_keys, key_of


def _df_coverage(df_pairs: pd.DataFrame, covered_pairs: set) -> tuple[np.ndarray, float]:
    """Which of the log's DF pairs the tasks cover (a mask), and their share of DF
    occurrences."""
    pair_index = pd.MultiIndex.from_frame(df_pairs[["source", "target"]])
    pair_covered = (
        pair_index.isin(list(covered_pairs))
        if covered_pairs
        else np.zeros(len(pair_index), dtype=bool)
    )
    total_df = df_pairs["count"].sum()
    share = float(df_pairs.loc[pair_covered, "count"].sum() / total_df) if total_df else 0.0
    return pair_covered, share


def _df_gaps(df_pairs: pd.DataFrame, pair_covered: np.ndarray) -> list[dict]:
    """The GAP_ROWS most frequent DF pairs no task covers, with their share."""
    total_df = df_pairs["count"].sum()
    return [
        {
            "source": r.source,
            "target": r.target,
            "count": int(r.count),
            "weight": float(r.count / total_df),
        }
        for r in df_pairs.loc[~pair_covered].nlargest(GAP_ROWS, "count").itertuples()
    ]


def _activity_coverage(activities: pd.DataFrame, task_activities: set[str]) -> float:
    """The share of the log's events whose activity occurs in a task sequence."""
    covered = activities["name"].isin(task_activities)
    total_events = activities["event_count"].sum()
    if not total_events:
        return 0.0
    return float(activities.loc[covered, "event_count"].sum() / total_events)


def _role_coverage(
    roles: pd.DataFrame, sources: Sequence[TaskSource]
) -> tuple[dict[str, float], list[dict]]:
    """Per role attribute, the share of events whose value some task declares; and the
    undeclared values with their share, largest first."""
    declared_roles: dict[str, set[str]] = {}
    for source in sources:
        for attribute, values in source.roles.items():
            declared_roles.setdefault(attribute, set()).update(values)
    role_coverage, role_gaps = {}, []
    for attribute, rows in roles.groupby("attribute", sort=True):
        covered = rows["value"].isin(declared_roles.get(attribute, set()))
        total = rows["event_count"].sum()
        role_coverage[attribute] = float(rows.loc[covered, "event_count"].sum() / total)
        for row in rows.loc[~covered].itertuples():
            role_gaps.append(
                {
                    "attribute": attribute,
                    "value": row.value,
                    "weight": float(row.event_count / total),
                }
            )
    role_gaps.sort(key=lambda g: -g["weight"])
    return role_coverage, role_gaps


def _mix_divergence(
    collapsed: pd.DataFrame, sources: Sequence[TaskSource], collapsed_key
) -> float | None:
    """JS divergence of the tasks' mix of collapsed variants (each task's weight split over
    its sequences) from the log's case mix; None when undefined."""
    task_mix = Counter()
    for source in sources:
        for sequence in source.sequences:
            task_mix[collapsed_key(tuple(sequence))] += 1 / len(source.sequences)
    log_mix = dict(zip(collapsed["sequence_key"], collapsed["case_count"], strict=True))
    keys = list(log_mix) + [k for k in task_mix if k not in log_mix]
    js = js_divergence([task_mix.get(k, 0.0) for k in keys], [log_mix.get(k, 0) for k in keys])
    return None if math.isnan(js) else js
