"""The model rater's request and answer: a `record_rating` tool whose input schema is generated
from the rubric, forced with tool_choice, and the checks its answer must pass before it is
stored."""

from dataclasses import dataclass, field

from itsmreview.review.assist.models import RequestOutcome
from itsmreview.review.assist.prompts import RATE_PROMPT, prompt_sha256, prompt_text
from itsmreview.review.assist.toolcall import UnusableAnswer, forced_tool_request, tool_input
from itsmreview.review.rubrics.service import RubricDefinition

TOOL_NAME = "record_rating"
MATERIAL_LAYOUT = 1  # raise when material.task_material lays the material out differently
RATIONALE_MAX = 1500


def rate_prompt_sha256() -> str:
    return prompt_sha256(RATE_PROMPT, MATERIAL_LAYOUT)


def rating_tool(rubric: RubricDefinition) -> dict:
    """The tool the model must call: one integer per dimension within its scale (anchors and
    guidance in its description), the verdict, flags, confidence and a short rationale."""
    properties: dict = {}
    for dimension in rubric.dimensions:
        low, high = dimension.scale
        anchors = "; ".join(f"{k} = {v}" for k, v in sorted(dimension.anchors.items()))
        properties[dimension.key] = {
            "type": "integer",
            "minimum": low,
            "maximum": high,
            "description": " ".join(
                part for part in (f"{dimension.label}.", dimension.guidance, anchors) if part
            ),
        }
    properties["verdict"] = {
        "type": "string",
        "enum": list(rubric.verdicts),
        "description": "Overall verdict on the task.",
    }
    flag_keys = [f.key for f in rubric.flags]
    properties["flags"] = {
        "type": "array",
        "items": {"type": "string", "enum": flag_keys} if flag_keys else {"type": "string"},
        "uniqueItems": True,
        "maxItems": len(flag_keys),
        "description": "Problems present in the task: "
        + ("; ".join(f"{f.key} = {f.label}" for f in rubric.flags) or "none defined")
        + ". An empty list when none applies.",
    }
    low, high = rubric.confidence.scale
    properties["confidence"] = {
        "type": "integer",
        "minimum": low,
        "maximum": high,
        "description": f"How sure you are of this rating, {low} (guessing) to {high} (certain).",
    }
    properties["rationale"] = {
        "type": "string",
        "maxLength": RATIONALE_MAX,
        "description": "At most five sentences naming the evidence the rating rests on.",
    }
    required = [d.key for d in rubric.dimensions if d.required]
    return {
        "name": TOOL_NAME,
        "description": f"Record your rating of the task on the rubric {rubric.title!r}.",
        "input_schema": {
            "type": "object",
            "properties": properties,
            "required": [*required, "verdict", "flags", "confidence", "rationale"],
            "additionalProperties": False,
        },
    }


def rating_request(*, model: str, rubric: RubricDefinition, material: str, max_tokens: int) -> dict:
    """The keyword arguments of `messages.create`: the rating tool only, forced."""
    return forced_tool_request(
        model=model,
        system=prompt_text(RATE_PROMPT),
        tool=rating_tool(rubric),
        material=material,
        max_tokens=max_tokens,
    )


@dataclass
class ModelJudgement:
    scores: dict[str, float | None]
    verdict: str
    flags: list[str] = field(default_factory=list)
    confidence: int | None = None
    rationale: str = ""


def _integer(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise UnusableAnswer(RequestOutcome.malformed, f"{what}: {value!r} is not a whole number")
    return int(value)


def parse_rating(message, rubric: RubricDefinition) -> ModelJudgement:
    """The judgement in a Messages API answer. Raises UnusableAnswer for a refusal, an answer
    cut off at max_tokens, no `record_rating` call, or values the rubric refuses."""
    data = tool_input(message, TOOL_NAME, "rate")
    scores: dict[str, float | None] = {}
    for dimension in rubric.dimensions:
        value = data.get(dimension.key)
        if value is None:
            if dimension.required:
                raise UnusableAnswer(
                    RequestOutcome.malformed, f"{dimension.key}: missing from the rating"
                )
            scores[dimension.key] = None
            continue
        value = _integer(value, dimension.key)
        low, high = dimension.scale
        if not low <= value <= high:
            raise UnusableAnswer(
                RequestOutcome.malformed, f"{dimension.key}: {value} is outside {low}..{high}"
            )
        scores[dimension.key] = float(value)
    unknown = sorted(set(data) - {*scores, "verdict", "flags", "confidence", "rationale"})
    if unknown:
        raise UnusableAnswer(RequestOutcome.malformed, f"unknown fields: {', '.join(unknown)}")
    verdict = data.get("verdict")
    if verdict not in rubric.verdicts:
        raise UnusableAnswer(
            RequestOutcome.malformed,
            f"verdict {verdict!r} is not one of {', '.join(rubric.verdicts)}",
        )
    flags = data.get("flags") or []
    keys = {f.key for f in rubric.flags}
    if not isinstance(flags, list) or not all(isinstance(f, str) and f in keys for f in flags):
        raise UnusableAnswer(RequestOutcome.malformed, f"flags {flags!r} are not rubric flags")
    confidence = data.get("confidence")
    if confidence is not None:
        confidence = _integer(confidence, "confidence")
        low, high = rubric.confidence.scale
        if not low <= confidence <= high:
            raise UnusableAnswer(
                RequestOutcome.malformed, f"confidence: {confidence} is outside {low}..{high}"
            )
    rationale = data.get("rationale") or ""
    if not isinstance(rationale, str):
        raise UnusableAnswer(RequestOutcome.malformed, "rationale is not text")
    return ModelJudgement(
        scores=scores,
        verdict=verdict,
        flags=sorted(set(flags)),
        confidence=confidence,
        rationale=rationale.strip()[:RATIONALE_MAX],
    )
