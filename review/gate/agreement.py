"""Agreement statistics over reliability data: Krippendorff's alpha with a bootstrap
confidence interval, leave-one-rater-out alpha, rater bias, item dispersion and Gwet's AC1/AC2.

Reliability data is a (raters x units) float array with NaN for a missing rating, as in
Krippendorff (2011) and the `krippendorff` package. The point estimate of alpha comes from
that package; the bootstrap resamples units and reuses per-unit coincidence matrices, so
1,000 samples cost a few alpha computations, not 1,000.

Krippendorff's worked example ("Computing Krippendorff's Alpha-Reliability", 2011):

>>> nan = float("nan")
>>> data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
...         [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
...         [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
...         [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
>>> [round(alpha(data, level).value, 3) for level in ("nominal", "ordinal", "interval", "ratio")]
[0.743, 0.815, 0.849, 0.797]
"""

import warnings
from dataclasses import dataclass
from typing import Literal

import krippendorff
import numpy as np

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")


@dataclass(frozen=True)
class Alpha:
    """Alpha of one dimension. `value` is None when alpha is undefined; `reason` says why."""

    value: float | None
    level: str
    units: int  # units with at least two ratings (pairable units)
    pairable_values: int  # ratings in pairable units
    ci_low: float | None = None
    ci_high: float | None = None
    samples: int = 0
    reason: str | None = None

    def as_dict(self) -> dict:
        return {
            "alpha": self.value,
            "level": self.level,
            "units": self.units,
            "pairable_values": self.pairable_values,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "bootstrap_samples": self.samples,
            "undefined_reason": self.reason,
        }


def _as_array(data) -> np.ndarray:
    array = np.asarray(data, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"reliability data must be 2-D (raters x units), got shape {array.shape}")
    if np.isinf(array).any():
        raise ValueError("reliability data holds an infinite value; ratings must be finite")
    return array


def value_counts(data) -> tuple[np.ndarray, np.ndarray]:
    """Per unit, how many ratings took each value: (units x values) counts, and the values."""
    array = _as_array(data)
    present = ~np.isnan(array)
    if present.any():
        low, high = np.nanmin(array), np.nanmax(array)
        if high - low < SMALL_INTEGER_RANGE:
            # integer scales (Likert, verdict codes): one comparison per scale point, kept
            # when the points account for every rating
            levels = low + np.arange(int(high - low) + 1, dtype=float)
            counts = np.stack([(array == level).sum(axis=0) for level in levels], axis=1)
            if counts.sum() == present.sum():
                used = counts.any(axis=0)
                return counts[:, used].astype(float), levels[used]
    _, units = np.nonzero(present)
    ratings = array[present]
    values = np.unique(ratings)
    codes = np.searchsorted(values, ratings)
    n_units = array.shape[1]
    flat = np.bincount(units * len(values) + codes, minlength=n_units * len(values))
    return flat.reshape(n_units, len(values)).astype(float), values


SMALL_INTEGER_RANGE = 32


def unit_coincidences(counts: np.ndarray) -> np.ndarray:
    """Per pairable unit u, its coincidence matrix o_u[c, k] = n_uc (n_uk - [c == k]) /
    (m_u - 1); units with fewer than two ratings contribute nothing. Shape (units, V, V)."""
    m = counts.sum(axis=1)
    pairable = m >= 2
    outer = counts[:, :, None] * counts[:, None, :]
    diagonal = np.einsum("uv,vw->uvw", counts, np.eye(counts.shape[1]))
    scale = np.where(pairable, 1.0 / np.where(pairable, m - 1, 1), 0.0)
    return (outer - diagonal) * scale[:, None, None]


