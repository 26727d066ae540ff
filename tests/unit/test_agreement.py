"""Agreement statistics against published values and independent computations."""

import itertools

import krippendorff
import numpy as np
import pytest
from itsmreview.review.gate.agreement import (
    alpha,
    alpha_from_coincidences,
    alpha_of_counts,
    bootstrap_draws,
    dense_codes,
    gwet_ac,
    gwet_of_counts,
    item_dispersion,
    leave_one_rater_out,
    leave_one_rater_out_long,
    rater_bias,
    rater_bias_long,
    unit_coincidences,
    unit_profiles,
    value_counts,
)
from itsmreview.review.gate.approval import GateConfig, TaskRatings, decide
from itsmreview.review.gate.reliability_csv import read_reliability_csv

nan = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)
PUBLISHED = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
LEVELS = list(PUBLISHED)


@pytest.mark.parametrize("level", LEVELS)
def test_reproduces_the_published_worked_example(level):
    result = alpha(KRIPPENDORFF_2011, level)
    assert round(result.value, 3) == PUBLISHED[level]
    assert (result.units, result.pairable_values) == (11, 40)


def random_ratings(seed, raters=6, units=40, values=5, missing=0.3):
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, values + 1, size=units)
    data = np.clip(truth + rng.integers(-1, 2, size=(raters, units)), 1, values).astype(float)
    data[rng.random((raters, units)) < missing] = nan
    return data


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_coincidence_alpha_equals_the_krippendorff_package(level, seed):
    data = random_ratings(seed)
    counts, values = value_counts(data)
    coincidences = unit_coincidences(counts).sum(axis=0)
    ours = alpha_from_coincidences(coincidences, values, level)
    assert ours == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement=level), abs=1e-12
    )


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_bootstrap_equals_a_slow_reference_bootstrap(level):
    data = random_ratings(7, raters=4, units=25)
    samples, seed = 200, 11
    fast = alpha(data, level, bootstrap=samples, seed=seed)
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    columns = data[:, pairable]
    counts, _ = value_counts(columns)
    _, first, frequency = unit_profiles(counts)
    draws = np.concatenate(list(bootstrap_draws(seed, samples, frequency)))
    assert draws.shape == (samples, len(frequency))
    assert (draws.sum(axis=1) == columns.shape[1]).all()  # each resample has every unit's size
    reference = []
    for draw in draws:  # each profile stands for its units; a resample repeats it as drawn
        resample = columns[:, np.repeat(first, draw)]
        try:
            reference.append(
                krippendorff.alpha(reliability_data=resample, level_of_measurement=level)
            )
        except ValueError:  # a resample with a single value has no alpha
            continue
    low, high = np.percentile(reference, [2.5, 97.5])
    assert (fast.ci_low, fast.ci_high) == pytest.approx((low, high), abs=1e-9)
    assert fast.ci_low <= fast.value <= fast.ci_high


@pytest.mark.parametrize(
    "scale",
    [
        [-3.0, 0.0, 7.0],  # integers with gaps and a negative: counted per scale point
        [0.5, 1.25, 2.0],  # not integers: sorted
        [1.0, 2.0, 2.5],  # mostly integers
        [1.0, 5000.0],  # integers too far apart to count per scale point
    ],
)
def test_value_counts_equals_counting_by_hand(scale):
    rng = np.random.default_rng(5)
    data = rng.choice(scale, size=(6, 40))
    data[rng.random(data.shape) < 0.3] = nan
    counts, values = value_counts(data)
    present = sorted({v for v in data.ravel() if v == v})
    assert values.tolist() == present
    for unit in range(data.shape[1]):
        column = data[:, unit]
        assert counts[unit].tolist() == [float(np.sum(column == v)) for v in present]


