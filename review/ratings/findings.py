"""Findings (issue 37): what an expert or a lead found wrong with a task version, in a fixed
taxonomy, with a severity and anchors to the evidence (a transcript turn, a step of a declared
log variant, a case of the log, a task field, a record of the expected end state). A lead
decides for the panel whether it stands; exports carry every finding in the task's audit
record. Every finding and decision goes to the ledger with a digest of its content."""

from datetime import datetime

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries as catalog_queries
from itsmreview.catalog.models import TaskVersion
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, InvalidInput, NotFound
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entry
from itsmreview.review.models import Finding
from itsmreview.review.ratings import queries
from sqlmodel import Session

# category -> (label, where it comes from)
TAXONOMY = {
    "incorrect_expected_actions": ("Incorrect expected actions", "tau3 task fixes"),
    "ambiguous_user_instructions": ("Ambiguous user instructions", "tau3 task fixes"),
    "impossible_constraints": ("Impossible constraints", "tau3 task fixes"),
    "missing_fallbacks": ("Missing fallbacks", "tau3 task fixes"),
    "policy_loopholes": ("Policy loopholes", "tau3 task fixes"),
    "ambiguous_design": ("Ambiguous design", "agent benchmark audit (arXiv 2605.26079)"),
    "environment_conflicts": ("Environment conflicts", "agent benchmark audit"),
    "incorrect_ground_truth": ("Incorrect ground truth", "agent benchmark audit"),
    "hidden_dependencies": ("Hidden dependencies", "agent benchmark audit"),
    "specification_gaps": ("Specification gaps", "agent benchmark audit"),
    "limited_grading": ("Limited grading", "agent benchmark audit"),
    "unrealistic_actor": ("Unrealistic simulated actor", "itsmreview"),
    "wrong_routing": ("Wrong routing", "itsmreview"),
    "missing_log_evidence": ("Missing log evidence", "itsmreview"),
}
SEVERITIES = ("major", "minor")
TASK_FIELDS = ("title", "instruction", "environment", "ground_truth", "verifier", "source")
ANCHOR_KINDS = ("transcript_turn", "variant_step", "log_case", "task_field", "end_state")
MAX_ANCHORS = 20
MAX_TEXT = 4000


def parse_anchor(text: str) -> dict:
    """An anchor from its short form: turn:TRANSCRIPT:N, step:N, case:ID, field:NAME or
    state:ENTITY[:KEY].

    >>> parse_anchor("turn:run-1:3")
    {'kind': 'transcript_turn', 'transcript': 'run-1', 'turn': 3}
    >>> parse_anchor("state:incident:INC1")
    {'kind': 'end_state', 'entity': 'incident', 'key': 'INC1'}
    """
    kind, _, rest = text.partition(":")
    try:
        if kind == "turn":
            transcript, _, turn = rest.rpartition(":")
            return {"kind": "transcript_turn", "transcript": transcript, "turn": int(turn)}
        if kind == "step":
            return {"kind": "variant_step", "step": int(rest)}
        if kind == "case":
            return {"kind": "log_case", "case_id": rest}
        if kind == "field":
            return {"kind": "task_field", "field": rest}
        if kind == "state":
            entity, _, key = rest.partition(":")
            return {"kind": "end_state", "entity": entity, "key": key}
    except ValueError:
        pass
    raise InvalidInput(
        f"anchor {text!r}: write turn:TRANSCRIPT:N, step:N, case:ID, field:NAME or "
        "state:ENTITY[:KEY]"
    )


def _checked_anchor(anchor: dict, version: TaskVersion, transcripts: dict[str, int]) -> dict:
    """The anchor if it points at something the task version has; InvalidInput otherwise."""
    kind = anchor.get("kind")
    if kind == "transcript_turn":
        name, turn = str(anchor.get("transcript", "")), anchor.get("turn")
        if name not in transcripts:
            known = ", ".join(sorted(transcripts)) or "none"
            raise InvalidInput(f"the task has no transcript {name!r} (its transcripts: {known})")
        if not isinstance(turn, int) or not 1 <= turn <= transcripts[name]:
            raise InvalidInput(f"turn {turn} is outside 1..{transcripts[name]} of {name!r}")
        return {"kind": kind, "transcript": name, "turn": turn}
    if kind == "variant_step":
        longest = max((len(v) for v in (version.source or {}).get("variants") or []), default=0)
        step = anchor.get("step")
        if not longest:
            raise InvalidInput("the task declares no log variant: a step cannot be named")
        if not isinstance(step, int) or not 1 <= step <= longest:
            raise InvalidInput(f"step {step} is outside 1..{longest} of the declared variants")
        return {"kind": kind, "step": step}
    if kind == "log_case":
        case = str(anchor.get("case_id", "")).strip()
        if not case or len(case) > 256:
            raise InvalidInput("a case anchor names a case id of 1 to 256 characters")
        return {"kind": kind, "case_id": case}
    if kind == "task_field":
        field = anchor.get("field")
        if field not in TASK_FIELDS:
            raise InvalidInput(f"field {field!r} is not one of {', '.join(TASK_FIELDS)}")
        return {"kind": kind, "field": field}
    if kind == "end_state":
        entity, key = str(anchor.get("entity", "")), str(anchor.get("key", ""))
        changes = ((version.extra or {}).get("state") or {}).get("changes") or []
        if not any(c.get("entity") == entity and (not key or c.get("key") == key) for c in changes):
            raise InvalidInput(f"the expected end state changes no record {entity}:{key}")
        return {"kind": kind, "entity": entity, "key": key}
    raise InvalidInput(f"anchor kind {kind!r} is not one of {', '.join(ANCHOR_KINDS)}")