def _squared_distances(level: str, values: np.ndarray, marginals: np.ndarray) -> np.ndarray:
    """delta^2 for each pair of values; marginals n_c (per sample for the ordinal metric).
    `marginals` may be (V,) or (B, V); returns (V, V) or (B, V, V)."""
    if level == "nominal":
        return 1.0 - np.eye(len(values))
    if level == "interval":
        return (values[:, None] - values[None, :]) ** 2
    if level == "ratio":
        total = values[:, None] + values[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(total == 0, 0.0, (values[:, None] - values[None, :]) / total)
        return ratio**2
    if level == "ordinal":
        cumulative = np.cumsum(marginals, axis=-1)
        # sum of n_g for g between c and k (inclusive) minus (n_c + n_k) / 2
        c_idx = np.arange(len(values))
        low, high = np.minimum.outer(c_idx, c_idx), np.maximum.outer(c_idx, c_idx)
        before_low = np.take(
            np.concatenate([np.zeros(marginals.shape[:-1] + (1,)), cumulative], axis=-1),
            low,
            axis=-1,
        )
        upto_high = np.take(cumulative, high, axis=-1)
        between = upto_high - before_low
        n_c = np.take(marginals, low, axis=-1)
        n_k = np.take(marginals, high, axis=-1)
        return (between - (n_c + n_k) / 2) ** 2
    raise ValueError(f"level of measurement {level!r} is not one of {', '.join(LEVELS)}")


def alpha_from_coincidences(coincidences: np.ndarray, values: np.ndarray, level: str) -> np.ndarray:
    """Alpha from one (V, V) or many (B, V, V) coincidence matrices; NaN where undefined."""
    marginals = coincidences.sum(axis=-1)
    n = marginals.sum(axis=-1)
    delta = _squared_distances(level, values, marginals)
    observed = (coincidences * delta).sum(axis=(-2, -1))
    expected_pairs = marginals[..., :, None] * marginals[..., None, :]
    expected = (expected_pairs * delta).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected > 0, 1.0 - (n - 1) * observed / expected, np.nan)


def alpha(
    data, level: Level = "ordinal", *, bootstrap: int = 0, seed: int = 0, confidence: float = 0.95
) -> Alpha:
    """Krippendorff's alpha of reliability data (raters x units, NaN = missing).

    Units with fewer than two ratings are ignored, as the method requires. Alpha is
    undefined (value None, with the reason) when no unit has two ratings or when every
    pairable rating has the same value. With `bootstrap` > 0, a percentile interval from
    that many resamples of the pairable units (seeded).
    """
    if level not in LEVELS:
        raise ValueError(f"level of measurement {level!r} is not one of {', '.join(LEVELS)}")
    if bootstrap < 0:
        raise ValueError(
            f"bootstrap must be 0 (no interval) or a number of samples, not {bootstrap}"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie between 0 and 1, e.g. 0.95, not {confidence}")
    counts, values = value_counts(_as_array(data))
    return alpha_of_counts(
        counts, values, level, bootstrap=bootstrap, seed=seed, confidence=confidence
    )


def alpha_of_counts(
    counts: np.ndarray,
    values: np.ndarray,
    level: Level = "ordinal",
    *,
    bootstrap: int = 0,
    seed: int = 0,
    confidence: float = 0.95,
) -> Alpha:
    """Alpha from per-unit value counts (units x values, as `value_counts` returns them, units
    in a stable order): what `alpha` computes, without a raters x units array. The bootstrap
    resamples the pairable units (by their profiles, `bootstrap_draws`)."""
    if level not in LEVELS:
        raise ValueError(f"level of measurement {level!r} is not one of {', '.join(LEVELS)}")
    counts = np.asarray(counts, dtype=float).reshape(-1, len(values))
    values = np.asarray(values, dtype=float)
    m = counts.sum(axis=1)
    pairable = m >= 2
    units, pairable_values = int(pairable.sum()), int(m[pairable].sum())
    if units == 0:
        return Alpha(None, level, 0, 0, reason="no unit has two or more ratings")
    used = counts[pairable].sum(axis=0) > 0
    if np.count_nonzero(used) < 2:
        return Alpha(
            None,
            level,
            units,
            pairable_values,
            reason="every pairable rating has the same value (no variation)",
        )
    if level == "ratio" and values[used].min() < 0:
        raise ValueError("ratio data cannot have negative values")
    paired, domain = counts[pairable][:, used], values[used]
    point = float(
        krippendorff.alpha(value_counts=paired, value_domain=domain, level_of_measurement=level)
    )
    if not bootstrap:
        return Alpha(point, level, units, pairable_values)
    samples = _resampled_coincidences(paired, bootstrap, seed)
    estimates = alpha_from_coincidences(samples, domain, level)
    estimates = estimates[~np.isnan(estimates)]
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail]) if len(estimates) else (np.nan, np.nan)
    return Alpha(point, level, units, pairable_values, float(low), float(high), bootstrap)


