"""Kendall's W, IQR, item summaries and changed answers (review/gate/concordance.py) against an
independent textbook computation, scipy's Friedman test, published values and hand-built frames;
and the worked example of docs/agreement.md ("Concordance and spread")."""

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from itsmreview.review.gate.concordance import (
    column_percentiles,
    interquartile_range,
    interquartile_ranges,
    item_summary,
    kendalls_w,
    share_changed,
)
from scipy.stats import friedmanchisquare, spearmanr

DOCS = Path(__file__).resolve().parents[2] / "docs" / "agreement.md"


def _average_ranks(scores: list[float]) -> list[float]:
    """Ranks 1..n, tied scores sharing the mean of the ranks they occupy (no scipy)."""
    order = sorted(scores)
    return [
        sum(place + 1 for place, value in enumerate(order) if value == score) / order.count(score)
        for score in scores
    ]


def _textbook_w(ratings, *, correct: bool = True) -> tuple[float, float, float]:
    """W = 12 S / (m^2 (n^3 - n) - m T) written out as Kendall & Gibbons (1990, ch. 6) do:
    S the sum of squared deviations of the rank sums from their mean, T = sum of t^3 - t over
    every rater's tie groups. Returns (W, S, T)."""
    rows = [list(map(float, row)) for row in ratings]
    m, n = len(rows), len(rows[0])
    ranks = [_average_ranks(row) for row in rows]
    rank_sums = [sum(ranks[i][j] for i in range(m)) for j in range(n)]
    mean = sum(rank_sums) / n
    s = sum((total - mean) ** 2 for total in rank_sums)
    t = sum(row.count(value) ** 3 - row.count(value) for row in rows for value in set(row))
    if not correct:
        t = 0
    return 12 * s / (m**2 * (n**3 - n) - m * t), s, t


