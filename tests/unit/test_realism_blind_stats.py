"""The blind test's statistics against scipy: d' from the normal quantiles, the exact
binomial test, the bootstrap interval's behaviour."""

import pytest
from itsmreview.realism import blind
from scipy.stats import binomtest, norm


@pytest.mark.parametrize(
    ("hits", "n_sim", "alarms", "n_real"),
    [(8, 10, 2, 10), (0, 5, 5, 5), (20, 20, 0, 20), (7, 9, 4, 11)],
)
def test_d_prime_equals_the_corrected_normal_quantiles(hits, n_sim, alarms, n_real):
    expected = norm.ppf((hits + 0.5) / (n_sim + 1)) - norm.ppf((alarms + 0.5) / (n_real + 1))
    assert blind.d_prime(hits, n_sim, alarms, n_real) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("k", "n"), [(15, 20), (10, 20), (0, 7), (37, 60), (59, 60), (1, 1)])
def test_the_binomial_test_equals_scipys(k, n):
    assert blind.binomial_test(k, n) == pytest.approx(binomtest(k, n).pvalue, rel=1e-9)


def test_without_answers_on_both_sides_d_prime_is_undefined_and_says_so():
    with pytest.raises(ValueError, match="both simulated and real"):
        blind.d_prime(3, 0, 1, 4)
    figures = blind.summary([1, 1, 0], [])
    assert figures["d_prime"] is None and figures["accuracy"] == pytest.approx(2 / 3, abs=1e-6)
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        blind.binomial_test(4, 3)


def test_the_interval_is_seeded_and_narrows_with_more_answers():
    small = blind.d_prime_interval([1] * 6 + [0] * 4, [1] * 3 + [0] * 7, seed=5)
    assert small == blind.d_prime_interval([1] * 6 + [0] * 4, [1] * 3 + [0] * 7, seed=5)
    large = blind.d_prime_interval([1] * 60 + [0] * 40, [1] * 30 + [0] * 70, seed=5)
    assert large[1] - large[0] < small[1] - small[0]
    point = blind.d_prime(60, 100, 30, 100)
    assert large[0] < point < large[1]