BOOTSTRAP_BLOCK = 25


def unit_profiles(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of per-unit value counts (profiles, P x V), the first unit of each
    and how many units share it. Units with the same counts weigh alike in alpha, so a
    resample of the units is fully told by how often it drew each profile."""
    counts = np.asarray(counts)
    if counts.size and counts.min() >= 0 and np.array_equal(counts, np.floor(counts)):
        # each row as one integer whose digits (base: the largest count + 1) are its counts:
        # the same order as the rows', found by a 1-D sort, not a sort of row records
        base, width = int(counts.max()) + 1, counts.shape[1]
        if base**width < 2**62:
            digits = base ** np.arange(width - 1, -1, -1, dtype=np.int64)
            keys = counts.astype(np.int64) @ digits
            _, first, frequency = np.unique(keys, return_index=True, return_counts=True)
            return counts[first], first, frequency
    profiles, first, frequency = np.unique(counts, axis=0, return_index=True, return_counts=True)
    return profiles, first, frequency


def bootstrap_draws(seed: int, samples: int, frequency: np.ndarray):
    """Blocks of up to BOOTSTRAP_BLOCK resamples (rows) of `frequency.sum()` units drawn
    uniformly with replacement, as the number of draws of each profile (columns): a
    multinomial over the profiles' shares, the exact law of a unit-by-unit resample."""
    generator = np.random.Generator(np.random.SFC64(seed))
    units = int(frequency.sum())
    shares = frequency / units
    for start in range(0, samples, BOOTSTRAP_BLOCK):
        yield generator.multinomial(units, shares, size=min(BOOTSTRAP_BLOCK, samples - start))


def _resampled_coincidences(counts: np.ndarray, samples: int, seed: int) -> np.ndarray:
    """Coincidence matrices (samples, V, V) of `samples` resamples of the units (per-unit
    value counts, all pairable), each the drawn profiles' matrices weighted by their draws
    (upper triangles only: they are symmetric). A few dozen profiles on a rating scale, so
    the cost hardly grows with the units."""
    profiles, _, frequency = unit_profiles(counts)
    n_values = counts.shape[1]
    upper = np.triu_indices(n_values)
    features = np.ascontiguousarray(unit_coincidences(profiles)[:, upper[0], upper[1]])
    sums = np.empty((samples, features.shape[1]))
    done = 0
    for draws in bootstrap_draws(seed, samples, frequency):
        n = len(draws)
        np.matmul(draws.astype(float), features, out=sums[done : done + n])
        done += n
    matrices = np.empty((samples, n_values, n_values))
    matrices[:, upper[0], upper[1]] = sums
    matrices[:, upper[1], upper[0]] = sums
    return matrices


def leave_one_rater_out(data, level: Level = "ordinal") -> list[float | None]:
    """Alpha without each rater in turn (index = rater row); None where undefined."""
    array = _as_array(data)
    out = []
    for rater in range(array.shape[0]):
        result = alpha(np.delete(array, rater, axis=0), level)
        out.append(result.value)
    return out


def rater_bias(data) -> np.ndarray:
    """Per rater, the mean of (their rating - the mean of the other raters on that unit) over
    units where both exist; NaN for a rater with no such unit. Positive = more lenient."""
    array = _as_array(data)
    present = ~np.isnan(array)
    totals = np.where(present, array, 0).sum(axis=0)
    counts = present.sum(axis=0)
    others_count = counts[None, :] - present
    with np.errstate(invalid="ignore", divide="ignore"):
        others_mean = (totals[None, :] - np.where(present, array, 0)) / others_count
        difference = np.where(present & (others_count > 0), array - others_mean, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a rater with no shared unit
            return np.nanmean(np.where(np.isnan(difference), np.nan, difference), axis=1)


def item_dispersion(data) -> dict[str, np.ndarray]:
    """Per unit: number of ratings, standard deviation (ddof 0) and range; NaN if unrated."""
    array = _as_array(data)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # unrated units give NaN
        return {
            "n": (~np.isnan(array)).sum(axis=0),
            "sd": np.nanstd(array, axis=0),
            "range": np.nanmax(array, axis=0) - np.nanmin(array, axis=0),
        }


@dataclass(frozen=True)
class Gwet:
    value: float | None
    percent_agreement: float | None
    chance_agreement: float | None
    weights: str
    reason: str | None = None


def _weight_matrix(values: np.ndarray, weights: str) -> np.ndarray:
    if weights == "identity":
        return np.eye(len(values))
    span = values.max() - values.min() if len(values) > 1 else 1.0
    if weights == "quadratic":
        return 1.0 - ((values[:, None] - values[None, :]) / span) ** 2
    if weights == "linear":
        return 1.0 - np.abs(values[:, None] - values[None, :]) / span
    raise ValueError(f"weights {weights!r} is not one of identity, linear, quadratic")


def gwet_ac(data, weights: str = "identity", categories=None) -> Gwet:
    """Gwet's AC1 (identity weights) or AC2 (linear or quadratic weights) for any number of
    raters with missing ratings (Gwet 2014, ch. 3). `categories`: the full scale, so that
    unused categories still count in chance agreement (default: the values seen)."""
    counts, seen = value_counts(_as_array(data))
    return gwet_of_counts(counts, seen, weights, categories)


def gwet_of_counts(
    counts: np.ndarray, seen: np.ndarray, weights: str = "identity", categories=None
):
    """Gwet's AC1/AC2 from per-unit value counts (units x values): what `gwet_ac` computes."""
    counts = np.asarray(counts, dtype=float).reshape(-1, len(seen))
    seen = np.asarray(seen, dtype=float)
    values = np.asarray(sorted(set(seen) | set(categories or ())), dtype=float)
    if len(values) < 2:
        return Gwet(None, None, None, weights, "fewer than two categories")
    if len(values) != len(seen):
        full = np.zeros((counts.shape[0], len(values)))
        full[:, np.searchsorted(values, seen)] = counts
        counts = full
    w = _weight_matrix(values, weights)
    r = counts.sum(axis=1)
    rated = r >= 1
    multi = r >= 2
    if not multi.any():
        return Gwet(None, None, None, weights, "no unit has two or more ratings")
    weighted = counts @ w.T  # r*_ik
    agreement = (counts[multi] * (weighted[multi] - 1)).sum(axis=1) / (r[multi] * (r[multi] - 1))
    pa = float(agreement.mean())
    pi = (counts[rated] / r[rated, None]).mean(axis=0)
    q = len(values)
    pe = float(w.sum() / (q * (q - 1)) * (pi * (1 - pi)).sum())
    if pe >= 1:
        return Gwet(None, pa, pe, weights, "chance agreement is 1")
    return Gwet((pa - pe) / (1 - pe), pa, pe, weights)


def dense_codes(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(array, return_inverse=True), in linear time when the entries are integers
    over a range not much wider than the array (task ids, rater ids, scale points); by
    sorting otherwise.

    >>> found, codes = dense_codes(np.array([7, 3, 7, 5]))
    >>> found.tolist(), codes.tolist()
    ([3, 5, 7], [2, 0, 2, 1])
    """
    array = np.asarray(array)
    if len(array):
        low, high = array.min(), array.max()
        span = high - low
        if span <= 4 * len(array) + 1024 and np.array_equal(array, np.round(array)):
            offsets = (array - low).astype(np.int64)
            present = np.zeros(int(span) + 1, dtype=bool)
            present[offsets] = True
            found = np.flatnonzero(present)
            rank = np.cumsum(present) - 1
            return (found + low).astype(array.dtype), rank[offsets]
    found, codes = np.unique(array, return_inverse=True)
    return found, codes.reshape(-1)


def _unit_coincidence_sums(counts: np.ndarray) -> np.ndarray:
    """The summed coincidence matrix of many units' count rows (units x V): V x V."""
    if not len(counts):
        return np.zeros((counts.shape[1], counts.shape[1]))
    m = counts.sum(axis=1)
    scale = np.where(m >= 2, 1.0 / np.where(m >= 2, m - 1, 1), 0.0)
    scaled = counts * scale[:, None]
    return scaled.T @ counts - np.diag((counts * scale[:, None]).sum(axis=0))


def _rater_contributions(
    counts: np.ndarray,
    unit_codes: np.ndarray,
    value_codes: np.ndarray,
    rater_codes: np.ndarray,
    raters: int,
) -> np.ndarray:
    """Per rater (raters x V x V), what their entries add to the round's coincidence matrix:
    for each entry, its unit's matrix minus the unit's matrix without that one value, summed
    by rater one cell at a time (a weighted count per cell, no loop over raters)."""
    before = counts[unit_codes]
    after = before.copy()
    after[np.arange(len(before)), value_codes] -= 1

    def scale(rows: np.ndarray) -> np.ndarray:
        m = rows.sum(axis=1)
        return np.where(m >= 2, 1.0 / np.where(m >= 2, m - 1, 1), 0.0)

    s_before, s_after = scale(before), scale(after)
    width = counts.shape[1]
    out = np.empty((raters, width, width))
    for a in range(width):
        for b in range(a, width):
            cell_before = before[:, a] * before[:, b] - (before[:, a] if a == b else 0.0)
            cell_after = after[:, a] * after[:, b] - (after[:, a] if a == b else 0.0)
            weights = cell_before * s_before - cell_after * s_after
            summed = np.bincount(rater_codes, weights=weights, minlength=raters)
            out[:, a, b] = out[:, b, a] = summed
    return out


def leave_one_rater_out_long(
    raters: np.ndarray, units: np.ndarray, values: np.ndarray, level: Level = "ordinal"
) -> dict[int, float | None]:
    """Alpha without each rater in turn, from ratings in long form (one entry per rating:
    rater, unit, value): what `leave_one_rater_out` gives on the raters x units matrix, by
    taking each rater's ratings out of the round's coincidence matrix instead of
    recomputing it."""
    raters, units = np.asarray(raters), np.asarray(units)
    values = np.asarray(values, dtype=float)
    if not len(values):
        return {}
    domain, value_codes = dense_codes(values)
    unit_ids, unit_codes = dense_codes(units)
    counts = (
        np.bincount(unit_codes * len(domain) + value_codes, minlength=len(unit_ids) * len(domain))
        .reshape(len(unit_ids), len(domain))
        .astype(float)
    )
    total = _unit_coincidence_sums(counts)
    rater_ids, rater_codes = dense_codes(raters)
    removed = _rater_contributions(counts, unit_codes, value_codes, rater_codes, len(rater_ids))
    out: dict[int, float | None] = {}
    for code, rater in enumerate(rater_ids.tolist()):
        matrix = total - removed[code]
        matrix[np.abs(matrix) < 1e-9] = 0.0
        used = matrix.sum(axis=1) > 0
        value = (
            float(alpha_from_coincidences(matrix[np.ix_(used, used)], domain[used], level))
            if used.sum() >= 2
            else float("nan")
        )
        out[rater] = None if np.isnan(value) else value
    return out


def rater_bias_long(
    raters: np.ndarray, units: np.ndarray, values: np.ndarray
) -> dict[int, float | None]:
    """Per rater, the mean of (their rating - the mean of the other raters on that unit) over
    units where others rated: what `rater_bias` gives, from ratings in long form."""
    raters, units = np.asarray(raters), np.asarray(units)
    values = np.asarray(values, dtype=float)
    if not len(values):
        return {}
    _, unit_codes = dense_codes(units)
    sums = np.bincount(unit_codes, weights=values)
    n = np.bincount(unit_codes)
    others = n[unit_codes] - 1
    paired = others > 0
    difference = values[paired] - (sums[unit_codes] - values)[paired] / others[paired]
    rater_ids, rater_codes = dense_codes(raters)
    totals = np.bincount(rater_codes[paired], weights=difference, minlength=len(rater_ids))
    seen = np.bincount(rater_codes[paired], minlength=len(rater_ids))
    return {
        int(r): (float(t / s) if s else None)
        for r, t, s in zip(rater_ids.tolist(), totals, seen, strict=True)
    }
