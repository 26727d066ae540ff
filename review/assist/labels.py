"""Model labels for turns a mapping spec leaves unmatched (issue 36): the model client names
the log activity a turn amounts to (or none), each label stored as proposed and recorded in
the ledger as generated; it counts only when an expert confirms it (realism.service)."""

import json
from collections.abc import Callable
from dataclasses import dataclass

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.errors import InvalidInput
from itsmreview.realism import service as realism
from itsmreview.review.assist import client as model_client
from itsmreview.review.assist.models import RequestOutcome
from itsmreview.review.assist.prompts import LABEL_PROMPT, fenced, prompt_sha256, prompt_text
from itsmreview.review.assist.toolcall import UnusableAnswer, forced_tool_request, tool_input
from itsmreview.settings import get_settings
from sqlmodel import Session

TOOL_NAME = "record_label"
LABEL_LAYOUT = 1
MAX_LIMIT = 500


def label_prompt_sha256() -> str:
    return prompt_sha256(LABEL_PROMPT, LABEL_LAYOUT)


def label_tool(activities: list[str]) -> dict:
    return {
        "name": TOOL_NAME,
        "description": "Record the log activity the turn amounts to, or no event.",
        "input_schema": {
            "type": "object",
            "properties": {
                "activity": {"type": "string", "enum": [*activities, realism.NO_EVENT]},
                "reason": {"type": "string", "maxLength": 400},
            },
            "required": ["activity", "reason"],
        },
    }


def label_material(unit: dict, activities: list[str]) -> str:
    lines = ["The log's activities:", *(f"- {a}" for a in activities), "", "Turns before:"]
    lines += [f"[{c['role']}] {c['text']}" for c in unit["context"]] or ["(none)"]
    lines += ["", f"The turn ({unit['role']}, {unit['actor']}):", unit["text"] or "(no text)"]
    if "tool" in unit:
        lines.append("Tool call: " + json.dumps(unit["tool"], ensure_ascii=False)[:1500])
    return fenced("\n".join(lines), "turn_material")


@dataclass
class LabelRun:
    proposed: int = 0
    no_event: int = 0
    failed: int = 0
    errors: list[str] | None = None


def propose_turn_labels(
    *,
    session: Session,
    actor: User,
    spec: str,
    limit: int = 50,
    model: str | None = None,
    client=None,
    progress: Callable[[str, float], None] | None = None,
) -> LabelRun:
    """Ask the model for a label of up to `limit` unmatched turns of `spec` and store each
    as proposed. Raises NotConfigured without an API key. Leads only."""
    require_role(actor, Role.lead)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"--limit must lie between 1 and {MAX_LIMIT}, got {limit}")
    units = realism.units_to_label(session=session, actor=actor, spec=spec, limit=limit)
    run = LabelRun(errors=[])
    if not units:
        return run
    settings = get_settings()
    model = (model or settings.model).strip()
    client = client or model_client.make_client(settings)
    activities = realism.log_activities(session=session, name=units[0]["log"])
    system, digest = prompt_text(LABEL_PROMPT), label_prompt_sha256()
    for index, unit in enumerate(units):
        if progress:
            progress(f"turn {index + 1} of {len(units)}", index / len(units))
        request = forced_tool_request(
            model=model,
            system=system,
            tool=label_tool(activities),
            material=label_material(unit, activities),
            max_tokens=min(settings.model_max_tokens, 400),
        )
        try:
            answer = tool_input(client.messages.create(**request), TOOL_NAME, "label the turn")
            chosen = str(answer.get("activity", ""))
            if chosen not in activities and chosen != realism.NO_EVENT:
                raise UnusableAnswer(
                    RequestOutcome.malformed, f"{chosen!r} is not an activity of the log"
                )
        except UnusableAnswer as exc:
            run.failed += 1
            run.errors.append(f"transcript {unit['transcript_id']} turn {unit['turn']}: {exc}")
            continue
        except Exception as exc:
            import anthropic

            if not isinstance(exc, anthropic.APIError):
                raise
            run.failed += 1
            run.errors.append(f"{type(exc).__name__}: {getattr(exc, 'message', exc)}")
            continue
        label = None if chosen == realism.NO_EVENT else chosen
        realism.propose_label(
            session=session,
            actor=actor,
            spec=spec,
            unit=unit,
            label=label,
            reason=str(answer.get("reason", "")),
            model=model,
            prompt_sha256=digest,
        )
        run.proposed += 1
        run.no_event += label is None
    if progress:
        progress("done", 1.0)
    return run
