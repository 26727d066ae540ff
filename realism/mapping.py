"""From transcript to events (issue 36): a mapping spec, YAML and versioned, turns a simulated
conversation into an event sequence in a log's vocabulary, so that the simulator's behaviour
can be measured the way the log's is.

A spec is a list of rules. Each message of a transcript gives one unit per tool call (the
call's name and arguments) or, without calls, one unit of its text; system messages and tool
results give none. The first rule that matches a unit decides it: it emits one event (an
activity, and a group when the rule names one), or with `activity: null` covers the unit
without an event. A unit no rule matches is unmapped; the count of such units is kept
beside the events, so a reader sees how much of a conversation the spec explains.

Every event carries the case's current assignment group: the spec's `start_group` until a
rule sets another (a handover), as a log's events carry their team.

>>> spec = MappingSpec.model_validate({
...     "spec": "demo", "version": 1, "log": "demo-vinst", "start_group": "Desk",
...     "rules": [
...         {"name": "status", "tool": ["set_status"], "argument": "status",
...          "activity": "{status}", "rewrite": [["^(\\\\w+) - ", "\\\\1-"]]},
...         {"name": "handover", "role": "agent", "text": "^Handing over to (?P<team>[^:]+):",
...          "activity": "Queued-Awaiting Assignment", "group": "{team}"},
...         {"name": "chat", "role": ["agent", "user"], "activity": None}]})
>>> messages = [
...     {"role": "user", "content": "My VPN fails"},
...     {"role": "agent", "content": "", "tool_calls": [
...         {"id": "1", "name": "set_status", "arguments": {"status": "Accepted - In Progress"}}]},
...     {"role": "tool", "content": "ok", "tool_call_id": "1"},
...     {"role": "agent", "content": "Handing over to Network: over to you"}]
>>> mapped = map_messages(messages, spec)
>>> for e in mapped.events:
...     print(e["turn"], e["activity"], e["group"], e["rule"], sep=" | ")
1 | Accepted-In Progress | Desk | status
3 | Queued-Awaiting Assignment | Network | handover
>>> mapped.units, mapped.unmapped
(3, [])
"""

import hashlib
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

MAX_SPEC_BYTES = 256 * 1024
MAX_RULES = 500
MAX_PATTERN = 500
TEXT_WINDOW = 4000  # characters of a message a `text` rule reads (bounds a pattern's work)
ROLES = ("user", "agent", "colleague")
_FORMATTER = string.Formatter()


class SpecError(ValueError):
    """A mapping spec that cannot be used; the message names the file, the place and the fix."""


class Rule(BaseModel):
    """One rule: what it matches (all given conditions must hold) and what it emits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=128)
    role: list[Literal["user", "agent", "colleague"]] | None = None
    tool: list[str] | None = None
    argument: str | None = None
    text: str | None = Field(default=None, max_length=MAX_PATTERN)
    activity: str | None = Field(max_length=256)
    group: str | None = Field(default=None, max_length=256)
    rewrite: list[tuple[str, str]] = Field(default_factory=list, max_length=20)

    @field_validator("role", "tool", mode="before")
    @classmethod
    def _listed(cls, value):
        return [value] if isinstance(value, str) else value

    @field_validator("text")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"not a regular expression: {error}") from None
        return value

    @field_validator("rewrite")
    @classmethod
    def _rewrites(cls, value: list[tuple[str, str]]) -> list[tuple[str, str]]:
        for pattern, _ in value:
            if len(pattern) > MAX_PATTERN:
                raise ValueError(f"a rewrite pattern is longer than {MAX_PATTERN} characters")
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"{pattern!r} is not a regular expression: {error}") from None
        return value

    @field_validator("activity", "group")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                names = [n for _, n, spec, conv in _FORMATTER.parse(value) if n is not None]
            except ValueError as error:
                raise ValueError(f"{value!r} is not a template: {error}") from None
            if any(not n.isidentifier() for n in names):
                raise ValueError(f"{value!r}: a placeholder is a plain name, like {{status}}")
        return value

    def matches(self, unit: "Unit") -> dict[str, str] | None:
        """The template values when the rule matches `unit`, else None. `tool: "*"` matches
        any tool call."""
        if self.role is not None and unit.role not in self.role:
            return None
        if self.tool is not None and (
            unit.tool is None or (unit.tool not in self.tool and "*" not in self.tool)
        ):
            return None
        if self.tool is None and self.argument is None and unit.tool is not None:
            return None  # a text rule does not decide a tool call
        values = {"actor": unit.actor, "tool": unit.tool or ""}
        values |= {k: v if isinstance(v, str) else json.dumps(v) for k, v in unit.arguments.items()}
        if self.argument is not None and self.argument not in unit.arguments:
            return None
        if self.text is not None:
            found = re.search(self.text, unit.content[:TEXT_WINDOW], re.IGNORECASE)
            if found is None:
                return None
            values |= {k: v for k, v in found.groupdict().items() if v is not None}
        return values

    def render(self, template: str | None, values: dict[str, str]) -> str | None:
        if template is None:
            return None
        try:
            text = template.format_map(values).strip()
        except (KeyError, IndexError):
            return None
        return text or None

    def activity_of(self, values: dict[str, str]) -> str | None:
        activity = self.render(self.activity, values)
        for pattern, replacement in self.rewrite:
            activity = None if activity is None else re.sub(pattern, replacement, activity)
        return activity


class MappingSpec(BaseModel):
    """A versioned mapping from a task source's transcripts to a log's vocabulary."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][\w.\-]*$")
    version: int = Field(ge=1)
    log: str = Field(min_length=1, max_length=256)
    description: str = Field(default="", max_length=4000)
    # the transcript formats it maps, as imported (native, tau2-sim, taubench, atif); any if unset
    formats: list[str] | None = Field(default=None, min_length=1, max_length=20)
    start_group: str | None = Field(default=None, max_length=256)
    rules: list[Rule] = Field(min_length=1, max_length=MAX_RULES)

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, value: list[Rule]) -> list[Rule]:
        seen: set[str] = set()
        for rule in value:
            if rule.name in seen:
                raise ValueError(f"two rules are named {rule.name!r}: a rule's name says which")
            seen.add(rule.name)
        return value

    def maps(self, transcript_format: str) -> bool:
        return self.formats is None or transcript_format in self.formats

    def digest(self) -> str:
        """sha256 of the spec's canonical JSON: the ledger records it beside each mapping."""
        body = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class Unit:
    turn: int
    call: int | None
    role: str
    actor: str
    tool: str | None
    arguments: dict[str, Any]
    content: str


