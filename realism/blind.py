"""The blind test's statistics (issue 36): experts see fragments, real cases and simulated
ones drawn alike, and say which are simulated. A simulated fragment judged simulated is a hit,
a real one judged simulated a false alarm (signal detection: Macmillan & Creelman 2005,
"Detection Theory: A User's Guide", 2nd ed.).

- d' = z(H) - z(F), with the log-linear correction of Hautus (1995, Behav. Res. Methods 27:46-51)
  so that rates of 0 or 1 stay finite: H = (hits + 0.5) / (simulated + 1), F likewise;
- its interval: a percentile bootstrap, resampling the answers on simulated and on real
  fragments apart (seeded);
- accuracy against chance: the exact two-sided binomial test of correct answers against 1/2
  (the probabilities of every outcome no more likely than the observed one).

Macmillan & Creelman's example: H = 0.8, F = 0.2 gives d' = 1.68 (uncorrected):

>>> round(z(0.8) - z(0.2), 3)
1.683
>>> round(binomial_test(15, 20), 4)
0.0414
"""

import math
from statistics import NormalDist

import numpy as np

RESAMPLES = 2000
SEED = 36
CONFIDENCE = 0.95


def z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def corrected_rate(count: int, n: int) -> float:
    """Hautus's log-linear rate: (count + 0.5) / (n + 1)."""
    return (count + 0.5) / (n + 1)


def d_prime(hits: int, simulated: int, false_alarms: int, real: int) -> float:
    """d' from the corrected hit and false-alarm rates."""
    if simulated < 1 or real < 1:
        raise ValueError("d' needs answers on both simulated and real fragments")
    return z(corrected_rate(hits, simulated)) - z(corrected_rate(false_alarms, real))


def binomial_test(successes: int, n: int, p: float = 0.5) -> float:
    """Exact two-sided binomial test: the probability of every outcome no more likely than
    `successes` of `n`."""
    if not 0 <= successes <= n or n < 1:
        raise ValueError(
            f"a binomial test needs 0 <= successes <= n and n > 0; got {successes}/{n}"
        )
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    observed = pmf[successes] * (1 + 1e-7)
    return min(1.0, sum(q for q in pmf if q <= observed))


def d_prime_interval(
    simulated_answers,
    real_answers,
    *,
    seed: int = SEED,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval of d': `simulated_answers` and `real_answers` are 0/1
    arrays (1: judged simulated), resampled apart."""
    sim = np.asarray(simulated_answers, dtype=float)
    real = np.asarray(real_answers, dtype=float)
    if sim.size == 0 or real.size == 0:
        raise ValueError("d' needs answers on both simulated and real fragments")
    rng = np.random.default_rng(seed)
    hits = sim[rng.integers(0, sim.size, (resamples, sim.size))].sum(1)
    alarms = real[rng.integers(0, real.size, (resamples, real.size))].sum(1)
    inverse = np.vectorize(z)
    values = inverse((hits + 0.5) / (sim.size + 1)) - inverse((alarms + 0.5) / (real.size + 1))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def summary(simulated_answers, real_answers, *, seed: int = SEED) -> dict:
    """Hits, false alarms, accuracy, d' with its interval and the binomial test's p-value."""
    sim, real = list(simulated_answers), list(real_answers)
    hits, alarms = int(sum(sim)), int(sum(real))
    correct = hits + (len(real) - alarms)
    n = len(sim) + len(real)
    out = {
        "answers": n,
        "on_simulated": len(sim),
        "on_real": len(real),
        "hits": hits,
        "false_alarms": alarms,
        "accuracy": round(correct / n, 6) if n else None,
        "p_value": round(binomial_test(correct, n), 6) if n else None,
    }
    if sim and real:
        low, high = d_prime_interval(sim, real, seed=seed)
        out["d_prime"] = round(d_prime(hits, len(sim), alarms, len(real)), 6)
        out["d_prime_interval"] = [round(low, 6), round(high, 6)]
    else:
        out["d_prime"], out["d_prime_interval"] = None, None
    return out