def test_bootstrap_draws_follow_a_resample_of_the_units():
    """Drawing 60 units with replacement, by profile: each profile is drawn in proportion to
    its units (chi-square over 4,000 resamples), and two units with one profile are one."""
    counts = np.array([[2, 0], [0, 2], [1, 1], [2, 0]] * 15)
    profiles, first, frequency = unit_profiles(counts)
    assert profiles.tolist() == [[0, 2], [1, 1], [2, 0]] and frequency.tolist() == [15, 15, 30]
    assert (counts[first] == profiles).all()
    draws = np.concatenate(list(bootstrap_draws(3, 4000, frequency)))
    totals = draws.sum(axis=0)
    expected = 4000 * 60 * frequency / 60
    chi2 = ((totals - expected) ** 2 / expected).sum()
    assert chi2 < 14  # two degrees of freedom; p < 0.001 beyond 13.8
    per_resample = draws[:, 2].var()
    assert per_resample == pytest.approx(60 * 0.5 * 0.5, rel=0.1)  # binomial variance


def test_edge_cases():
    perfect = np.array([[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, nan]])
    assert alpha(perfect, "nominal").value == 1.0
    single_value = np.array([[3, 3, 3], [3, 3, nan]])
    result = alpha(single_value, "ordinal")
    assert result.value is None and "same value" in result.reason
    no_pairs = np.array([[1, nan, 3], [nan, 2, nan]])
    result = alpha(no_pairs, "nominal")
    assert result.value is None and result.reason == "no unit has two or more ratings"
    single_unit = np.array([[1.0], [2.0], [2.0]])
    assert alpha(single_unit, "nominal").value == pytest.approx(
        krippendorff.alpha(reliability_data=single_unit, level_of_measurement="nominal")
    )
    with_lonely = np.column_stack([KRIPPENDORFF_2011, [7, nan, nan, nan]])
    assert alpha(with_lonely, "interval").value == alpha(KRIPPENDORFF_2011, "interval").value
    with pytest.raises(ValueError, match="level of measurement 'likert'"):
        alpha(perfect, "likert")


def test_leave_one_rater_out_and_bias_against_direct_computation():
    data = random_ratings(5, raters=5, units=30)
    loo = leave_one_rater_out(data, "ordinal")
    for rater in range(5):
        expected = krippendorff.alpha(
            reliability_data=np.delete(data, rater, axis=0), level_of_measurement="ordinal"
        )
        assert loo[rater] == pytest.approx(expected)
    bias = rater_bias(data)
    for rater in range(5):
        differences = []
        for unit in range(data.shape[1]):
            own = data[rater, unit]
            others = [data[r, unit] for r in range(5) if r != rater and not np.isnan(data[r, unit])]
            if not np.isnan(own) and others:
                differences.append(own - np.mean(others))
        assert bias[rater] == pytest.approx(np.mean(differences))
    dispersion = item_dispersion(data)
    assert dispersion["sd"][0] == pytest.approx(np.nanstd(data[:, 0]))


def gwet_reference(data, weights, categories):
    """Gwet (2014) eq. 3.8-3.10 written out with loops."""
    q = len(categories)
    span = categories[-1] - categories[0]

    def w(k, j):
        if weights == "identity":
            return float(k == j)
        if weights == "quadratic":
            return 1 - ((categories[k] - categories[j]) / span) ** 2
        return 1 - abs(categories[k] - categories[j]) / span

    units = [[v for v in data[:, i] if not np.isnan(v)] for i in range(data.shape[1])]
    r = [[sum(1 for v in u if v == c) for c in categories] for u in units]
    pa_terms = []
    for counts in r:
        n = sum(counts)
        if n >= 2:
            total = sum(
                counts[k] * (sum(w(k, j) * counts[j] for j in range(q)) - 1) for k in range(q)
            )
            pa_terms.append(total / (n * (n - 1)))
    pa = np.mean(pa_terms)
    pis = [np.mean([counts[k] / sum(counts) for counts in r if sum(counts) >= 1]) for k in range(q)]
    tw = sum(w(k, j) for k, j in itertools.product(range(q), repeat=2))
    pe = tw / (q * (q - 1)) * sum(p * (1 - p) for p in pis)
    return (pa - pe) / (1 - pe)


