"""The built-in checks: do-nothing on each kind of end state, and near-duplicates found by
MinHash banding equal to a brute-force comparison of every pair."""

import random
from itertools import combinations

import pytest
from itsmreview.review.ratings import builtin_checks as checks


@pytest.mark.parametrize(
    ("state", "truth", "status"),
    [
        ({"changes": [{"entity": "incident", "change": "added"}]}, "", "pass"),
        # the verifier run on the initial state: a change that already holds passes it
        (
            {
                "changes": [
                    {"entity": "user", "change": "changed", "before": {"a": 1}, "after": {"a": 1}}
                ]
            },
            "",
            "fail",
        ),
        (
            {
                "changes": [
                    {"entity": "user", "change": "changed", "before": {"a": 1}, "after": {"a": 1}},
                    {"entity": "user", "change": "changed", "before": {"a": 1}, "after": {"a": 2}},
                ]
            },
            "",
            "pass",
        ),
        ({"target": {"incident": []}}, "", "pass"),
        (None, '{"actions": [{"name": "update_reservation_flights"}], "outputs": []}', "pass"),
        (None, '{"actions": [{"name": "get_user_details"}], "outputs": ["327"]}', "warn"),
        (None, '{"actions": [{"name": "get_user_details"}, {"name": "think"}]}', "fail"),
        (None, '{"actions": [], "outputs": []}', "fail"),
        ({"actions": [{"name": "notify"}]}, "", "warn"),
        (None, "Close the incident with the user's agreement.", "warn"),
        (None, "{not json", "warn"),
    ],
)
def test_do_nothing_by_kind_of_end_state(state, truth, status):
    assert checks.do_nothing(state, truth)[0] == status


def _texts(seed: int, n: int) -> dict[str, str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    base = {
        f"t{i:03d}": " ".join(rng.choice(words) for _ in range(rng.randint(8, 30)))
        for i in range(n)
    }
    # near twins: a copy with one word changed, one added
    for i in range(0, n, 7):
        text = base[f"t{i:03d}"].split()
        text[rng.randrange(len(text))] = "changed"
        base[f"twin{i:03d}"] = " ".join(text + ["extra"])
    base["same"] = base["t000"]
    return base


@pytest.mark.parametrize("threshold", [0.6, 0.8])
def test_near_duplicates_equal_a_brute_force_comparison(threshold):
    texts = _texts(3, 120)
    found = checks.near_duplicates(texts, threshold)
    sets = {k: checks.shingles(v) for k, v in texts.items()}
    expected: dict[str, set] = {}
    for a, b in combinations(sorted(texts), 2):
        if checks.jaccard(sets[a], sets[b]) >= threshold:
            expected.setdefault(a, set()).add(b)
            expected.setdefault(b, set()).add(a)
    assert {k: {o for o, _ in v} for k, v in found.items()} == expected
    assert ("same", 1.0) in found["t000"]


def test_duplicate_results_say_which_task():
    assert checks.duplicate_result("a", [], set())[0] == "pass"
    status, summary, details = checks.duplicate_result("a", [("b", 1.0)], {"a", "b"})
    assert (status, summary) == ("fail", "the same instruction as b")
    status, summary, _ = checks.duplicate_result("a", [("b", 0.9), ("c", 0.85)], set())
    assert (
        status == "warn"
        and summary == "nearly the same instruction as b (similarity 0.90) and 1 more"
    )
    assert details["similar"] == [{"task": "b", "similarity": 1.0}]
