"""The worked example of docs/agreement.md (dimensions that do not apply): a missing task
changes nothing but the sample; invented scores for it change alpha."""

import krippendorff
import numpy as np
import pytest
from itsmreview.review.gate.agreement import alpha

NAN = np.nan
# experts x tasks A, B, C; B declares no source variant
MISSING = np.array([[4, NAN, 2], [4, NAN, 2], [5, NAN, 3]])
INVENTED = np.array([[4, 1, 2], [4, 3, 2], [5, 5, 3]])


def _by_hand(data: np.ndarray) -> float:
    """Alpha with the interval metric, written out as the docs compute it."""
    units = [column[~np.isnan(column)] for column in data.T]
    units = [u for u in units if len(u) >= 2]
    values = np.concatenate(units)
    n = len(values)
    observed = (
        sum(
            sum((a - b) ** 2 for i, a in enumerate(u) for j, b in enumerate(u) if i != j)
            / (len(u) - 1)
            for u in units
        )
        / n
    )
    expected = 2 * n * ((values - values.mean()) ** 2).sum() / (n * (n - 1))
    return 1 - observed / expected


def test_the_missing_task_drops_out_as_the_docs_compute_it():
    result = alpha(MISSING, "interval")
    assert (result.units, result.pairable_values) == (2, 6)
    assert (
        result.value
        == pytest.approx(_by_hand(MISSING))
        == pytest.approx(1 - 0.6667 / 2.9333, abs=1e-3)
    )
    assert round(result.value, 3) == 0.773
    assert result.value == pytest.approx(
        krippendorff.alpha(MISSING, level_of_measurement="interval")
    )


def test_invented_scores_for_it_change_alpha_as_the_docs_say():
    result = alpha(INVENTED, "interval")
    assert round(result.value, 3) == 0.200 == round(_by_hand(INVENTED), 3)
    assert result.value == pytest.approx(
        krippendorff.alpha(INVENTED, level_of_measurement="interval")
    )


def test_the_alpha_of_a_dimension_a_task_leaves_empty_does_not_hold_it_back():
    from itsmreview.review.gate.approval import GateConfig, TaskRatings, decide, weak_dimensions

    config = GateConfig(k_min=2, gating_dimensions=("realism", "fidelity"))
    alphas = {"realism": 0.9, "fidelity": None}  # no task of the round declares a variant
    without = TaskRatings({"realism": [5, 4]}, ["accept", "accept"], [[], []])
    assert decide(without, config, alphas).status == "approved"
    rated = TaskRatings({"realism": [5, 4], "fidelity": [4, 4]}, ["accept", "accept"], [[], []])
    decision = decide(rated, config, alphas)
    assert (decision.status, decision.reasons) == ("pending", ["alpha of fidelity is undefined"])
    assert weak_dimensions(config, alphas) == {"fidelity"}
    assert weak_dimensions(config, {"realism": 0.5, "fidelity": 0.9}) == {"realism"}
