"""The ledger's hash chain, as pure functions over plain dicts.

Each entry's hash covers its content and the previous entry's hash, so changing,
removing or reordering any past entry breaks every hash after it.

>>> first = link({"seq": 1, "action": "import"}, GENESIS_HASH)
>>> second = link({"seq": 2, "action": "rate"}, first)
>>> find_break([({"seq": 1, "action": "import"}, GENESIS_HASH, first),
...             ({"seq": 2, "action": "rate"}, first, second)]) is None
True
>>> find_break([({"seq": 1, "action": "edited"}, GENESIS_HASH, first)])
(1, 'entry_hash does not match its content')
"""

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

GENESIS_HASH = "0" * 64


# one encoder for every call: json.dumps with options builds a new one each time, which costs
# more than the encoding of a ledger entry itself
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace: equal data, equal text."""
    return _CANONICAL.encode(value)


def content_digest(value: Any) -> str:
    """sha256 of an object's canonical content: what a ledger entry commits to.

    >>> content_digest({"b": 1, "a": [2]}) == content_digest({"a": [2], "b": 1})
    True
    """
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def link(content: Mapping[str, Any], prev_hash: str) -> str:
    """The sha256 hex digest chaining `content` to the entry before it."""
    digest = hashlib.sha256()
    digest.update(prev_hash.encode("ascii"))
    digest.update(b"\n")
    digest.update(canonical_json(content).encode("utf-8"))
    return digest.hexdigest()


def find_break(
    entries: Iterable[tuple[Mapping[str, Any], str, str]],
) -> tuple[int, str] | None:
    """The first entry (content, prev_hash, entry_hash) that breaks the chain, or None.

    Returns (seq of the entry, what is wrong). Entries must come in seq order.
    """
    expected_prev = GENESIS_HASH
    for content, prev_hash, entry_hash in entries:
        seq = int(content.get("seq", -1))
        if prev_hash != expected_prev:
            return seq, "prev_hash does not match the entry before it"
        if link(content, prev_hash) != entry_hash:
            return seq, "entry_hash does not match its content"
        expected_prev = entry_hash
    return None