def _random_scores(seed: int, raters: int, items: int, *, ties: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if ties:
        return rng.integers(1, 6, size=(raters, items)).astype(float)  # a Likert scale
    return rng.normal(size=(raters, items))


# --- Kendall's W ------------------------------------------------------------------------------


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_w_matches_the_textbook_computation(seed, ties):
    raters, items = 2 + seed, 5 + 2 * seed
    scores = _random_scores(seed, raters, items, ties=ties)
    expected, _, t = _textbook_w(scores.tolist())
    assert (t > 0) == ties  # Likert scores of five or more items tie; normal scores do not
    result = kendalls_w(scores)
    assert result.w == pytest.approx(expected, rel=1e-12)
    assert (result.raters, result.items, result.df) == (raters, items, items - 1)
    assert result.chi2 == pytest.approx(raters * (items - 1) * expected, rel=1e-12)


def test_the_tie_correction_raises_w_as_the_formula_says():
    scores = [[5, 4, 4, 1], [4, 4, 3, 1], [5, 3, 3, 2]]
    corrected, s, t = _textbook_w(scores)
    uncorrected, _, _ = _textbook_w(scores, correct=False)
    assert (s, t) == (37.5, 18)
    assert kendalls_w(scores).w == pytest.approx(corrected)
    assert corrected > uncorrected + 0.05


@pytest.mark.parametrize("seed", range(5))
def test_w_without_ties_follows_from_the_mean_spearman_correlation(seed):
    # Kendall & Gibbons (1990, ch. 6): mean pairwise rho = (m W - 1) / (m - 1), untied ranks
    raters = 3 + seed
    scores = _random_scores(100 + seed, raters, 7, ties=False)
    rhos = [spearmanr(a, b).statistic for a, b in itertools.combinations(scores, 2)]
    w = kendalls_w(scores).w
    assert np.mean(rhos) == pytest.approx((raters * w - 1) / (raters - 1), rel=1e-10)


@pytest.mark.parametrize("seed", range(5))
def test_w_without_ties_is_friedmans_statistic_over_m_times_n_minus_1(seed):
    raters, items = 3 + seed, 4 + seed
    scores = _random_scores(200 + seed, raters, items, ties=False)
    friedman = friedmanchisquare(*scores.T)  # one sample per item, a block per rater
    result = kendalls_w(scores)
    assert result.w == pytest.approx(friedman.statistic / (raters * (items - 1)), rel=1e-12)
    assert result.p_value == pytest.approx(friedman.pvalue, rel=1e-10)


@pytest.mark.parametrize("seed", range(5))
def test_with_ties_scipys_friedman_statistic_is_the_tie_corrected_chi2(seed):
    # scipy divides Friedman's statistic by 1 - T / (m n (n^2 - 1)); that makes it m (n - 1)
    # times the tie-corrected W, not the uncorrected one
    raters, items = 4 + seed, 5
    scores = _random_scores(300 + seed, raters, items, ties=True)
    corrected, _, t = _textbook_w(scores.tolist())
    uncorrected, _, _ = _textbook_w(scores.tolist(), correct=False)
    assert t > 0
    friedman = friedmanchisquare(*scores.T)
    result = kendalls_w(scores)
    assert result.chi2 == pytest.approx(friedman.statistic, rel=1e-12)
    assert result.p_value == pytest.approx(friedman.pvalue, rel=1e-10)
    assert friedman.statistic != pytest.approx(raters * (items - 1) * uncorrected, rel=1e-3)
    assert result.w == pytest.approx(corrected, rel=1e-12)


def test_the_siegel_castellan_example_as_desctools_documents_it():
    # Siegel & Castellan (1988) data as in DescTools' KendallW example (three raters, eight
    # items, no ties): W = 0.6560847, Kendall chi-squared = 13.778, df = 7, p-value = 0.05528
    ratings = [[5, 6, 7, 1, 2, 4, 3, 8], [1, 7, 6, 2, 3, 5, 4, 8], [4, 5, 1, 3, 2, 7, 6, 8]]
    result = kendalls_w(ratings)
    assert round(result.w, 7) == 0.6560847
    assert round(result.chi2, 3) == 13.778
    assert result.df == 7
    assert round(result.p_value, 5) == 0.05528


def test_the_anxiety_example_of_irr_and_desctools_with_ties():
    # irr's `anxiety` (20 subjects x 3 raters, many ties); kendall(anxiety, correct = TRUE) in
    # irr: Wt = 0.54, Chisq(19) = 30.8, p = 0.0429; DescTools: W = 0.5396569, chi-squared 30.76,
    # p-value 0.04288
    anxiety = [
        [3, 3, 3, 4, 5, 5, 2, 3, 5, 2, 2, 6, 1, 5, 2, 2, 1, 2, 4, 3],
        [3, 6, 4, 6, 2, 4, 2, 4, 3, 3, 2, 3, 3, 3, 2, 2, 1, 3, 3, 4],
        [2, 1, 4, 4, 3, 2, 1, 6, 1, 1, 1, 2, 3, 3, 1, 1, 3, 3, 2, 2],
    ]
    result = kendalls_w(anxiety)
    assert round(result.w, 7) == 0.5396569
    assert round(result.chi2, 2) == 30.76
    assert round(result.p_value, 5) == 0.04288
    # without the correction W would be 0.502: the published figure needs it
    assert round(_textbook_w(anxiety, correct=False)[0], 3) == 0.502


def test_the_influentialpoints_strawberry_example():
    # InfluentialPoints, "Kendall coefficient of concordance", worked example I: four raters,
    # eight farms; rank sums 31 12 12 15 22 5 22 25, S = 500, W = 500 / 672 = 0.744,
    # k (N - 1) W = 20.83, P = 0.004
    ratings = [
        [8, 4, 2, 3, 5, 1, 6, 7],
        [7, 3, 1, 4, 5, 2, 6, 8],
        [8, 2, 5, 6, 7, 1, 4, 3],
        [8, 3, 4, 2, 5, 1, 6, 7],
    ]
    _, s, _ = _textbook_w(ratings)
    assert s == 500
    result = kendalls_w(ratings)
    assert round(result.w, 3) == 0.744
    assert round(result.chi2, 2) == 20.83
    assert round(result.p_value, 3) == 0.004


def test_identical_orders_give_1_and_opposite_orders_of_two_raters_give_0():
    assert kendalls_w([[1, 2, 3, 4]] * 3).w == pytest.approx(1.0)
    # the same ties in every rater: still complete agreement, thanks to the correction
    assert kendalls_w([[1, 1, 2, 3]] * 4).w == pytest.approx(1.0)
    assert kendalls_w([[1, 2, 3, 4], [4, 3, 2, 1]]).w == pytest.approx(0.0)
    # the direction of the scale does not matter when every rater uses the same one
    scores = _random_scores(7, 4, 6, ties=True)
    assert kendalls_w(-scores).w == pytest.approx(kendalls_w(scores).w)


@pytest.mark.parametrize("ratings", [[[3, 3, 3], [4, 4, 4]], [[2, 2], [2, 2], [2, 2]]])
def test_w_is_nan_when_no_rater_orders_anything(ratings):
    result = kendalls_w(ratings)
    assert math.isnan(result.w) and math.isnan(result.chi2) and math.isnan(result.p_value)
    assert (result.raters, result.items) == (len(ratings), len(ratings[0]))


def test_one_rater_who_ties_everything_leaves_w_defined():
    result = kendalls_w([[3, 3, 3], [1, 2, 3], [1, 2, 3]])
    assert result.w == pytest.approx(_textbook_w([[3, 3, 3], [1, 2, 3], [1, 2, 3]])[0])
    assert 0 < result.w < 1


@pytest.mark.parametrize(
    ("ratings", "message"),
    [
        ([1, 2, 3], "2-D"),
        ([[[1, 2], [3, 4]]], "2-D"),
        ([[1, 2, 3]], "at least 2 raters and 2 items"),
        ([[1], [2], [3]], "at least 2 raters and 2 items"),
        ([[1, 2, float("nan")], [1, 2, 3]], "missing"),
        ([[1, 2, float("inf")], [1, 2, 3]], "infinite"),
    ],
)
def test_kendalls_w_refuses_what_it_cannot_rank(ratings, message):
    with pytest.raises(ValueError, match=message):
        kendalls_w(ratings)


# --- interquartile range ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_iqr_matches_numpy_percentile_and_pandas_quantile(seed):
    rng = np.random.default_rng(400 + seed)
    values = rng.integers(1, 8, size=5 + 3 * seed).astype(float)
    values[rng.random(values.size) < 0.2] = np.nan
    present = values[~np.isnan(values)]
    by_numpy = np.percentile(present, 75) - np.percentile(present, 25)
    series = pd.Series(values)  # quantile skips NaN
    by_pandas = series.quantile(0.75) - series.quantile(0.25)
    assert interquartile_range(values) == pytest.approx(by_numpy) == pytest.approx(by_pandas)
    assert interquartile_range(values.tolist()) == interquartile_range(values)


def test_iqr_by_hand():
    # linear method: Q1 at position 0.25 (n - 1) of the sorted values, Q3 at 0.75 (n - 1)
    assert interquartile_range([1, 2, 3, 4]) == pytest.approx(3.25 - 1.75)
    assert interquartile_range([7]) == 0.0
    assert interquartile_range([2, 4, 4]) == pytest.approx(4 - 3)


@pytest.mark.parametrize("values", [[], [float("nan"), float("nan")]])
def test_iqr_needs_a_value(values):
    with pytest.raises(ValueError, match="at least one value"):
        interquartile_range(values)


@pytest.mark.parametrize("seed", range(5))
def test_iqr_per_column_is_interquartile_range_of_each_column_to_the_bit(seed):
    # what a Delphi phase's figures take per task: raters x tasks, some answers missing
    rng = np.random.default_rng(500 + seed)
    matrix = rng.normal(3, 1.2, size=(2 + 3 * seed, 400)).round(1 + seed % 2)
    matrix[rng.random(matrix.shape) < 0.25 * (seed % 3)] = np.nan
    matrix[0, np.isnan(matrix).all(axis=0)] = 3.0  # every column holds a value
    found = interquartile_ranges(matrix)
    assert found.tolist() == [interquartile_range(column) for column in matrix.T]
    quartiles = column_percentiles(matrix, [25, 50, 75])
    expected = [np.percentile(c[~np.isnan(c)], [25, 50, 75]).tolist() for c in matrix.T]
    assert quartiles.T.tolist() == expected


def test_iqr_per_column_needs_a_value_in_every_column():
    with pytest.raises(ValueError, match="column 1 has no value"):
        interquartile_ranges([[1.0, float("nan")], [2.0, float("nan")]])


# --- item summary -----------------------------------------------------------------------------


def _long(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["item", "rater", "score"])


def test_item_summary_of_a_hand_built_frame():
    frame = _long(
        [
            ("t2", "ann", 4),
            ("t2", "bob", 2),
            ("t2", "cy", 4),
            ("t2", "dee", 5),
            ("t1", "ann", 3),
            ("t1", "bob", np.nan),  # bob left t1 unanswered
            ("t3", "ann", np.nan),  # nobody answered t3
        ]
    )
    expected = pd.DataFrame(
        {
            "median": [3.0, 4.0, np.nan],
            # t2 sorted 2 4 4 5: Q1 = 2 + 0.75 * 2 = 3.5, Q3 = 4 + 0.25 * 1 = 4.25
            "q1": [3.0, 3.5, np.nan],
            "q3": [3.0, 4.25, np.nan],
            "iqr": [0.0, 0.75, np.nan],
            "n": [1, 4, 0],
        },
        index=pd.Index(["t1", "t2", "t3"], name="item"),
    )
    pd.testing.assert_frame_equal(item_summary(frame), expected, check_index_type=False)


def test_item_summary_agrees_with_interquartile_range():
    rng = np.random.default_rng(5)
    frame = _long(
        [(item, rater, float(rng.integers(1, 6))) for item in "dcba" for rater in range(7)]
    )
    summary = item_summary(frame)
    assert list(summary.index) == ["a", "b", "c", "d"]
    for item, scores in frame.groupby("item")["score"]:
        assert summary.loc[item, "iqr"] == pytest.approx(interquartile_range(scores))
        assert summary.loc[item, "median"] == np.median(scores)


def test_item_summary_refuses_missing_columns_and_repeated_answers():
    with pytest.raises(ValueError, match="lacks the column"):
        item_summary(pd.DataFrame({"item": ["a"], "score": [1]}))
    with pytest.raises(ValueError, match="more than one row for item 'a' and rater 'x'"):
        item_summary(_long([("a", "x", 1), ("a", "x", 2)]))


# --- share changed ----------------------------------------------------------------------------


def test_share_changed_of_hand_built_rounds():
    before = _long(
        [
            ("a", "x", 3),
            ("a", "y", 4),
            ("b", "x", 5),
            ("b", "y", 2),
            ("b", "z", 1),  # z drops out
            ("c", "x", np.nan),  # no answer, then an answer: not compared
        ]
    )
    after = _long(
        [
            ("a", "x", 3),
            ("a", "y", 5),  # changed
            ("b", "x", 5.0),  # the same score as a float
            ("b", "y", 1),  # changed
            ("c", "x", 2),
            ("d", "y", 4),  # a new item
        ]
    )
    change = share_changed(before, after)
    assert (change.changed, change.compared) == (2, 4)
    assert change.share == 0.5
    assert (change.only_before, change.only_after) == (1, 2)


def test_share_changed_with_nothing_in_common_is_nan():
    change = share_changed(_long([("a", "x", 1)]), _long([("a", "y", 1)]))
    assert math.isnan(change.share)
    assert (change.changed, change.compared, change.only_before, change.only_after) == (0, 0, 1, 1)


def test_share_changed_refuses_missing_columns_and_repeated_answers():
    good = _long([("a", "x", 1)])
    with pytest.raises(ValueError, match="after lacks the column"):
        share_changed(good, pd.DataFrame({"item": ["a"], "rater": ["x"]}))
    with pytest.raises(ValueError, match="before has more than one row"):
        share_changed(_long([("a", "x", 1), ("a", "x", 1)]), good)


# --- the worked example of docs/agreement.md --------------------------------------------------

# raters A, B, C (rows) x tasks t1..t4, round 1 and round 2 (C moves t2 from 2 to 4)
ROUND_1 = [[5, 4, 2, 1], [4, 4, 3, 1], [5, 2, 3, 2]]
ROUND_2 = [[5, 4, 2, 1], [4, 4, 3, 1], [5, 4, 3, 2]]


def _as_long(ratings) -> pd.DataFrame:
    return _long(
        [
            (f"t{item + 1}", rater, score)
            for rater, row in zip("ABC", ratings, strict=True)
            for item, score in enumerate(row)
        ]
    )


def test_the_documented_example_gives_the_documented_figures():
    first, second = kendalls_w(ROUND_1), kendalls_w(ROUND_2)
    assert _textbook_w(ROUND_1)[1:] == (32.5, 12)
    assert first.w == pytest.approx(390 / 504)
    assert round(first.w, 3) == 0.774
    assert round(_textbook_w(ROUND_1, correct=False)[0], 3) == 0.722
    assert round(first.chi2, 2) == 6.96 and first.df == 3
    assert round(first.p_value, 3) == 0.073
    assert _textbook_w(ROUND_2)[1:] == (42.5, 6)
    assert second.w == pytest.approx(510 / 522)
    assert round(second.w, 3) == 0.977
    assert round(second.chi2, 2) == 8.79
    assert round(second.p_value, 3) == 0.032

    summary = item_summary(_as_long(ROUND_1))
    assert summary["median"].tolist() == [5, 4, 3, 1]
    assert summary["q1"].tolist() == [4.5, 3, 2.5, 1]
    assert summary["q3"].tolist() == [5, 4, 3, 1.5]
    assert summary["iqr"].tolist() == [0.5, 1, 0.5, 0.5]
    assert item_summary(_as_long(ROUND_2)).loc["t2", "iqr"] == 0

    change = share_changed(_as_long(ROUND_1), _as_long(ROUND_2))
    assert (change.changed, change.compared) == (1, 12)
    assert round(change.share, 3) == 0.083

    section = DOCS.read_text().split("## Concordance and spread (for consensus rounds)")[1]
    for figure in ("0.774", "0.722", "6.96", "0.073", "0.977", "8.79", "0.032", "0.083"):
        assert figure in section, figure
    assert "test_the_documented_example_gives_the_documented_figures" in section
