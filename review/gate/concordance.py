"""Statistics for a consensus (Delphi) round: Kendall's W across raters, and per item the median,
the quartiles, their spread (IQR) and the share of answers that changed between two rounds.

Definitions (m raters, n items; docs/agreement.md, "Concordance and spread"):

- Kendall's coefficient of concordance W (Kendall & Babington Smith 1939; Kendall & Gibbons 1990,
  "Rank Correlation Methods", 5th ed., ch. 6). Each rater's scores are ranked 1..n (tied scores
  share their average rank); R_j is item j's rank sum and S = sum_j (R_j - m(n + 1)/2)^2.
  W = 12 S / (m^2 (n^3 - n) - m T), where T = sum over raters of sum(t^3 - t) over the rater's
  groups of t tied scores (T = 0 without ties). W runs from 0 (no agreement on the order) to 1
  (every rater orders the items alike). Under independence m (n - 1) W is approximately
  chi-square with n - 1 degrees of freedom (the Friedman statistic; reliable for n > 7).
- IQR = Q3 - Q1, the quartiles by numpy's default (linear) percentile method.
- share changed = answers (item, rater) given in both rounds whose score differs / answers given
  in both rounds.

The data of Siegel & Castellan's (1988, "Nonparametric Statistics", 2nd ed.) example, three
raters ranking eight items, as DescTools' `KendallW` documents them (W = 0.6560847, chi-square
13.778, df 7, p = 0.05528):

>>> result = kendalls_w([[5, 6, 7, 1, 2, 4, 3, 8],
...                      [1, 7, 6, 2, 3, 5, 4, 8],
...                      [4, 5, 1, 3, 2, 7, 6, 8]])
>>> round(result.w, 7), round(result.chi2, 3), result.df, round(result.p_value, 5)
(0.6560847, 13.778, 7, 0.05528)
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

COLUMNS = ("item", "rater", "score")


@dataclass(frozen=True)
class Concordance:
    """Kendall's W of m raters over n items, with its chi-square test. NaN where undefined."""

    w: float
    chi2: float  # m (n - 1) W
    df: int  # n - 1
    p_value: float  # chi-square upper tail
    raters: int
    items: int


def kendalls_w(ratings) -> Concordance:
    """Kendall's W of a raters x items array of scores (higher = better), with ties corrected.

    Each rater's scores are ranked (average ranks for ties); the direction does not change W as
    long as every rater scores the same way round. No value may be missing.

    W is undefined when every rater gives all of their items one and the same score (no rater
    orders anything: the denominator is 0); then w, chi2 and p_value are NaN.

    The InfluentialPoints worked example (four raters rank eight farms' strawberries; by hand,
    S = 500, W = 500 / 672 = 0.744, chi-square 20.83, P = 0.004):

    >>> result = kendalls_w([[8, 4, 2, 3, 5, 1, 6, 7],
    ...                      [7, 3, 1, 4, 5, 2, 6, 8],
    ...                      [8, 2, 5, 6, 7, 1, 4, 3],
    ...                      [8, 3, 4, 2, 5, 1, 6, 7]])
    >>> round(result.w, 3), round(result.chi2, 2), round(result.p_value, 3)
    (0.744, 20.83, 0.004)
    >>> kendalls_w([[3, 3, 3], [4, 4, 4]]).w
    nan
    """
    array = np.asarray(ratings, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"ratings must be 2-D (raters x items), got shape {array.shape}")
    m, n = array.shape
    if m < 2 or n < 2:
        raise ValueError(f"Kendall's W needs at least 2 raters and 2 items, got {m} x {n}")
    if np.isnan(array).any():
        raise ValueError("ratings hold a missing value (NaN); Kendall's W needs complete rankings")
    if np.isinf(array).any():
        raise ValueError("ratings hold an infinite value; scores must be finite")
    from scipy.special import gammaincc  # not scipy.stats: it takes a second to import

    ranks = pd.DataFrame(array).rank(axis=1, method="average").to_numpy()
    rank_sums = ranks.sum(axis=0)
    s = float(((rank_sums - m * (n + 1) / 2) ** 2).sum())
    # t^3 - t over each rater's groups of tied scores
    ties = sum(int((counts**3 - counts).sum()) for counts in _tie_counts(array))
    denominator = m * m * (n**3 - n) - m * ties
    df = n - 1
    if denominator == 0:
        return Concordance(float("nan"), float("nan"), df, float("nan"), m, n)
    w = 12 * s / denominator
    statistic = m * df * w
    p_value = float(gammaincc(df / 2, statistic / 2))  # the chi-square's survival function
    return Concordance(w, statistic, df, p_value, m, n)


def _tie_counts(array: np.ndarray) -> list[np.ndarray]:
    """Per rater (row), how many times each distinct score occurs."""
    return [np.unique(row, return_counts=True)[1].astype(np.int64) for row in array]


def interquartile_range(values) -> float:
    """Q3 - Q1 of the values, by numpy's default (linear) percentile method; NaN is ignored.

    >>> interquartile_range([1, 2, 3, 4, 5])
    2.0
    >>> interquartile_range([4, 5, float("nan"), 5])
    0.5
    """
    array = np.asarray(values, dtype=float).ravel()
    array = array[~np.isnan(array)]
    if array.size == 0:
        raise ValueError("the interquartile range needs at least one value (NaN aside)")
    q1, q3 = np.percentile(array, [25, 75])
    return float(q3 - q1)


def spread_of_counts(counts: dict[float, int]) -> float:
    """`interquartile_range` of the values a count profile ({value: how many}) stands for.

    >>> spread_of_counts({1.0: 1, 4.0: 1, 5.0: 2})
    1.75
    """
    values = np.repeat(np.fromiter(counts, dtype=float), np.fromiter(counts.values(), dtype=int))
    return interquartile_range(values)


