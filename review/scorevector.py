"""A rating's scores packed into one value: a float64 per rubric dimension, in the order of
the rating's rubric, NaN where unscored. Written with the rating's `rating_scores` rows (which
stay the record of each score), read by agreement: one column a rating instead of a pivot of
every score row of the round (2.9 million rows at 100,000 tasks)."""

from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def pack(keys: Sequence[str], scores: Mapping[str, float | None]) -> bytes:
    """The scores of `keys`, in that order.

    >>> unpack([pack(["a", "b"], {"b": 4})], 2).tolist()
    [[nan, 4.0]]
    """
    return np.array(
        [np.nan if scores.get(k) is None else float(scores[k]) for k in keys], dtype="<f8"
    ).tobytes()


def unpack(blobs: Iterable[bytes | memoryview], width: int) -> np.ndarray:
    """Packed vectors as one (ratings x width) array."""
    joined = b"".join(bytes(b) for b in blobs)
    return np.frombuffer(joined, dtype="<f8").reshape(-1, width)
