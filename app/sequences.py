"""Activity sequences as both catalog and coverage name them (below both packages)."""

import hashlib

SEQUENCE_SEPARATOR = "\x1f"


def sequence_key(sequence: list[str] | tuple[str, ...]) -> str:
    """A stable id for an activity sequence: equal sequences in any log share it."""
    return hashlib.sha256(SEQUENCE_SEPARATOR.join(sequence).encode("utf-8")).hexdigest()


def declared_sequences(source: dict | None) -> dict[str, list[str]]:
    """Sequence key -> sequence of every variant a task source declares, each once."""
    out: dict[str, list[str]] = {}
    for sequence in (source or {}).get("variants", []) or []:
        if isinstance(sequence, list | tuple):
            out.setdefault(sequence_key([str(a) for a in sequence]), [str(a) for a in sequence])
    return out
