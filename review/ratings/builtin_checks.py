"""Machine checks itsmreview runs itself (issue 37), in the format of `checks import`:

- `do-nothing`: would an agent that does nothing pass the verifier? It fails when the expected
  end state is the initial one (no record change, or every expected change already holds in
  the state before the task: the declarative verifier run on the initial state; and for
  tau-bench's ground truth, only reading actions and no required reply); it warns when only
  replies are checked or when no end state can be read; it passes when the verifier expects a
  change. A do-nothing agent
  passes 38% of tau-bench airline (the ABC checklist, arXiv 2507.02825).
- `duplicate`: tasks whose instructions are the same (fail) or nearly the same (warn: word
  3-gram Jaccard similarity of at least the threshold, 0.8 by default), found among every
  task's newest version by MinHash with banding (Broder 1997; Leskovec, Rajaraman & Ullman,
  "Mining of Massive Datasets", ch. 3), each candidate pair then measured exactly.
  Duplicates skew a benchmark's statistics (langfuse #12938).

>>> jaccard(shingles("reset the password of user U-1"), shingles("reset the password of user U-1"))
1.0
>>> do_nothing({"changes": []}, '{"actions": [{"name": "get_user_details"}], "outputs": []}')[0]
'fail'
"""

import json
import re
import zlib
from collections import defaultdict
from itertools import combinations

import numpy as np

TOOL = "itsmreview builtin checks"
THRESHOLD = 0.8
PERMUTATIONS = 128
BANDS = 32  # 4 rows a band: pairs above about 0.5 similarity become candidates
READING = re.compile(r"^(get|search|list|find|lookup|calculate|think|read|check|query)", re.I)
_WORDS = re.compile(r"\w+")


def holds_initially(change: dict) -> bool:
    """Whether an expected record change already holds in the initial state: the verifier's
    check of that record, run on the state before the task (a changed record whose `before`
    has every `after` value). An added or removed record never holds before the task.

    >>> locked = {"change": "changed", "before": {"locked": True}}
    >>> holds_initially(locked | {"after": {"locked": True}})
    True
    >>> holds_initially(locked | {"after": {"locked": False}})
    False
    >>> holds_initially({"change": "changed", "before": {}, "after": {"locked": False}})
    False
    """
    if change.get("change") != "changed":
        return False
    before, after = change.get("before") or {}, change.get("after") or {}
    return bool(after) and all(k in before and before[k] == v for k, v in after.items())


def do_nothing(state: dict | None, ground_truth: str) -> tuple[str, str, dict]:
    """(status, summary, details) of the do-nothing check for one task version. The expected
    end state is the task's declarative verifier: it is run on the initial state (each
    record change against its `before`); a verifier the initial state passes fails the
    check. Verifier scripts are not run (they come from outside)."""
    state = state or {}
    changes, target = state.get("changes") or [], state.get("target") or {}
    if changes:
        held = [c for c in changes if isinstance(c, dict) and holds_initially(c)]
        details = {
            "record_changes": len(changes),
            "holding_initially": len(held),
            "target_entities": len(target),
        }
        if len(held) == len(changes):
            return (
                "fail",
                f"every expected record change ({len(changes)}) already holds in the initial "
                "state: the verifier passes an agent that does nothing",
                details,
            )
        return (
            "pass",
            f"{len(changes) - len(held)} of {len(changes)} expected record change(s) do not "
            "hold in the initial state: doing nothing fails the verifier",
            details,
        )
    if target:
        return (
            "pass",
            f"the verifier expects an end state of {len(target)} entit(ies): doing nothing "
            "fails it unless the initial state is that end state",
            {"record_changes": 0, "target_entities": len(target)},
        )
    try:
        truth = json.loads(ground_truth) if ground_truth.strip().startswith("{") else {}
    except ValueError:
        truth = {}
    actions = truth.get("actions") if isinstance(truth, dict) else None
    if isinstance(actions, list):
        names = [str(a.get("name", "")) for a in actions if isinstance(a, dict)]
        writes = [n for n in names if not READING.match(n)]
        outputs = truth.get("outputs") or []
        details = {"actions": len(names), "writing_actions": writes, "outputs": len(outputs)}
        if writes:
            return "pass", f"the end state needs {len(writes)} writing action(s)", details
        if outputs:
            return (
                "warn",
                "no action changes the state: only the agent's replies are checked",
                details,
            )
        return (
            "fail",
            "the expected end state is the initial one: an agent that does nothing passes",
            details,
        )
    if state.get("actions"):
        return (
            "warn",
            "expected actions but no record change: whether doing nothing passes depends on "
            "the actions the verifier checks",
            {"actions": len(state["actions"])},
        )
    return (
        "warn",
        "no machine-readable end state: whether doing nothing passes cannot be told",
        {},
    )