def column_percentiles(values, q) -> np.ndarray:
    """Per column of a 2-D array (raters x units), the percentiles `q` (0-100) of its values,
    NaN left out, by numpy's default (linear) method and to the last bit, for every column at
    once: `np.nanpercentile` loops over the columns in Python once there is a NaN.

    Returns an array of len(q) x columns. Raises ValueError for a column without a value.

    >>> column_percentiles([[1, 4], [2, 5], [3, float("nan")], [4, 5], [5, float("nan")]],
    ...                    [25, 50, 75])
    array([[2. , 4.5],
           [3. , 5. ],
           [4. , 5. ]])
    """
    array = np.asarray(values, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"column_percentiles needs a 2-D array, not {array.ndim}-D")
    present = ~np.isnan(array)
    n = present.sum(axis=0)
    if (n == 0).any():
        raise ValueError(
            f"column {int(np.argmin(n))} has no value (NaN aside): its percentiles are undefined"
        )
    if present.all():
        return np.percentile(array, q, axis=0)
    ordered = np.sort(array, axis=0)  # NaN sorts last
    columns = np.arange(array.shape[1])
    found = []
    for share in np.asarray(q, dtype=float) / 100:
        position = share * (n - 1)
        low = np.floor(position).astype(int)
        a, b = ordered[low, columns], ordered[np.ceil(position).astype(int), columns]
        t = position - low
        found.append(np.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t))  # as `_lerp`
    return np.array(found)


def interquartile_ranges(values) -> np.ndarray:
    """Per column of a 2-D array (raters x units), `interquartile_range` of its values (NaN
    left out), every column at once; see `column_percentiles`.

    >>> interquartile_ranges([[1, 4], [2, 5], [3, float("nan")], [4, 5], [5, float("nan")]])
    array([2. , 0.5])
    """
    q1, q3 = column_percentiles(values, [25, 75])
    return q3 - q1


def item_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per item of a long frame (item, rater, score): median, q1, q3, iqr and n, sorted by item.

    n counts the raters who answered (a NaN score is no answer); an item nobody answered has
    n = 0 and NaN figures. Quartiles as in `interquartile_range`.

    >>> frame = pd.DataFrame({"item": ["b", "b", "b", "a", "a"],
    ...                       "rater": ["x", "y", "z", "x", "y"],
    ...                       "score": [4, 5, 2, 3, float("nan")]})
    >>> item_summary(frame)
          median   q1   q3  iqr  n
    item
    a        3.0  3.0  3.0  0.0  1
    b        4.0  3.0  4.5  1.5  3
    """
    answers = _long_frame(frame, "frame")
    scores = answers.groupby("item", sort=True)["score"]
    summary = pd.DataFrame(
        {
            "median": scores.median(),
            "q1": scores.quantile(0.25),
            "q3": scores.quantile(0.75),
        }
    )
    summary["iqr"] = summary["q3"] - summary["q1"]
    summary["n"] = scores.count().astype(int)
    return summary


@dataclass(frozen=True)
class Change:
    """How many answers changed between two rounds of the same panel."""

    share: float  # changed / compared; NaN when no answer is in both rounds
    changed: int  # answers in both rounds whose score differs
    compared: int  # answers (item, rater) in both rounds
    only_before: int  # answers in the first round only (not compared)
    only_after: int  # answers in the second round only (not compared)


def share_changed(before: pd.DataFrame, after: pd.DataFrame) -> Change:
    """Share of the answers (item, rater) given in both rounds whose score differs.

    An answer is a row with a score (NaN is no answer). Answers given in only one of the rounds
    (a rater who dropped out or joined, an item added or withdrawn) are left out of the share
    and counted in `only_before` and `only_after`. Scores are compared exactly.

    >>> before = pd.DataFrame({"item": ["a", "a", "b", "b"], "rater": ["x", "y", "x", "y"],
    ...                        "score": [3, 4, 5, 2]})
    >>> after = pd.DataFrame({"item": ["a", "a", "b", "c"], "rater": ["x", "y", "x", "x"],
    ...                       "score": [3, 3, 5, 1]})
    >>> share_changed(before, after)
    Change(share=0.333..., changed=1, compared=3, only_before=1, only_after=1)
    """
    first = _long_frame(before, "before").dropna(subset=["score"])
    second = _long_frame(after, "after").dropna(subset=["score"])
    merged = first.merge(
        second, on=["item", "rater"], how="outer", suffixes=("_before", "_after"), indicator=True
    )
    both = merged[merged["_merge"] == "both"]
    compared = len(both)
    changed = int((both["score_before"] != both["score_after"]).sum())
    return Change(
        share=changed / compared if compared else float("nan"),
        changed=changed,
        compared=compared,
        only_before=int((merged["_merge"] == "left_only").sum()),
        only_after=int((merged["_merge"] == "right_only").sum()),
    )


def _long_frame(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """The item, rater and score columns, scores as floats; one row per (item, rater)."""
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{name} lacks the column(s) {', '.join(missing)} (needs item, rater, score)"
        )
    long = frame.loc[:, list(COLUMNS)].copy()
    long["score"] = long["score"].astype(float)
    repeated = long.duplicated(subset=["item", "rater"])
    if repeated.any():
        first = long.loc[repeated, ["item", "rater"]].iloc[0]
        raise ValueError(
            f"{name} has more than one row for item {first['item']!r} and rater "
            f"{first['rater']!r}; give each rater's answer once"
        )
    return long
