"""Rubric definitions (versioned YAML) and their validation."""

import hashlib
from pathlib import Path
from typing import Literal

from itsmreview.files import parse_yaml, read_text_bounded
from itsmreview.ledger.chain import canonical_json
from itsmreview.review.models import Rubric
from pydantic import BaseModel, Field, ValidationError, model_validator
from sqlmodel import Session, select

RUBRICS_DIR = Path(__file__).parent / "rubrics"
DEFAULT_RUBRIC = RUBRICS_DIR / "itsm-realism.yaml"


class Dimension(BaseModel):
    key: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    label: str
    level: Literal["nominal", "ordinal", "interval", "ratio"] = "ordinal"
    scale: tuple[int, int] = (1, 5)
    required: bool = True
    guidance: str = ""
    anchors: dict[int, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _scale_ordered(self) -> "Dimension":
        low, high = self.scale
        if low >= high:
            raise ValueError(f"scale {list(self.scale)} must go from low to high")
        outside = [k for k in self.anchors if not low <= k <= high]
        if outside:
            raise ValueError(f"anchors {outside} lie outside the scale {list(self.scale)}")
        return self


class Flag(BaseModel):
    key: str
    label: str
    blocking: bool = False


class Confidence(BaseModel):
    scale: tuple[int, int] = (1, 5)
    label: str = "Confidence"


class RubricDefinition(BaseModel):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,127}$")
    title: str
    description: str = ""
    dimensions: list[Dimension] = Field(min_length=1)
    verdicts: list[str] = Field(default_factory=lambda: ["accept", "revise", "reject"])
    flags: list[Flag] = Field(default_factory=list)
    confidence: Confidence = Field(default_factory=Confidence)

    @model_validator(mode="after")
    def _unique_keys(self) -> "RubricDefinition":
        keys = [d.key for d in self.dimensions]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"dimension keys used twice: {duplicates}")
        return self

    def dimension(self, key: str) -> Dimension:
        for dimension in self.dimensions:
            if dimension.key == key:
                return dimension
        raise KeyError(key)

    def content_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.model_dump(mode="json")).encode()).hexdigest()


MAX_RUBRIC_BYTES = 2**20


def load_rubric(path: Path | str = DEFAULT_RUBRIC) -> RubricDefinition:
    """Read and validate a rubric YAML file. Raises ValueError naming the file and field."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; give the rubric's YAML file")
    if not path.is_file():
        raise ValueError(
            f"{path}: no such rubric file; omit --rubric for the default ITSM realism rubric"
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
    versions = session.exec(
        select(Rubric).where(Rubric.name == definition.name).order_by(Rubric.version.desc())
    ).all()
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
