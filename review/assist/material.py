"""What the model rater reads of a task: what an expert sees beside it (task, transcripts, the
source variants' statistics), laid out as text inside a fence, bounded in size."""

import json
import math

from itsmreview.catalog import queries as catalog_queries
from itsmreview.catalog.models import Task, TaskVersion
from itsmreview.coverage.explorer import VariantDetail, source_details
from itsmreview.review.assist.prompts import fenced
from sqlmodel import Session

MAX_MESSAGE_CHARS = 4_000
MAX_TRANSCRIPT_CHARS = 120_000  # all transcripts of a task together
MAX_FIELD_CHARS = 20_000
TOP_ROLE_VALUES = 5


def _cut(text: str, limit: int) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit:,} more characters not shown]"


def _hours(seconds: float) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "unknown"
    return f"{seconds / 3600:,.1f} h" if seconds < 72 * 3600 else f"{seconds / 86400:,.1f} d"


def _message_line(turn: int, message: dict) -> str:
    actor = message.get("actor") or message.get("role") or "agent"
    head = f"[{turn}] {actor}"
    if message.get("time"):
        head += f" @ {message['time']}"
    parts = [_cut(str(message.get("content") or ""), MAX_MESSAGE_CHARS)]
    for call in message.get("tool_calls") or []:
        arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False, sort_keys=True)
        parts.append(f"(tool call {call.get('name')}: {_cut(arguments, MAX_MESSAGE_CHARS)})")
    return f"{head}: " + " ".join(p for p in parts if p)


def variant_summary(detail: VariantDetail) -> str:
    """A variant's statistics as the expert's variant panel shows them."""
    if not detail.found:
        return f"No case of log {detail.log_name!r} follows this sequence: " + " -> ".join(
            detail.sequence
        )
    durations = detail.durations_s
    lines = [
        f"Variant #{detail.rank} of {detail.n_variants:,} in log {detail.log_name!r}: "
        f"{detail.case_count:,} cases ({detail.share:.1%} of the log).",
        f"Case duration: median {_hours(durations['median'])}, 10th percentile "
        f"{_hours(durations['p10'])}, 90th percentile {_hours(durations['p90'])}.",
        "Steps: " + " -> ".join(detail.sequence),
    ]
    if not detail.roles.empty:
        roles = detail.roles.copy()
        roles["share"] = roles["events"] / roles.groupby("attribute")["events"].transform("sum")
        for attribute, rows in roles.sort_values("events", ascending=False).groupby("attribute"):
            top = rows.head(TOP_ROLE_VALUES)
            lines.append(
                f"{attribute} (events of {detail.role_cases:,} cases): "
                + ", ".join(f"{v} {s:.0%}" for v, s in zip(top["value"], top["share"], strict=True))
            )
    return "\n".join(lines)


def task_material(*, session: Session, task_version_id: int) -> str:
    """The fenced material of one task version, as the model rater reads it."""
    version = session.get(TaskVersion, task_version_id)
    task = session.get(Task, version.task_id)
    sections = [
        f"# Task {task.external_id} (version {version.version})",
        f"Title: {version.title}",
        f"Job persona: {version.persona or 'not stated'}",
        f"Track: {version.track or 'not stated'}",
    ]
    for heading, text in (
        ("Instruction", version.instruction),
        ("Environment", version.environment),
        ("Expected end state (ground truth)", version.ground_truth),
        ("Verifier", version.verifier),
    ):
        sections.append(f"## {heading}\n{_cut(text, MAX_FIELD_CHARS) or '(none given)'}")
    transcripts = catalog_queries.transcripts_of(session=session, task_version_id=version.id)
    lines, used = [], 0
    for transcript in transcripts:
        simulator = json.dumps(transcript.simulator or {}, ensure_ascii=False, sort_keys=True)
        lines.append(
            f"### Transcript {transcript.title or transcript.external_id} "
            f"({transcript.n_turns} turns; simulator {simulator})"
        )
        for turn, message in enumerate(transcript.messages or [], start=1):
            line = _message_line(turn, message)
            if used + len(line) > MAX_TRANSCRIPT_CHARS:
                lines.append(f"[... turns {turn}-{len(transcript.messages)} not shown]")
                break
            used += len(line)
            lines.append(line)
    sections.append("## Transcripts\n" + ("\n".join(lines) if lines else "(none)"))
    sequences = [list(s) for s in (version.source or {}).get("variants", [])]
    log_name = (version.source or {}).get("log")
    if sequences:
        details = source_details(session=session, log_name=log_name, sequences=sequences)
        sections.append(
            "## Source log variants\n" + "\n\n".join(variant_summary(d) for d in details)
        )
    else:
        sections.append("## Source log variants\n(the task declares none)")
    return fenced("\n\n".join(sections), "task_material")


def estimated_tokens(text: str) -> int:
    """A local estimate of a text's tokens (about 3.5 characters a token for English and
    JSON), for cost estimates before anything is sent."""
    return math.ceil(len(text) / 3.5)