@pytest.mark.parametrize("weights", ["identity", "linear", "quadratic"])
def test_gwet_ac_equals_a_loop_implementation(weights):
    data = random_ratings(9, raters=4, units=30)
    categories = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert gwet_ac(data, weights, categories=categories).value == pytest.approx(
        gwet_reference(data, weights, categories)
    )


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_from_hand_counted_units_equals_the_package_on_the_matrix(level):
    """Counts per unit made by hand (no code under test), with units that have one rating
    and a value seen only there, give the package's alpha of the raters x units matrix."""
    data = random_ratings(11, raters=5, units=40)
    data[1:, 0] = nan  # a unit with one rating
    data[0, 0] = 7.0  # whose value no pairable unit has
    values = np.unique(data[~np.isnan(data)])
    counts = np.array([[np.sum(data[:, u] == v) for v in values] for u in range(data.shape[1])])
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    result = alpha_of_counts(counts, values, level, bootstrap=100, seed=3)
    assert result.value == pytest.approx(expected)
    direct = alpha(data, level, bootstrap=100, seed=3)
    assert (result.units, result.pairable_values) == (direct.units, direct.pairable_values)
    assert (result.ci_low, result.ci_high) == pytest.approx((direct.ci_low, direct.ci_high))
    for weights in ("identity", "quadratic"):
        assert gwet_of_counts(counts, values, weights, [1, 2, 3, 4, 5]).value == pytest.approx(
            gwet_reference(data, weights, [1.0, 2.0, 3.0, 4.0, 5.0, 7.0])
        )


def test_gwet_ac1_stays_high_when_alpha_collapses_on_skewed_ratings():
    skewed = np.full((3, 40), 5.0)
    skewed[0, 3] = 4.0
    skewed[1, 17] = 4.0
    assert alpha(skewed, "nominal").value < 0.1  # the prevalence paradox
    assert gwet_ac(skewed, "identity", categories=[1, 2, 3, 4, 5]).value > 0.9


def test_reliability_csv(tmp_path):
    path = tmp_path / "r.csv"
    rows = [["rater", *[f"u{i}" for i in range(12)]]]
    for name, values in zip("ABCD", KRIPPENDORFF_2011, strict=True):
        rows.append([name, *["" if np.isnan(v) else str(int(v)) for v in values]])
    path.write_text("\n".join(",".join(r) for r in rows) + "\n")
    data = read_reliability_csv(path)
    np.testing.assert_array_equal(np.isnan(data), np.isnan(KRIPPENDORFF_2011))
    assert round(alpha(data, "ordinal").value, 3) == 0.815
    labels = tmp_path / "l.csv"
    labels.write_text("u1,u2,u3\naccept,reject,accept\naccept,revise,\n")
    assert read_reliability_csv(labels, "nominal").shape == (2, 3)
    with pytest.raises(ValueError, match=r"row 2, column 'u2': 'reject' is not a number"):
        read_reliability_csv(labels, "ordinal")