def normalised(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def shingles(text: str, k: int = 3) -> set[int]:
    """crc32 of each run of k words (the whole text when shorter)."""
    words = normalised(text)
    grams = [" ".join(words[i : i + k]) for i in range(max(1, len(words) - k + 1))]
    return {zlib.crc32(g.encode()) for g in grams if g}


def jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _signatures(sets: list[set[int]], seed: int = 37) -> np.ndarray:
    """MinHash signatures (sets x PERMUTATIONS) under random affine hashes mod a prime."""
    prime = (1 << 61) - 1
    rng = np.random.default_rng(seed)
    a = rng.integers(1, prime, PERMUTATIONS, dtype=np.uint64)
    b = rng.integers(0, prime, PERMUTATIONS, dtype=np.uint64)
    out = np.full((len(sets), PERMUTATIONS), np.iinfo(np.uint64).max, dtype=np.uint64)
    for row, found in enumerate(sets):
        if not found:
            continue
        values = np.fromiter(found, dtype=np.uint64)[:, None]
        # products stay below 2^64 with values < 2^32 and a, b < 2^61 only modulo 2^64: the
        # wrap is a fixed permutation too, which is all MinHash needs
        out[row] = ((values * a + b) % np.uint64(prime)).min(axis=0)
    return out


def near_duplicates(texts: dict[str, str], threshold: float = THRESHOLD) -> dict[str, list]:
    """For each id whose text has a near twin: [(other id, similarity)], most similar first.
    Candidates by MinHash banding, then the exact Jaccard similarity of their shingles."""
    ids = sorted(texts)
    sets = [shingles(texts[i]) for i in ids]
    signatures = _signatures(sets)
    rows = PERMUTATIONS // BANDS
    candidates: set[tuple[int, int]] = set()
    for band in range(BANDS):
        buckets: dict[bytes, list[int]] = defaultdict(list)
        part = signatures[:, band * rows : (band + 1) * rows]
        for index in range(len(ids)):
            buckets[part[index].tobytes()].append(index)
        for members in buckets.values():
            if 1 < len(members) <= 200:  # a huge bucket is a template, not a near twin
                candidates.update(combinations(members, 2))
    found: dict[str, list] = defaultdict(list)
    for left, right in candidates:
        similarity = jaccard(sets[left], sets[right])
        if similarity >= threshold:
            found[ids[left]].append((ids[right], round(similarity, 4)))
            found[ids[right]].append((ids[left], round(similarity, 4)))
    return {k: sorted(v, key=lambda pair: (-pair[1], pair[0])) for k, v in found.items()}


def duplicate_result(task: str, twins: list, exact: set[str]) -> tuple[str, str, dict]:
    """(status, summary, details) of the duplicate check for one task."""
    if not twins:
        return "pass", "no other task has a similar instruction", {}
    same = [other for other, _ in twins if other in exact]
    details = {"similar": [{"task": o, "similarity": s} for o, s in twins[:20]]}
    if same:
        return "fail", f"the same instruction as {', '.join(same[:5])}", details
    best = twins[0]
    return (
        "warn",
        f"nearly the same instruction as {best[0]} (similarity {best[1]:.2f})"
        + (f" and {len(twins) - 1} more" if len(twins) > 1 else ""),
        details,
    )
