"""The native task bundle (YAML, JSON or JSONL): validation with precise error locations."""

from pathlib import Path
from typing import Any, Literal

from itsmreview.catalog.formats.common import find_nul, parse_json, parse_yaml, read_task_text
from itsmreview.catalog.models import SourceKind, Track
from itsmreview.catalog.state import (
    Alternative,
    StateSpec,
    normalise_difficulty,
    normalise_user_type,
)
from itsmreview.ledger.chain import canonical_json
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

EXPORT_RECORD = "itsmreview"  # key under which an export notes version, hash and decision
MAX_TEXT = 500_000  # characters of one field; larger is almost surely a wrong file
MessageRole = Literal["system", "user", "agent", "colleague", "tool"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ToolCall(_Open):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    requested_by: str | None = None


class Message(_Open):
    role: MessageRole
    actor: str = ""
    content: str = Field(default="", max_length=MAX_TEXT)
    time: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None


class TranscriptIn(_Open):
    id: str
    title: str = ""
    simulator: dict[str, Any] = Field(default_factory=dict)
    messages: list[Message] = Field(min_length=1)

    @field_validator("simulator")
    @classmethod
    def _simulated_user_type(cls, value: dict[str, Any]) -> dict[str, Any]:
        """A user type in the metadata must be usable as one (it fills the task's)."""
        user = value.get("user")
        for found in (
            value.get("user_type"),
            user.get("user_type") if isinstance(user, dict) else None,
        ):
            normalise_user_type(found)
        return value

    @model_validator(mode="after")
    def _tool_results_answer_calls(self) -> "TranscriptIn":
        called: set[str] = set()
        for index, message in enumerate(self.messages):
            called.update(call.id for call in message.tool_calls)
            if message.role == "tool":
                if not message.tool_call_id:
                    raise ValueError(f"messages[{index}] is a tool result without tool_call_id")
                if message.tool_call_id not in called:
                    raise ValueError(
                        f"messages[{index}].tool_call_id {message.tool_call_id!r} answers no "
                        "earlier tool call"
                    )
        return self


class Provenance(_Open):
    field: str
    source: SourceKind
    reference: str = ""


class Source(_Open):
    log: str | None = None
    variants: list[list[str]] = Field(default_factory=list)
    case_ids: list[str] = Field(default_factory=list)
    roles: dict[str, list[str]] = Field(default_factory=dict)
    # also `outcomes` ({attribute: value or [values]}, coverage.outcomes), kept as given: a
    # declared field would change the content hash of every task that has none


class NativeTask(_Open):
    id: str = Field(min_length=1, max_length=256)
    title: str = Field(min_length=1, max_length=512)
    persona: str = Field(min_length=1, max_length=128)
    track: Track
    instruction: str = Field(min_length=1, max_length=MAX_TEXT)
    environment: str = Field(default="", max_length=MAX_TEXT)
    ground_truth: str = Field(default="", max_length=MAX_TEXT)
    verifier: str = Field(default="", max_length=MAX_TEXT)
    tags: list[str] = Field(default_factory=list)
    source: Source = Field(default_factory=Source)
    provenance: list[Provenance] = Field(default_factory=list)
    transcripts: list[TranscriptIn] = Field(default_factory=list)
    # benchmark-authoring fields (catalog.state); left out of the content hash when unset, so
    # tasks without them keep the hash they had before the fields existed
    state: StateSpec | None = None
    alternatives: list[Alternative] = Field(default_factory=list)
    difficulty: str | None = None
    user_type: str | None = None

    @field_validator("difficulty", mode="before")
    @classmethod
    def _difficulty(cls, value: Any) -> str | None:
        return normalise_difficulty(value)

    @field_validator("user_type", mode="before")
    @classmethod
    def _user_type(cls, value: Any) -> str | None:
        return normalise_user_type(value)

    @field_validator("alternatives")
    @classmethod
    def _unique_alternative_ids(cls, value: list[Alternative]) -> list[Alternative]:
        ids = [a.id for a in value]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"alternative id(s) used twice: {', '.join(twice)}")
        return value

    @field_validator("transcripts")
    @classmethod
    def _unique_transcript_ids(cls, value: list[TranscriptIn]) -> list[TranscriptIn]:
        seen = set()
        for transcript in value:
            if transcript.id in seen:
                raise ValueError(f"transcript id {transcript.id!r} appears twice")
            seen.add(transcript.id)
        return value

    def stored(self) -> dict:
        """The task as stored and hashed: the optional authoring fields only when set."""
        dumped = self.model_dump(mode="json")
        for name in OPTIONAL_FIELDS:
            if not dumped.get(name):
                dumped.pop(name, None)
        return dumped

    def content_hash(self) -> str:
        import hashlib

        return hashlib.sha256(canonical_json(self.stored()).encode()).hexdigest()


