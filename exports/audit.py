"""The audit record of an export (issue 37): per task, the findings on it and on its earlier
versions (category, severity, anchors, the panel's decision, the digest the ledger holds), the
fields changed since the previous version (the fix), and its machine checks; AUDIT.md sums them
up for a reader, counts per category like the tau3 task-fix table. `export verify` checks
each finding against the ledger entry it cites."""

import json
from collections import Counter, defaultdict
from pathlib import Path

from itsmreview.ledger.chain import content_digest

AUDIT_FILE = "evidence/audit.jsonl"
AUDIT_MD = "AUDIT.md"
LEDGER_FILE = "evidence/ledger.jsonl"
FIELDS = ("title", "instruction", "environment", "ground_truth", "verifier", "source")


def finding_record(finding, task: str, version: int, pseudonym: str) -> dict:
    content = {
        "category": finding.category,
        "severity": finding.severity,
        "description": finding.description,
        "anchors": finding.anchors,
    }
    return {
        "id": finding.id,
        "task": task,
        "version": version,
        **content,
        "state": finding.state,
        "decision_reason": finding.decision_reason,
        "found_by": pseudonym,
        "content_sha256": content_digest(content),
    }


def changed_fields(before, after) -> list[str]:
    """The fields (and the expected end state) that differ between two versions of a task."""
    if before is None:
        return []
    names = [f for f in FIELDS if getattr(before, f) != getattr(after, f)]
    if (before.extra or {}).get("state") != (after.extra or {}).get("state"):
        names.append("expected end state")
    return names


def audit_records(
    exported: list[tuple[str, int]],
    findings: list[dict],
    previous: dict[str, list[str]],
    checks: dict[tuple[str, int], list[dict]],
    consensus: dict[str, list[dict]] | None = None,
) -> list[dict]:
    """One record per exported task version (task, version): its findings (of this version
    and earlier ones), the fields changed since the version before, its machine checks, and
    for a task of a Delphi round its consensus trail (every phase's answers under
    pseudonyms, each change with its reason)."""
    consensus = consensus or {}
    by_task = defaultdict(list)
    for found in findings:
        by_task[found["task"]].append(found)
    return [
        {
            "task": task,
            "version": version,
            "findings": [f for f in by_task[task] if f["version"] == version],
            "earlier_findings": [f for f in by_task[task] if f["version"] < version],
            "fixed_fields": previous.get(task, []),
            "machine_checks": checks.get((task, version), []),
            "consensus": consensus.get(task, []),
        }
        for task, version in exported
    ]


def audit_markdown(records: list[dict], taxonomy: dict[str, tuple[str, str]]) -> str:
    """AUDIT.md: findings per category (confirmed, open, rejected; major, minor), the machine
    checks' results, and each task's confirmed findings."""
    findings = [f for r in records for f in r["findings"] + r["earlier_findings"]]
    lines = [
        "# Audit of this task set",
        "",
        f"{len(records)} task(s); {len(findings)} finding(s) by the experts, "
        f"{sum(f['state'] == 'confirmed' for f in findings)} confirmed by the panel. "
        "Per task, `evidence/audit.jsonl` holds each finding with its anchors and the digest "
        "its ledger entry (in `evidence/ledger.jsonl`) records; `itsmreview export verify` "
        "checks them.",
        "",
        "| category | source | confirmed | open | rejected | major | minor |",
        "|---|---|---|---|---|---|---|",
    ]
    counts = Counter((f["category"], f["state"]) for f in findings)
    severity = Counter((f["category"], f["severity"]) for f in findings)
    for key, (label, source) in taxonomy.items():
        row = [counts[(key, s)] for s in ("confirmed", "open", "rejected")]
        row += [severity[(key, s)] for s in ("major", "minor")]
        if any(row):
            lines.append(f"| {label} | {source} | " + " | ".join(map(str, row)) + " |")
    checks = Counter((c["check"], c["status"]) for r in records for c in r["machine_checks"])
    if checks:
        lines += ["", "## Machine checks", "", "| check | pass | warn | fail | error |"]
        lines.append("|---|---|---|---|---|")
        for name in sorted({c for c, _ in checks}):
            row = [checks[(name, s)] for s in ("pass", "warn", "fail", "error")]
            lines.append(f"| {name} | " + " | ".join(map(str, row)) + " |")
    trail = [a for r in records for a in r.get("consensus", [])]
    if trail:
        later = [a for a in trail if a["phase"] > 1]
        moved = sum(a["changed"] for a in later)
        lines += [
            "",
            "## Consensus (Delphi)",
            "",
            f"{len(trail)} answers over {max(a['phase'] for a in trail)} phase(s); "
            f"{moved} of {len(later)} revised answers changed, each with its reason "
            "(phase 1 holds the blind ratings as given).",
        ]
    confirmed = [r for r in records if any(f["state"] == "confirmed" for f in r["findings"])]
    fixed = [r for r in records if r["earlier_findings"] and r["fixed_fields"]]
    if confirmed or fixed:
        lines += ["", "## Per task", ""]
    for record in confirmed:
        for f in record["findings"]:
            if f["state"] == "confirmed":
                label = taxonomy.get(f["category"], (f["category"], ""))[0]
                lines.append(
                    f"- **{record['task']}** v{record['version']}: {label} ({f['severity']}): "
                    f"{_one_line(f['description'])}"
                )
    for record in fixed:
        lines.append(
            f"- **{record['task']}** v{record['version']}: fixed after "
            f"{len(record['earlier_findings'])} finding(s) on earlier versions "
            f"(changed: {', '.join(record['fixed_fields'])})"
        )
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def verify_audit(folder: Path) -> list[str]:
    """Problems of the audit record against the ledger slice of the same export: each
    finding's content must hash to the digest its `add` entry records."""
    audit, ledger = folder / AUDIT_FILE, folder / LEDGER_FILE
    if not audit.is_file():
        return []
    recorded = {}
    if ledger.is_file():
        for line in ledger.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry.get("artifact_type") == "finding" and entry.get("action") == "add":
                recorded[str(entry.get("artifact_id"))] = (entry.get("payload") or {}).get(
                    "content_sha256"
                )
    problems = []
    for number, line in enumerate(audit.read_text(encoding="utf-8").splitlines(), start=1):
        record = json.loads(line)
        for f in record.get("findings", []) + record.get("earlier_findings", []):
            content = {k: f.get(k) for k in ("category", "severity", "description", "anchors")}
            digest = content_digest(content)
            cited = recorded.get(str(f.get("id")))
            if cited is None:
                problems.append(
                    f"{AUDIT_FILE} line {number}: finding {f.get('id')} has no ledger entry"
                )
            elif cited != digest or f.get("content_sha256") != digest:
                problems.append(
                    f"{AUDIT_FILE} line {number}: finding {f.get('id')} differs from its "
                    "ledger entry"
                )
    return problems