def test_gate_decisions():
    config = GateConfig(
        k_min=3, gating_dimensions=("realism", "clarity"), blocking_flags=("unsafe",)
    )
    good = TaskRatings({"realism": [4, 5, 4], "clarity": [5, 4, 4]}, ["accept"] * 3, [[]] * 3)
    alphas = {"realism": 0.81, "clarity": 0.7}
    assert decide(good, config, alphas).status == "approved"
    flagged = TaskRatings(good.scores, good.verdicts, [["unsafe"], [], []])
    assert decide(flagged, config, alphas).status == "adjudication"
    assert decide(flagged, config, alphas).reasons == ["blocking flag: unsafe"]
    other = TaskRatings({**good.scores, "tone": [1, 5, 3]}, good.verdicts, [[]] * 3)
    assert decide(other, config, alphas).reasons == ["ratings of tone span 4 points"]
    low = TaskRatings({"realism": [3, 3, 4], "clarity": [5, 4, 4]}, ["accept"] * 3, [[]] * 3)
    assert decide(low, config, alphas).reasons == ["median realism is 3, below 4"]
    conflict = TaskRatings(good.scores, ["accept", "accept", "reject"], [[]] * 3)
    assert decide(conflict, config, alphas).status == "adjudication"
    spread = TaskRatings({"realism": [1, 4, 5], "clarity": [5, 4, 4]}, ["accept"] * 3, [[]] * 3)
    assert decide(spread, config, alphas).status == "adjudication"
    rejected = TaskRatings(good.scores, ["reject", "reject", "revise"], [[]] * 3)
    assert decide(rejected, config, alphas).status == "rejected"
    assert decide(good, config, {"realism": None, "clarity": 0.9}).status == "pending"
    assert decide(conflict, config, alphas, adjudication="accept").status == "approved"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", [4, 5])
def test_per_rater_figures_from_long_form_equal_the_matrix_ones(level, seed):
    """Leave-one-rater-out alpha and bias from ratings in long form (taking a rater out of
    the coincidence matrix) against recomputing on the matrix without that rater."""
    data = random_ratings(seed, raters=7, units=35, missing=0.45)
    data[3] = nan  # a rater who rated nothing is simply absent in long form
    data[5, :] = nan
    data[5, 0] = 2.0  # a rater whose only unit has no other rating
    data[:, 0] = nan
    data[5, 0] = 2.0
    raters, units = np.nonzero(~np.isnan(data))
    values = data[raters, units]
    ids = raters * 10 + 100  # any ids, not row numbers
    long_loo = leave_one_rater_out_long(ids, units, values, level)
    long_bias = rater_bias_long(ids, units, values)
    matrix_loo = leave_one_rater_out(data, level)
    matrix_bias = rater_bias(data)
    for row in sorted(set(raters.tolist())):
        expected = matrix_loo[row]
        got = long_loo[row * 10 + 100]
        assert (got is None) == (expected is None), row
        if expected is not None:
            assert got == pytest.approx(expected), row
        if np.isnan(matrix_bias[row]):
            assert long_bias[row * 10 + 100] is None
        else:
            assert long_bias[row * 10 + 100] == pytest.approx(matrix_bias[row])
    assert set(long_loo) == {r * 10 + 100 for r in set(raters.tolist())}


@pytest.mark.parametrize(
    "array",
    [
        np.array([5, 3, 5, 9, -2]),
        np.array([4.0, 1.0, 4.0, 2.0]),
        np.array([0.5, 1.5, 0.5]),  # not integers: sorted
        np.array([1, 10**9, 3]),  # too wide: sorted
        np.array([], dtype=float),
    ],
)
def test_dense_codes_equal_numpy_unique(array):
    found, codes = dense_codes(array)
    expected, inverse = np.unique(array, return_inverse=True)
    assert found.tolist() == expected.tolist() and codes.tolist() == inverse.tolist()


@pytest.mark.parametrize("largest", [1, 3, 60])
def test_unit_profiles_equal_numpys_row_unique(largest):
    """Rows encoded as integers give what numpy's unique over rows gives (profiles in the
    same order, the first unit of each, how many units share it), up to a base where the
    code falls back to numpy itself (60 ** 11 does not fit)."""
    generator = np.random.default_rng(largest)
    counts = generator.integers(0, largest + 1, size=(5_000, 11)).astype(float)
    counts[::7] = counts[3]  # shared profiles
    expected = np.unique(counts, axis=0, return_index=True, return_counts=True)
    for got, want in zip(unit_profiles(counts), expected, strict=True):
        np.testing.assert_array_equal(got, want)