@dataclass
class Mapped:
    """A transcript's events (turn, call, activity, group, rule), its units and the units no
    rule matched (turn, call)."""

    events: list[dict] = field(default_factory=list)
    units: int = 0
    unmapped: list[list[int | None]] = field(default_factory=list)


def units_of(messages: list[dict]) -> list[Unit]:
    """A transcript's units in order: one per tool call, else one per message's text."""
    out = []
    for turn, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            continue
        actor, content = str(message.get("actor") or role), str(message.get("content") or "")
        calls = message.get("tool_calls") or []
        for index, call in enumerate(calls):
            arguments = call.get("arguments")
            arguments = arguments if isinstance(arguments, dict) else {}
            out.append(Unit(turn, index, role, actor, str(call.get("name")), arguments, content))
        if not calls:
            out.append(Unit(turn, None, role, actor, None, {}, content))
    return out


def map_messages(messages: list[dict], spec: MappingSpec) -> Mapped:
    """The events `spec` makes of a transcript's messages (see the module's docstring)."""
    mapped, group = Mapped(), spec.start_group
    for unit in units_of(messages):
        mapped.units += 1
        for rule in spec.rules:
            values = rule.matches(unit)
            if values is None:
                continue
            if rule.activity is None:
                break  # covered, no event
            activity = rule.activity_of(values)
            if activity is None:
                continue  # a placeholder without a value: the next rule may decide
            group = rule.render(rule.group, values) or group
            mapped.events.append(
                {
                    "turn": unit.turn,
                    "call": unit.call,
                    "activity": activity,
                    "group": group,
                    "rule": rule.name,
                }
            )
            break
        else:
            mapped.unmapped.append([unit.turn, unit.call])
    return mapped


def _where(location: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in location).lstrip(".")


def parse_spec(text: str, origin: str = "the spec") -> MappingSpec:
    """A spec from YAML text; SpecError names `origin`, the place and what is wrong."""
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise SpecError(f"{origin}: a mapping spec is at most {MAX_SPEC_BYTES // 1024} KB")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SpecError(f"{origin}: not YAML: {error}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{origin}: a mapping spec is a YAML mapping (spec, version, log, rules)")
    try:
        return MappingSpec.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        raise SpecError(
            f"{origin}: {_where(first['loc']) or 'spec'}: {first['msg']}{more}; "
            "docs/realism.md#mapping-specs describes the format"
        ) from None


SPECS = Path(__file__).parent / "specs"


def packaged_specs() -> list[str]:
    """Names of the mapping specs that ship with itsmreview (realism/specs)."""
    return sorted(path.stem for path in SPECS.glob("*.yaml"))


def load_spec(path: Path | str) -> MappingSpec:
    """A spec from a YAML file or, for a name that is no file, the packaged spec of that name."""
    path = Path(path)
    if not path.is_file():
        packaged = SPECS / f"{path.name}.yaml"
        if path.name in packaged_specs() and str(path) == path.name:
            path = packaged
        else:
            shipped = ", ".join(packaged_specs())
            raise SpecError(f"{path}: no such mapping spec file (shipped specs: {shipped})")
    return parse_spec(path.read_text(encoding="utf-8"), str(path))


def simulator_name(simulator: dict | None, fallback: str = "unnamed") -> str:
    """The simulated user's backbone a transcript names (tau2: `user.backbone`; the demo and
    others: `backbone`), else `fallback`."""
    simulator = simulator or {}
    user = simulator.get("user")
    named = user.get("backbone") if isinstance(user, dict) else None
    for found in (named, simulator.get("backbone")):
        if isinstance(found, str) and found.strip():
            return found.strip()[:128]
    return fallback