def _version(session: Session, external_id: str, version: int | None) -> TaskVersion:
    task = catalog_queries.task_by_external_id(session=session, external_id=external_id)
    if task is None:
        raise NotFound(f"no task {external_id!r}")
    found = (
        catalog_queries.latest_version(session=session, task_id=task.id)
        if version is None
        else catalog_queries.version_of(session=session, task_id=task.id, version=version)
    )
    if found is None:
        raise NotFound(f"task {external_id!r} has no version {version}")
    return found


def add_finding(
    *,
    session: Session,
    actor: User,
    category: str,
    severity: str,
    description: str,
    anchors: list[dict],
    external_id: str | None = None,
    version: int | None = None,
    task_version_id: int | None = None,
) -> Finding:
    """Record a finding on a task version (named by id, or by task and version, the newest
    by default). Experts and leads. Raises InvalidInput naming what is wrong: an unknown
    category or severity, no description or anchor, an anchor the task does not have."""
    user = require_role(actor, Role.expert, Role.lead)
    if category not in TAXONOMY:
        raise InvalidInput(f"category {category!r} is not one of {', '.join(TAXONOMY)}")
    if severity not in SEVERITIES:
        raise InvalidInput(f"severity is major or minor, not {severity!r}")
    description = (description or "").strip()
    if not description or len(description) > MAX_TEXT:
        raise InvalidInput(f"say what is wrong in 1 to {MAX_TEXT:,} characters")
    if not anchors or len(anchors) > MAX_ANCHORS:
        raise InvalidInput(f"point at 1 to {MAX_ANCHORS} places that show it (anchors)")
    if task_version_id is not None:
        target = session.get(TaskVersion, task_version_id)
        if target is None:
            raise NotFound(f"no task version {task_version_id}")
    else:
        target = _version(session, external_id or "", version)
    transcripts = {
        t.external_id: t.n_turns
        for t in catalog_queries.transcripts_of(session=session, task_version_id=target.id)
    }
    checked = [_checked_anchor(a, target, transcripts) for a in anchors]
    finding = Finding(
        task_version_id=target.id,
        author_id=user.id,
        category=category,
        severity=severity,
        description=description,
        anchors=checked,
    )
    session.add(finding)
    session.flush()
    task = catalog_queries.task_of_version(session=session, task_version_id=target.id)
    append_entry(
        session=session,
        artifact_type="finding",
        artifact_id=str(finding.id),
        action="add",
        source_kind="expert",
        actor_id=user.id,
        payload={
            "task": f"{task.external_id}@v{target.version}",
            "category": category,
            "severity": severity,
            "content_sha256": content_digest(finding_content(finding)),
        },
    )
    return finding


def finding_content(finding: Finding) -> dict:
    """What a finding's digest commits to (the ledger keeps the digest)."""
    return {
        "category": finding.category,
        "severity": finding.severity,
        "description": finding.description,
        "anchors": finding.anchors,
    }


def decide_finding(
    *, session: Session, actor: User, finding_id: int, confirm: bool, reason: str = ""
) -> Finding:
    """The panel's decision on a finding, taken by a lead: it stands (confirmed) or not
    (rejected, with a reason). Raises Conflict for a finding decided already."""
    user = require_role(actor, Role.lead)
    finding = session.get(Finding, finding_id)
    if finding is None:
        raise NotFound(f"no finding {finding_id}")
    reason = (reason or "").strip()
    if finding.state == "open" and not confirm and not reason:
        raise InvalidInput("say why the finding does not stand (--reason)")
    state = "confirmed" if confirm else "rejected"
    if finding.state != "open" or not queries.settle_finding(
        session=session,
        finding_id=finding.id,
        state=state,
        user_id=user.id,
        at=utcnow(),
        reason=reason[:MAX_TEXT],
    ):
        session.refresh(finding)
        raise Conflict(f"finding {finding_id} was {finding.state} already")
    session.refresh(finding)
    append_entry(
        session=session,
        artifact_type="finding",
        artifact_id=str(finding.id),
        action=finding.state,
        source_kind="expert",
        actor_id=user.id,
        payload={"reason": finding.decision_reason},
    )
    return finding


def list_findings(
    *, session: Session, actor: User, external_id: str | None = None, state: str | None = None
) -> list[dict]:
    """Findings (of one task, in one state), oldest first. Experts and leads."""
    require_role(actor, Role.expert, Role.lead)
    return [
        {
            "id": f.id,
            "task": task,
            "version": number,
            "category": f.category,
            "severity": f.severity,
            "description": f.description,
            "anchors": f.anchors,
            "state": f.state,
            "author": author,
            "decision_reason": f.decision_reason,
            "created_at": _iso(f.created_at),
        }
        for f, task, number, author in queries.findings_listed(
            session=session, external_id=external_id, state=state
        )
    ]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def anchor_text(anchor: dict) -> str:
    """An anchor as a reader sees it: 'turn 3 of run-1', 'step 2 of the variant', ..."""
    kind = anchor["kind"]
    if kind == "transcript_turn":
        return f"turn {anchor['turn']} of {anchor['transcript']}"
    if kind == "variant_step":
        return f"step {anchor['step']} of the source variant"
    if kind == "log_case":
        return f"log case {anchor['case_id']}"
    if kind == "task_field":
        return f"the task's {anchor['field']}"
    return f"end state {anchor['entity']}" + (f":{anchor['key']}" if anchor["key"] else "")
