"""What a task's verifier expects of the end state: record changes per entity, what must not
change, expected actions; other acceptable end states; difficulty, user type and the
simulator's backbone. Pure: the native format validates with these models and the rating page
shows `diff_rows`."""

import re
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Change = Literal["added", "changed", "removed"]
NAME = 128


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class RecordChange(_Open):
    """One record of one table or entity as the verifier expects it after the task."""

    entity: str = Field(min_length=1, max_length=NAME)
    key: str = Field(default="", max_length=256)  # "" : a record known by its fields only
    change: Change
    before: dict[str, Any] = Field(default_factory=dict)
    after: dict[str, Any] = Field(default_factory=dict)
    note: str = Field(default="", max_length=2000)

    @model_validator(mode="after")
    def _sides_fit_the_change(self) -> "RecordChange":
        if self.change == "added" and self.before:
            raise ValueError("an added record has no 'before'")
        if self.change == "removed" and self.after:
            raise ValueError("a removed record has no 'after'")
        if self.change == "changed" and not self.after:
            raise ValueError("a changed record needs 'after': the fields as they must end")
        return self


class Preserve(_Open):
    """What must stay unchanged: fields of one record, a whole record, or a whole entity."""

    entity: str = Field(min_length=1, max_length=NAME)
    key: str = Field(default="", max_length=256)  # "" : every record the changes do not name
    fields: list[str] = Field(default_factory=list)  # [] : the whole record
    note: str = Field(default="", max_length=2000)


class ExpectedAction(_Open):
    name: str = Field(min_length=1, max_length=NAME)
    by: str = Field(default="agent", max_length=64)
    arguments: dict[str, Any] = Field(default_factory=dict)


class StateSpec(_Open):
    """The verifier's view of the end state (all parts optional)."""

    target: dict[str, Any] = Field(default_factory=dict)  # entity -> end-state records
    changes: list[RecordChange] = Field(default_factory=list)
    preserve: list[Preserve] = Field(default_factory=list)
    actions: list[ExpectedAction] = Field(default_factory=list)
    checks: list[str] = Field(default_factory=list)  # checks not readable as records


class Alternative(_Open):
    """Another acceptable end state of the task."""

    id: str = Field(min_length=1, max_length=NAME)
    description: str = Field(min_length=1, max_length=5000)
    changes: list[RecordChange] = Field(default_factory=list)
    source: Literal["logs", "external", "expert"] = "expert"


DIFFICULTIES = ("easy", "medium", "hard")
_DIFFICULTY_ALIASES = {
    "easy": "easy",
    "l1": "easy",
    "1": "easy",
    "low": "easy",
    "medium": "medium",
    "l2": "medium",
    "2": "medium",
    "moderate": "medium",
    "hard": "hard",
    "l3": "hard",
    "3": "hard",
    "high": "hard",
    "difficult": "hard",
}
USER_TYPES = ("rookie", "entangled_requests", "mismatched_expectations", "edge_case", "expert")


def normalise_difficulty(value: Any) -> str | None:
    """easy / medium / hard from L1-L3, 1-3, easy/medium/hard (any case); None stays None.
    Raises ValueError naming what is accepted."""
    if value is None or value == "":
        return None
    found = _DIFFICULTY_ALIASES.get(str(value).strip().lower())
    if found is None:
        raise ValueError(
            f"difficulty {value!r} is not one of L1, L2, L3, 1, 2, 3, easy, medium or hard"
        )
    return found


def normalise_user_type(value: Any) -> str | None:
    """A simulated user's type as a lower-case word (`Entangled requests` ->
    `entangled_requests`); any type is allowed, USER_TYPES are the documented ones."""
    if value is None or str(value).strip() == "":
        return None
    word = re.sub(r"[^a-z0-9]+", "_", str(value).strip().lower()).strip("_")
    if not word or len(word) > 64:
        raise ValueError(f"user type {str(value)[:80]!r} must be a word of at most 64 characters")
    return word


def _backbone_of(simulator: dict) -> str | None:
    user = simulator.get("user")
    if isinstance(user, dict) and user.get("backbone"):
        return str(user["backbone"])
    for key in ("backbone", "model", "llm"):
        if simulator.get(key):
            return str(simulator[key])
    return None


def simulator_backbone(simulators: list[dict]) -> str | None:
    """The simulated actors' backbone over a task's transcripts (`simulator.user.backbone`,
    else `simulator.backbone`, `model` or `llm`); several different ones are listed."""
    found = Counter(b for s in simulators if isinstance(s, dict) and (b := _backbone_of(s)))
    if not found:
        return None
    return ", ".join(sorted(found))[:NAME]


def simulator_user_type(simulators: list[dict]) -> str | None:
    """A user type the transcripts' simulator metadata declares (`user_type`)."""
    for simulator in simulators:
        if isinstance(simulator, dict):
            value = simulator.get("user_type") or (simulator.get("user") or {}).get("user_type")
            if value:
                return normalise_user_type(value)
    return None


def diff_rows(state: dict | None) -> list[dict]:
    """One row per field of every expected record change, for a readable diff: entity, key,
    change, field, before, after, and whether the field is one that must not change."""
    if not state:
        return []
    spec = StateSpec.model_validate(state)
    # a preservation check without a key covers the records the change set does not name
    protected = {(p.entity, p.key, f) for p in spec.preserve if p.key for f in p.fields}
    whole = {(p.entity, p.key) for p in spec.preserve if p.key and not p.fields}
    rows = []
    for change in spec.changes:
        for name in sorted(set(change.before) | set(change.after)):
            rows.append(
                {
                    "entity": change.entity,
                    "key": change.key,
                    "change": change.change,
                    "field": name,
                    "before": change.before.get(name),
                    "after": change.after.get(name),
                    "must_not_change": (change.entity, change.key, name) in protected
                    or (change.entity, change.key) in whole,
                }
            )
        if not change.before and not change.after:
            rows.append(
                {
                    "entity": change.entity,
                    "key": change.key,
                    "change": change.change,
                    "field": "",
                    "before": None,
                    "after": None,
                    "must_not_change": False,
                }
            )
    return rows


def preserve_rows(state: dict | None) -> list[dict]:
    """One row per preservation check: entity, record (every record when blank), fields (the
    whole record when blank)."""
    if not state:
        return []
    return [
        {
            "entity": p.entity,
            "key": p.key or "(every other record)",
            "fields": ", ".join(p.fields) or "(the whole record)",
            "note": p.note,
        }
        for p in StateSpec.model_validate(state).preserve
    ]


def state_summary(state: dict | None) -> str:
    """'3 record changes in 2 entities, 1 preservation check, 2 expected actions'."""
    if not state:
        return ""
    spec = StateSpec.model_validate(state)
    parts = []
    if spec.changes:
        entities = len({c.entity for c in spec.changes})
        parts.append(
            f"{len(spec.changes)} record change{'s' * (len(spec.changes) != 1)} in "
            f"{entities} entit{'ies' if entities != 1 else 'y'}"
        )
    if spec.preserve:
        parts.append(f"{len(spec.preserve)} preservation check{'s' * (len(spec.preserve) != 1)}")
    if spec.actions:
        parts.append(f"{len(spec.actions)} expected action{'s' * (len(spec.actions) != 1)}")
    if spec.checks:
        parts.append(f"{len(spec.checks)} other check{'s' * (len(spec.checks) != 1)}")
    return ", ".join(parts)