OPTIONAL_FIELDS = ("state", "alternatives", "difficulty", "user_type")


def _location(loc: tuple) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def format_validation_error(exc: ValidationError, source: str, prefix: str = "") -> str:
    lines = [f"{source}: {exc.error_count()} problem(s)"]
    for error in exc.errors()[:20]:
        where = _location(error["loc"])
        if prefix:
            where = prefix + where[1:]
        found = error.get("input")
        found_text = "" if isinstance(found, dict | list) else f" (found {str(found)[:60]!r})"
        lines.append(f"  {where}: {error['msg']}{found_text}")
    return "\n".join(lines)


def parse_bundle(data: Any, source: str) -> list[NativeTask]:
    """Validate a bundle already parsed from JSON/YAML: a list of tasks or {"tasks": [...]}.

    Raises ValueError listing every problem with its JSON path; duplicate ids are an error.
    """
    if isinstance(data, dict) and "tasks" in data:
        items, prefix = data["tasks"], "$.tasks"
    elif isinstance(data, dict):
        items, prefix = [data], "$"
    else:
        items, prefix = data, "$"
    if not isinstance(items, list) or not items:
        raise ValueError(f"{source}: expected a list of tasks or an object with 'tasks'")
    nul = find_nul(items, prefix)
    if nul:
        raise ValueError(
            f"{source}: {nul} holds a NUL character (\\u0000), which no task text may contain; "
            "remove it (it usually means a binary file was pasted in)"
        )
    tasks, problems, seen = [], [], {}
    for index, item in enumerate(items):
        if isinstance(item, dict) and EXPORT_RECORD in item:  # an export's note, not content
            item = {k: v for k, v in item.items() if k != EXPORT_RECORD}
        where = f"{prefix}[{index}]" if prefix != "$" or len(items) > 1 else "$"
        try:
            task = NativeTask.model_validate(item)
        except ValidationError as exc:
            problems.append(format_validation_error(exc, f"task {where}", where))
            continue
        if task.id in seen:
            problems.append(f"task {where}: id {task.id!r} already used by task {seen[task.id]}")
        seen.setdefault(task.id, where)
        tasks.append(task)
    if problems:
        raise ValueError(f"{source}:\n" + "\n".join(problems))
    return tasks


def load_bundle(path: Path | str) -> list[NativeTask]:
    """Read and validate a native bundle file (.json, .jsonl, .yaml, .yml)."""
    path = Path(path)
    text = read_task_text(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        data = [
            parse_json(line, f"{path}: line {number}")
            for number, line in enumerate(text.splitlines(), start=1)
            if line.strip()
        ]
    elif suffix in (".yaml", ".yml"):
        data = parse_yaml(text, path)
    else:
        data = parse_json(text, path)
    return parse_bundle(data, str(path))


SCHEMA_PATH = Path(__file__).parent / "native.schema.json"


def bundle_schema() -> dict:
    """The JSON Schema of a native bundle ({"tasks": [...]}), as shipped in the package."""
    task = NativeTask.model_json_schema()
    definitions = task.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "itsmreview native task bundle",
        "type": "object",
        "required": ["tasks"],
        "properties": {"tasks": {"type": "array", "items": {"$ref": "#/$defs/NativeTask"}}},
        "$defs": {**definitions, "NativeTask": task},
    }
