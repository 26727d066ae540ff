"""Bootstrap CI of Krippendorff's alpha: 10,000 units x 50 raters, 1,000 resamples.

Compares, in the same run: one `krippendorff.alpha` call; itsmreview's alpha with a 1,000-
sample bootstrap (per-unit coincidences computed once, resampled); and the naive bootstrap
that calls `krippendorff.alpha` on each resample. Prints medians and ratios.
"""

import argparse
import statistics
import time

import krippendorff
import numpy as np
from itsmreview.review.gate.agreement import alpha, bootstrap_draws, unit_profiles, value_counts


def ratings(units: int, raters: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, size=units)
    data = np.clip(truth + rng.integers(-1, 2, size=(raters, units)), 1, 5).astype(float)
    data[rng.random(data.shape) < 0.3] = np.nan
    return data


def timed(function, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--units", type=int, default=10_000)
    parser.add_argument("--raters", type=int, default=50)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--naive-samples",
        type=int,
        default=1000,
        help="resamples for the naive bootstrap (it is slow)",
    )
    args = parser.parse_args()
    data = ratings(args.units, args.raters)
    one, reference = timed(
        lambda: krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"),
        args.repeats,
    )
    point, ours = timed(lambda: alpha(data, "ordinal"), args.repeats)
    full, boot = timed(lambda: alpha(data, "ordinal", bootstrap=args.samples), args.repeats)
    bootstrap_only = full - point
    print(
        f"== alpha of {args.units:,} units x {args.raters} raters (ordinal), "
        f"medians of {args.repeats}"
    )
    print(f"  one krippendorff.alpha call        {one * 1000:8.1f} ms  (1.00x)")
    print(f"  itsmreview alpha, no bootstrap     {point * 1000:8.1f} ms  ({point / one:.2f}x)")
    print(
        f"  itsmreview alpha + {args.samples} bootstrap   {full * 1000:8.1f} ms  "
        f"({full / one:.2f}x); the bootstrap alone {bootstrap_only * 1000:.1f} ms "
        f"({bootstrap_only / one:.2f}x one call; target <= 2x)"
    )
    print(
        f"  point estimates identical: {ours.value == reference} ({ours.value!r}); "
        f"95% CI [{boot.ci_low:.4f}, {boot.ci_high:.4f}]"
    )
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    columns = data[:, pairable]
    _, first, frequency = unit_profiles(value_counts(columns)[0])
    start = time.perf_counter()
    naive = []
    for draws in bootstrap_draws(0, args.naive_samples, frequency):
        for draw in draws:
            naive.append(
                krippendorff.alpha(
                    reliability_data=columns[:, np.repeat(first, draw)],
                    level_of_measurement="ordinal",
                )
            )
    naive_time = time.perf_counter() - start
    low, high = np.percentile(naive, [2.5, 97.5])
    print(
        f"  naive: krippendorff.alpha x {args.naive_samples}   {naive_time:8.2f} s    "
        f"({naive_time / bootstrap_only:.0f}x slower than ours); CI [{low:.4f}, {high:.4f}]"
    )


if __name__ == "__main__":
    main()
