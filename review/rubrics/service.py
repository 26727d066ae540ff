"""Rubric definitions (versioned YAML) and their validation."""

import hashlib
from pathlib import Path
from typing import Literal

from itsmreview.files import parse_yaml, read_text_bounded
from itsmreview.ledger.chain import canonical_json
from itsmreview.review.models import Rubric
from itsmreview.review.rubrics import queries
from pydantic import BaseModel, Field, ValidationError, model_validator
from sqlmodel import Session

RUBRICS_DIR = Path(__file__).parent
DEFAULT_RUBRIC = RUBRICS_DIR / "itsm-realism.yaml"
PRESETS = {"itsm-realism": DEFAULT_RUBRIC, "audit-100": RUBRICS_DIR / "audit-100.yaml"}


class Dimension(BaseModel):
    key: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    label: str
    level: Literal["nominal", "ordinal", "interval", "ratio"] = "ordinal"
    scale: tuple[int, int] = (1, 5)
    required: bool = True
    guidance: str = ""
    anchors: dict[int, str] = Field(default_factory=dict)
    # when the dimension can be judged at all: a task without what it asks about leaves it
    # empty (missing in alpha, the gate and exports), required or not
    applies_when: Literal["always", "source_variant"] = "always"

    def applies(self, *, has_source_variant: bool) -> bool:
        """Whether this dimension can be judged on a task (with or without a source variant)."""
        return self.applies_when == "always" or has_source_variant

    def not_applicable_because(self) -> str:
        """Why the dimension does not apply to a task it does not apply to."""
        return NOT_APPLICABLE_BECAUSE[self.applies_when]

    @model_validator(mode="after")
    def _scale_ordered(self) -> "Dimension":
        low, high = self.scale
        if low >= high:
            raise ValueError(f"scale {list(self.scale)} must go from low to high")
        outside = [k for k in self.anchors if not low <= k <= high]
        if outside:
            raise ValueError(f"anchors {outside} lie outside the scale {list(self.scale)}")
        return self


NOT_APPLICABLE_BECAUSE = {
    "always": "",
    "source_variant": "the task declares no source variant",
}


class Flag(BaseModel):
    key: str
    label: str
    blocking: bool = False


class Confidence(BaseModel):
    scale: tuple[int, int] = (1, 5)
    label: str = "Confidence"


class AuditScoring(BaseModel):
    """A points score per task (the 100-point audit): each weighted dimension earns its
    weight times the credit of the value given; the task's score is the mean over raters."""

    mode: Literal["audit-100"] = "audit-100"
    threshold: float = Field(default=80.0, ge=0, le=100)
    weights: dict[str, float]
    credit: dict[int, float]  # scale value -> share of the weight earned
    blocked: int | None = None  # the scale value meaning "cannot be judged"

    @model_validator(mode="after")
    def _weights_and_credit(self) -> "AuditScoring":
        total = sum(self.weights.values())
        if abs(total - 100) > 1e-9:
            raise ValueError(f"weights add up to {total:g}, not 100")
        if any(w < 0 for w in self.weights.values()):
            raise ValueError("weights must not be negative")
        bad = sorted(k for k, c in self.credit.items() if not 0 <= c <= 1)
        if bad:
            raise ValueError(f"credit of {bad} must lie between 0 and 1")
        return self


