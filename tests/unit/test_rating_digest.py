"""`rating_digest`, the ledger check's way of hashing a rating, against the commitment's
definition: the canonical JSON of `rating_content`, for every kind of field it may meet."""

import random
from types import SimpleNamespace

import pytest
from itsmreview.ledger.chain import content_digest
from itsmreview.review.commitments import rating_content, rating_digest
from itsmreview.review.models import Verdict

DIMENSIONS = ["scenario_realism", "log_fidelity", "persona_fit", "réalisme", "spoiler_free"]
TEXTS = ["", "Verifier misses the change link.", 'quote " and \\ back', "línea\nnueva\t✓", "\u2028"]


def _rating(rng: random.Random, **fields) -> SimpleNamespace:
    values = {
        "task_version_id": rng.randint(1, 10**6),
        "round_id": rng.choice([None, rng.randint(1, 50)]),
        "expert_id": rng.choice([None, rng.randint(1, 500)]),
        "revision": rng.randint(1, 4),
        "rater_kind": rng.choice(["human", "model"]),
        "verdict": rng.choice([None, "accept", "revise", Verdict.reject]),
        "flags": rng.sample(["unrealistic_actor", "spoiler", "ünïcode"], rng.randint(0, 3)),
        "comment": rng.choice([*TEXTS, None]),
        "confidence": rng.choice([None, 1, 3, 5]),
        "not_applicable": rng.choice(
            [None, {}, {"log_fidelity": "no log"}, {"réalisme": rng.choice(TEXTS)}]
        ),
    }
    values.update(fields)
    return SimpleNamespace(**values)


def _scores(rng: random.Random) -> dict:
    chosen = rng.sample(DIMENSIONS, rng.randint(0, len(DIMENSIONS)))
    return {
        d: rng.choice(
            [None, rng.randint(1, 5), float(rng.randint(1, 5)), rng.random() * 5, 1e-7, 1e16]
        )
        for d in chosen
    }


def test_equals_the_commitment_on_varied_ratings():
    rng = random.Random(34)
    for _ in range(3000):
        rating, scores = _rating(rng), _scores(rng)
        assert rating_digest(rating, scores) == content_digest(rating_content(rating, scores))


@pytest.mark.parametrize(
    "fields, scores",
    [
        ({"confidence": 3.5}, {"a": 1.0}),  # not a whole number
        ({"confidence": True}, {"a": 1.0}),  # a bool is not a number here
        ({"flags": [2, 1]}, {"a": 1.0}),
        ({"not_applicable": {"a": 7}}, {}),
        ({}, {"a": float("nan")}),  # NaN and infinity are written as the encoder writes them
        ({}, {"a": float("inf"), "b": None}),
        ({"rater_kind": None}, {"a": 2}),
    ],
)
def test_unusual_fields_hash_as_the_commitment(fields, scores):
    rating = _rating(random.Random(1), **fields)
    assert rating_digest(rating, scores) == content_digest(rating_content(rating, scores))


def test_a_changed_score_changes_the_digest():
    rating = _rating(random.Random(2))
    assert rating_digest(rating, {"a": 3.0}) != rating_digest(rating, {"a": 4.0})
