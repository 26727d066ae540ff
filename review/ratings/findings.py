"""Findings (issue 37): what an expert or a lead found wrong with a task version, in a fixed
taxonomy, with a severity and anchors to the evidence (a transcript turn, a step of a declared
log variant, a case of the log, a task field, a record of the expected end state). The panel
decides whether it stands: each other expert votes once, and PANEL_QUORUM votes of which at
least PANEL_MAJORITY agree settle it; a lead decides the rest (a split panel, or at once).
A later version of the task that fixes a finding is linked to it (the fix trail). Exports
carry every finding in the task's audit record. Every finding, vote, decision and fix goes to
the ledger, a finding with a digest of its content."""

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
PANEL_QUORUM = 3  # votes of other experts before the panel settles a finding by itself
PANEL_MAJORITY = 3 / 4  # the share of those votes that must agree


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
    _record(
        session,
        finding,
        "add",
        user,
        {
            "task": f"{task.external_id}@v{target.version}",
            "category": category,
            "severity": severity,
            "content_sha256": content_digest(finding_content(finding)),
        },
    )
    return finding


def _record(session: Session, finding: Finding, action: str, user: User, payload: dict) -> None:
    """The ledger entry of what happened to a finding."""
    append_entry(
        session=session,
        artifact_type="finding",
        artifact_id=str(finding.id),
        action=action,
        source_kind="expert",
        actor_id=user.id,
        payload=payload,
    )


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
    _record(session, finding, finding.state, user, {"reason": finding.decision_reason})
    return finding


def settles(votes: list[bool]) -> str | None:
    """The panel's decision from its votes (True: the finding stands), or None while it
    has fewer than PANEL_QUORUM votes or no PANEL_MAJORITY agrees.

    >>> settles([True, True]), settles([True, True, False]), settles([True, True, True, False])
    (None, None, 'confirmed')
    >>> settles([False, False, False]), settles([True, False, False, True])
    ('rejected', None)
    """
    if len(votes) < PANEL_QUORUM:
        return None
    share = sum(votes) / len(votes)
    if share >= PANEL_MAJORITY:
        return "confirmed"
    if 1 - share >= PANEL_MAJORITY:
        return "rejected"
    return None


def vote_on_finding(
    *, session: Session, actor: User, finding_id: int, stands: bool, reason: str = ""
) -> dict:
    """An expert's vote on whether another's open finding stands (a vote against needs a
    reason). When the votes settle it (`settles`), the finding is confirmed or rejected by
    the panel at once. Experts only, once per finding; the author does not vote. Returns the
    finding's state and its votes for and against."""
    user = require_role(actor, Role.expert)
    finding = session.get(Finding, finding_id)
    if finding is None:
        raise NotFound(f"no finding {finding_id}")
    if finding.author_id == user.id:
        raise InvalidInput("you reported this finding: the other experts judge it")
    reason = (reason or "").strip()
    if not stands and not reason:
        raise InvalidInput("say why you judge that the finding does not stand")
    if not queries.add_finding_vote(
        session=session,
        finding_id=finding.id,
        expert_id=user.id,
        stands=stands,
        reason=reason[:MAX_TEXT],
        at=utcnow(),
    ):
        session.refresh(finding)
        if finding.state != "open":
            raise Conflict(f"finding {finding_id} was {finding.state} already")
        raise Conflict(f"you voted on finding {finding_id} already")
    _record(session, finding, "vote", user, {"stands": stands, "reason": reason[:MAX_TEXT]})
    votes = [v.stands for v in queries.finding_votes(session=session, finding_ids=[finding.id])]
    decided = settles(votes)
    tally = {"for": sum(votes), "against": len(votes) - sum(votes)}
    if decided is not None and queries.settle_finding(
        session=session,
        finding_id=finding.id,
        state=decided,
        user_id=None,
        at=utcnow(),
        reason=f"the panel: {tally['for']} for, {tally['against']} against",
    ):
        session.refresh(finding)
        _record(
            session,
            finding,
            decided,
            user,
            {"reason": finding.decision_reason, "by": "panel", "votes": tally},
        )
    session.refresh(finding)
    return {"id": finding.id, "state": finding.state, "votes": tally}


def findings_to_vote(*, session: Session, actor: User, task_version_id: int) -> list[dict]:
    """The open findings on a task version the expert may still vote on (another's, not
    voted yet): id, category, severity, description, anchors. Experts only."""
    user = require_role(actor, Role.expert)
    return [
        {
            "id": f.id,
            "category": f.category,
            "severity": f.severity,
            "description": f.description,
            "anchors": f.anchors,
        }
        for f in queries.findings_to_vote(
            session=session, task_version_id=task_version_id, expert_id=user.id
        )
    ]


def link_fix(*, session: Session, actor: User, finding_id: int, version: int) -> Finding:
    """Record that `version` of the finding's task fixes it (a later version; the finding
    not rejected). Leads only, once per finding."""
    user = require_role(actor, Role.lead)
    finding = session.get(Finding, finding_id)
    if finding is None:
        raise NotFound(f"no finding {finding_id}")
    if finding.state == "rejected":
        raise InvalidInput(f"finding {finding_id} was rejected: there is nothing to fix")
    found_on = session.get(TaskVersion, finding.task_version_id)
    task = catalog_queries.task_of_version(session=session, task_version_id=found_on.id)
    fixing = catalog_queries.version_of(session=session, task_id=task.id, version=version)
    if fixing is None or version <= found_on.version:
        raise InvalidInput(
            f"the fix is a later version of {task.external_id} than v{found_on.version}, "
            f"the version the finding is on; v{version} is "
            + ("not one of its versions" if fixing is None else "not later")
        )
    if not queries.mark_fixed(session=session, finding_id=finding.id, version_id=fixing.id):
        raise Conflict(f"finding {finding_id} is linked to its fix already")
    session.refresh(finding)
    _record(
        session,
        finding,
        "fix",
        user,
        {"task": task.external_id, "found_on": found_on.version, "fixed_in": version},
    )
    return finding


def panel_and_fixes(*, session: Session, findings: list[Finding]) -> dict[int, dict]:
    """Per finding id: `votes` (for and against) and `fixed_in` (the number of the version
    linked as its fix, or None), in two reads whatever the number of findings."""
    votes: dict[int, list[bool]] = {f.id: [] for f in findings}
    for vote in queries.finding_votes(session=session, finding_ids=list(votes)):
        votes[vote.finding_id].append(vote.stands)
    numbers = queries.version_numbers(
        session=session, ids=[f.fixed_in_version_id for f in findings if f.fixed_in_version_id]
    )
    return {
        f.id: {
            "votes": {"for": sum(votes[f.id]), "against": votes[f.id].count(False)},
            "fixed_in": numbers.get(f.fixed_in_version_id),
        }
        for f in findings
    }


def list_findings(
    *, session: Session, actor: User, external_id: str | None = None, state: str | None = None
) -> list[dict]:
    """Findings (of one task, in one state), oldest first, with the panel's votes for and
    against and the version that fixes each (None while none does). Experts and leads."""
    require_role(actor, Role.expert, Role.lead)
    rows = queries.findings_listed(session=session, external_id=external_id, state=state)
    panel = panel_and_fixes(session=session, findings=[f for f, *_ in rows])
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
            **panel[f.id],
            "created_at": _iso(f.created_at),
        }
        for f, task, number, author in rows
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