class RubricDefinition(BaseModel):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,127}$")
    title: str
    description: str = ""
    dimensions: list[Dimension] = Field(min_length=1)
    verdicts: list[str] = Field(default_factory=lambda: ["accept", "revise", "reject"])
    flags: list[Flag] = Field(default_factory=list)
    confidence: Confidence = Field(default_factory=Confidence)
    scoring: AuditScoring | None = None

    @model_validator(mode="after")
    def _unique_keys(self) -> "RubricDefinition":
        keys = [d.key for d in self.dimensions]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"dimension keys used twice: {duplicates}")
        if self.scoring is not None:
            unknown = sorted(set(self.scoring.weights) - set(keys))
            if unknown:
                raise ValueError(f"scoring.weights name no dimension: {unknown}")
            for key in self.scoring.weights:
                low, high = self.dimension(key).scale
                missing = sorted(set(range(low, high + 1)) - set(self.scoring.credit))
                if missing:
                    raise ValueError(f"scoring.credit lacks the value(s) {missing} of {key}")
        return self

    def choice_label(self, key: str, value: int) -> str:
        """A scale point as the rater reads it: '3 Pass' for a nominal scale with anchors."""
        dimension = self.dimension(key)
        if dimension.level == "nominal" and value in dimension.anchors:
            return dimension.anchors[value]
        return str(value)

    def dimension(self, key: str) -> Dimension:
        for dimension in self.dimensions:
            if dimension.key == key:
                return dimension
        raise KeyError(key)

    @property
    def conditional(self) -> bool:
        """Whether some dimension applies only to some tasks."""
        return any(d.applies_when != "always" for d in self.dimensions)

    def content_hash(self) -> str:
        dumped = self.model_dump(mode="json")
        if dumped["scoring"] is None:  # rubrics written before scoring existed keep their hash
            del dumped["scoring"]
        for dimension in dumped["dimensions"]:  # and before applies_when existed
            if dimension["applies_when"] == "always":
                del dimension["applies_when"]
        return hashlib.sha256(canonical_json(dumped).encode()).hexdigest()


MAX_RUBRIC_BYTES = 2**20
_DEFINITIONS: dict[tuple[int, str], RubricDefinition] = {}


def definition_of(rubric: Rubric) -> RubricDefinition:
    """A stored rubric's definition, validated once per process: a stored rubric never
    changes (a changed definition is a new version, with another hash)."""
    key = (rubric.id, rubric.content_hash)
    found = _DEFINITIONS.get(key)
    if found is None:
        found = _DEFINITIONS[key] = RubricDefinition.model_validate(rubric.definition)
    return found


def definition_by_id(
    *, session: Session, rubric_id: int, content_hash: str | None = None
) -> RubricDefinition:
    """A stored rubric's definition by its id (and hash, when the caller read it already):
    the definition itself is read and validated only the first time in this process."""
    if content_hash is None:
        from itsmreview.review.rubrics.queries import rubric_hash

        content_hash = rubric_hash(session=session, rubric_id=rubric_id)
    found = _DEFINITIONS.get((rubric_id, content_hash))
    return found or definition_of(session.get(Rubric, rubric_id))


def load_rubric(path: Path | str = DEFAULT_RUBRIC) -> RubricDefinition:
    """Read and validate a rubric YAML file, or a preset by name (`audit-100`,
    `itsm-realism`). Raises ValueError naming the file and field."""
    if str(path) in PRESETS and not Path(path).exists():
        path = PRESETS[str(path)]
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; give the rubric's YAML file")
    if not path.is_file():
        raise ValueError(
            f"{path}: no such rubric file; give a YAML file, a preset ("
            f"{', '.join(PRESETS)}) or omit --rubric for the default ITSM realism rubric"
        )
    try:
        data = parse_yaml(read_text_bounded(path, MAX_RUBRIC_BYTES, what="rubric"), path)
        return RubricDefinition.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"{path}: {problems}") from None


def ensure_rubric(
    definition: RubricDefinition, *, session: Session, actor_id: int | None = None
) -> Rubric:
    """The stored rubric for this content; a changed definition becomes a new version."""
    digest = definition.content_hash()
    versions = queries.rubric_versions(session=session, name=definition.name)
    for rubric in versions:
        if rubric.content_hash == digest:
            return rubric
    rubric = Rubric(
        name=definition.name,
        version=(versions[0].version + 1) if versions else 1,
        title=definition.title,
        definition=definition.model_dump(mode="json"),
        content_hash=digest,
        created_by_id=actor_id,
    )
    session.add(rubric)
    session.flush()
    return rubric
