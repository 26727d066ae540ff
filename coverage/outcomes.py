"""Outcome coverage: how the cases of a log ended (closure code, priority, how often they were
reassigned, whether they met their SLA) and the other case-attribute values, weighted by
their cases, and which of them the tasks cover. Pure functions over the cases table."""

from collections.abc import Iterable, Mapping

import pandas as pd

ATTRIBUTE_PREFIX = "attr:"
MAX_VALUES = 500  # an attribute with more values names things (a CI, a change), not outcomes
IDENTIFIERS = {"ci_name", "related_change"}
GAP_ROWS = 20
REASSIGNED = "reassigned"
SLA = "sla"


def reassigned_bucket(count: float) -> str | None:
    """How often a case was reassigned, in the buckets the outcome uses.

    >>> [reassigned_bucket(n) for n in (0, 1, 2, 3, 7)]
    ['0', '1', '2', '3+', '3+']
    """
    if count is None or pd.isna(count):
        return None
    return str(int(count)) if count < 3 else "3+"


def parse_sla_hours(text: str) -> dict[str, float]:
    """`PRIORITY=HOURS,...` as a mapping; raises ValueError saying what is wrong.

    >>> parse_sla_hours("1=4, 2=8,3=24.5")
    {'1': 4.0, '2': 8.0, '3': 24.5}
    """
    targets = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        priority, _, hours = part.partition("=")
        try:
            value = float(hours)
        except ValueError:
            value = -1
        if not priority.strip() or value <= 0:
            raise ValueError(
                f"SLA target {part!r} is not PRIORITY=HOURS with hours above 0, e.g. 1=4,2=8"
            )
        targets[priority.strip()] = value
    return targets


def case_outcomes(
    cases: pd.DataFrame, sla_hours: Mapping[str, float] | None = None
) -> pd.DataFrame:
    """One text column per outcome (index: case id): each case attribute with at most
    MAX_VALUES values, `reassigned` from `attr:reassignments`, and `sla` (met / breached:
    resolved minus open time, else the case's duration, against its priority's target)."""
    frame = cases.set_index("case_id")
    out = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        if not column.startswith(ATTRIBUTE_PREFIX):
            continue
        name = column[len(ATTRIBUTE_PREFIX) :]
        values = frame[column]
        if name == "reassignments":
            out[REASSIGNED] = values.map(reassigned_bucket)
            continue
        if name in IDENTIFIERS or not (
            pd.api.types.is_string_dtype(values) or pd.api.types.is_object_dtype(values)
        ):
            continue
        if values.nunique(dropna=True) <= MAX_VALUES:
            out[name] = values.astype("string")
    if sla_hours and f"{ATTRIBUTE_PREFIX}priority" in frame:
        opened = frame.get(f"{ATTRIBUTE_PREFIX}open_time")
        resolved = frame.get(f"{ATTRIBUTE_PREFIX}resolved_time")
        if opened is not None and resolved is not None:
            hours = (resolved - opened).dt.total_seconds() / 3600
        else:
            hours = frame["throughput_s"] / 3600
        target = frame[f"{ATTRIBUTE_PREFIX}priority"].astype("string").map(dict(sla_hours))
        verdict = pd.Series(pd.NA, index=frame.index, dtype="string")
        known = target.notna() & hours.notna()
        verdict[known] = (hours[known] <= target[known].astype(float)).map(
            {True: "met", False: "breached"}
        )
        out[SLA] = verdict
    return out


def declared_outcomes(source: Mapping) -> dict[str, set[str]]:
    """The outcome values a task's source names itself (`outcomes: {attribute: value or
    [values]}`), as text."""
    found = {}
    for name, values in (source.get("outcomes") or {}).items():
        listed = values if isinstance(values, list | tuple | set) else [values]
        found[str(name)] = {str(v) for v in listed if v is not None}
    return found


def outcome_coverage(
    outcomes: pd.DataFrame,
    task_cases: Iterable[Iterable[str]],
    task_outcomes: Iterable[Mapping[str, set[str]]] = (),
) -> dict[str, dict]:
    """Per outcome: its values' cases, which values the tasks cover (through the cases they
    declare, or the values they name), the covered share of the cases that have a value, and
    the uncovered values by weight.

    >>> cases = pd.DataFrame({"code": ["a", "a", "b", "c"]}, index=["1", "2", "3", "4"])
    >>> found = outcome_coverage(cases, [["1"]], [{"code": {"c"}}])["code"]
    >>> found["coverage"], found["covered_values"], found["gaps"]
    (0.75, ['a', 'c'], [{'value': 'b', 'cases': 1, 'weight': 0.25}])
    """
    declared = {str(c) for cases in task_cases for c in cases}
    named = list(task_outcomes)
    rows = outcomes.loc[outcomes.index.astype(str).isin(declared)]
    result = {}
    for name in outcomes.columns:
        counts = outcomes[name].dropna().value_counts()
        if counts.empty:
            continue
        total = int(counts.sum())  # cases with a value: the others say nothing of outcomes
        covered = set(rows[name].dropna().astype(str))
        for task in named:
            covered |= task.get(name, set())
        covered &= set(counts.index.astype(str))
        weight = counts[counts.index.astype(str).isin(covered)].sum()
        gaps = counts[~counts.index.astype(str).isin(covered)].head(GAP_ROWS)
        result[name] = {
            "values": int(len(counts)),
            "cases_with_value": int(counts.sum()),
            "coverage": float(weight / total),
            "covered_values": sorted(covered),
            "value_cases": {str(k): int(v) for k, v in counts.items()},
            "gaps": [
                {"value": str(v), "cases": int(n), "weight": float(n / total)}
                for v, n in gaps.items()
            ],
        }
    return result
