"""The audit record of an export (issue 37): per task, the findings on it and on its earlier
versions (category, severity, anchors, the panel's decision, the digest the ledger holds), the
fields changed since the version the findings were made on (the fix, each field with its value
before and after), and its machine checks; AUDIT.md sums them up for a reader, counts per
category like the tau3 task-fix table. Each task's line in evidence/audit.jsonl is summed up
(`summary`) beside the task in every format, with the line's sha256. `export verify` checks
each finding against the ledger entry it cites, and each summary against its line."""

import difflib
import hashlib
import json
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from itsmreview.exports import harbor, hf, native, tau2
from itsmreview.exports.bundle import jsonl
from itsmreview.files import safe_join
from itsmreview.ledger.chain import content_digest

AUDIT_FILE = "evidence/audit.jsonl"
AUDIT_MD = "AUDIT.md"
LEDGER_FILE = "evidence/ledger.jsonl"
FIELDS = ("title", "instruction", "environment", "ground_truth", "verifier", "source")
END_STATE = "expected end state"
VALUE_LIMIT = 2000  # characters of a value shown before and after a fix; the rest by digest
DIFF_LIMIT = 4000  # characters of a fix's unified diff
BAD_CHECKS = ("fail", "error")


def finding_record(
    finding,
    task: str,
    version: int,
    pseudonym: str,
    *,
    votes: dict | None = None,
    fixed_in: int | None = None,
) -> dict:
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
        "votes": votes or {"for": 0, "against": 0},
        "fixed_in": fixed_in,
        "content_sha256": content_digest(content),
    }


def changed_fields(before, after) -> list[str]:
    """The fields (and the expected end state) that differ between two versions of a task."""
    return [change["field"] for change in field_diff(before, after)]


def _values(version) -> dict:
    values = {f: getattr(version, f) for f in FIELDS}
    values[END_STATE] = (version.extra or {}).get("state")
    return values


def as_text(value) -> str:
    r"""A field's value as the diff shows it: text as it is, nothing as "", anything else
    (a source, an end state) as JSON with sorted keys, two spaces a level.

    >>> as_text(None), as_text("Reset it"), as_text({"b": 1, "a": [2]})
    ('', 'Reset it', '{\n  "a": [\n    2\n  ],\n  "b": 1\n}')
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2)


def sha256_text(text: str) -> str:
    """The sha256 (hex) of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def change(field: str, before: str, after: str) -> dict:
    """One changed field as the audit record holds it: the text before and after (each cut at
    VALUE_LIMIT characters, `truncated` then true), the sha256 of each whole text, and a
    unified diff of the whole texts (cut at DIFF_LIMIT characters, `diff_truncated`).

    >>> c = change("title", "Reset VPN", "Reset the VPN token")
    >>> c["before"], c["after"], c["truncated"]
    ('Reset VPN', 'Reset the VPN token', False)
    >>> print(c["diff"], end="")
    --- title (before)
    +++ title (after)
    @@ -1 +1 @@
    -Reset VPN
    +Reset the VPN token
    """
    diff = "".join(
        line if line.endswith("\n") else line + "\n"
        for line in difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"{field} (before)",
            f"{field} (after)",
            n=3,
        )
    )
    return {
        "field": field,
        "before": before[:VALUE_LIMIT],
        "after": after[:VALUE_LIMIT],
        "truncated": len(before) > VALUE_LIMIT or len(after) > VALUE_LIMIT,
        "before_sha256": sha256_text(before),
        "after_sha256": sha256_text(after),
        "diff": diff[:DIFF_LIMIT],
        "diff_truncated": len(diff) > DIFF_LIMIT,
    }


def field_diff(before, after) -> list[dict]:
    """Each field (and the expected end state, task.extra["state"]) that differs between two
    versions of a task, in FIELDS order, with its value before and after (`change`)."""
    if before is None:
        return []
    old, new = _values(before), _values(after)
    return [
        change(name, as_text(old[name]), as_text(new[name]))
        for name in (*FIELDS, END_STATE)
        if old[name] != new[name]
    ]


def audit_records(
    exported: list[tuple[str, int]],
    findings: list[dict],
    previous: dict[str, dict],
    checks: dict[tuple[str, int], list[dict]],
    consensus: dict[str, list[dict]] | None = None,
) -> list[dict]:
    """One record per exported task version (task, version): its findings (of this version
    and earlier ones), the fix (`previous[task]`: `since`, the version the newest earlier
    findings were made on, its and the exported version's content hashes, and `changes`, the
    field diff), its machine checks, and for a task of a Delphi round its consensus trail
    (every phase's answers under pseudonyms, each change with its reason)."""
    consensus = consensus or {}
    by_task = defaultdict(list)
    for found in findings:
        by_task[found["task"]].append(found)
    records = []
    for task, version in exported:
        fix = previous.get(task) or {}
        records.append(
            {
                "task": task,
                "version": version,
                "findings": [f for f in by_task[task] if f["version"] == version],
                "earlier_findings": [f for f in by_task[task] if f["version"] < version],
                "fixed_since": fix.get("since"),
                "fixed_from_content_hash": fix.get("from_content_hash"),
                "fixed_to_content_hash": fix.get("to_content_hash"),
                "fixed_fields": [c["field"] for c in fix.get("changes", [])],
                "fixed": fix.get("changes", []),
                "machine_checks": checks.get((task, version), []),
                "consensus": consensus.get(task, []),
            }
        )
    return records


def record_line(record: dict) -> str:
    """A record's line in evidence/audit.jsonl, its line break included."""
    return jsonl([record])


def summary(record: dict, line_sha256: str) -> dict:
    """The compact audit summary written beside a task in every format: findings (on this
    version and earlier ones) by state and severity, the categories of confirmed ones, the
    fix (version fixed since and fields changed), failed machine checks, the consensus trail
    (phases, answers changed) and the sha256 of the task's line in evidence/audit.jsonl.
    Every key is always there, of one type (`fixed_since` is null without a fix).

    >>> s = summary({"findings": [{"state": "confirmed", "severity": "major",
    ...     "category": "wrong_routing"}], "earlier_findings": [], "fixed_since": None,
    ...     "fixed_fields": [], "machine_checks": [{"check": "structure", "status": "fail"}],
    ...     "consensus": []}, "ab12")
    >>> s["findings_confirmed"], s["confirmed_categories"], s["failed_checks"], s["sha256"]
    (1, ['wrong_routing'], ['structure'], 'ab12')
    """
    found = record["findings"] + record["earlier_findings"]
    states = Counter(f["state"] for f in found)
    severities = Counter(f["severity"] for f in found)
    trail = record.get("consensus") or []
    return {
        "sha256": line_sha256,
        "findings": len(found),
        "findings_open": states["open"],
        "findings_confirmed": states["confirmed"],
        "findings_rejected": states["rejected"],
        "findings_major": severities["major"],
        "findings_minor": severities["minor"],
        "confirmed_categories": sorted({f["category"] for f in found if f["state"] == "confirmed"}),
        "fixed_since": record.get("fixed_since"),
        "fixed_fields": list(record.get("fixed_fields") or []),
        "failed_checks": sorted(
            {c["check"] for c in record["machine_checks"] if c["status"] in BAD_CHECKS}
        ),
        "consensus_phases": max((a["phase"] for a in trail), default=0),
        "consensus_changed": sum(bool(a.get("changed")) for a in trail if a["phase"] > 1),
    }


def summaries(records: list[dict]) -> tuple[str, dict[tuple[str, int], dict]]:
    """evidence/audit.jsonl's text and each record's summary by (task, version); a summary's
    `sha256` is that of the record's line without its line break."""
    lines = [record_line(r) for r in records]
    by_version = {
        (r["task"], r["version"]): summary(r, sha256_text(line[:-1]))
        for r, line in zip(records, lines, strict=True)
    }
    return "".join(lines), by_version


def summaries_in_order(lines: Iterable[str]) -> Iterator[tuple[tuple[str, int], dict]]:
    """`summaries`' second half from evidence/audit.jsonl's lines as written, one at a time:
    ((task, version), summary) of each record in the file's order."""
    for line in lines:
        record = json.loads(line)
        yield (
            (record["task"], record["version"]),
            summary(record, sha256_text(line.removesuffix("\n"))),
        )


def audit_markdown(records: Iterable[dict], taxonomy: dict[str, tuple[str, str]]) -> str:
    """AUDIT.md: findings per category (confirmed, open, rejected; major, minor), the machine
    checks' results, the Delphi trail, each task's confirmed findings and fixes, and each
    fix's unified diff."""
    tally = AuditTally()
    for record in records:
        tally.add(record)
    return tally.markdown(taxonomy)


class AuditTally:
    """What AUDIT.md sums up, gathered a record at a time: counts, and only the records it
    shows one by one (those with confirmed findings or a fix)."""

    def __init__(self) -> None:
        self.records = self.findings = self.confirmed_findings = 0
        self.counts: Counter = Counter()  # (category, state)
        self.severity: Counter = Counter()  # (category, severity)
        self.checks: Counter = Counter()  # (check, status)
        self.answers = self.phases = self.revised = self.moved = 0
        self.confirmed: list[dict] = []
        self.fixed: list[dict] = []

    def add(self, record: dict) -> None:
        self.records += 1
        for f in record["findings"] + record["earlier_findings"]:
            self.findings += 1
            self.confirmed_findings += f["state"] == "confirmed"
            self.counts[(f["category"], f["state"])] += 1
            self.severity[(f["category"], f["severity"])] += 1
        self.checks.update((c["check"], c["status"]) for c in record["machine_checks"])
        for a in record.get("consensus", []):
            self.answers += 1
            self.phases = max(self.phases, a["phase"])
            if a["phase"] > 1:
                self.revised += 1
                self.moved += a["changed"]
        if any(f["state"] == "confirmed" for f in record["findings"]):
            self.confirmed.append(record)
        if record["earlier_findings"] and record["fixed_fields"]:
            self.fixed.append(record)

    def markdown(self, taxonomy: dict[str, tuple[str, str]]) -> str:
        lines = [
            "# Audit of this task set",
            "",
            f"{self.records} task(s); {self.findings} finding(s) by the experts, "
            f"{self.confirmed_findings} confirmed by the panel. "
            "Per task, `evidence/audit.jsonl` holds each finding with its anchors and the "
            "digest its ledger entry (in `evidence/ledger.jsonl`) records; `itsmreview export "
            "verify` checks them.",
            "",
            "| category | source | confirmed | open | rejected | major | minor |",
            "|---|---|---|---|---|---|---|",
        ]
        counts, severity, checks = self.counts, self.severity, self.checks
        for key, (label, source) in taxonomy.items():
            row = [counts[(key, s)] for s in ("confirmed", "open", "rejected")]
            row += [severity[(key, s)] for s in ("major", "minor")]
            if any(row):
                lines.append(f"| {label} | {source} | " + " | ".join(map(str, row)) + " |")
        if checks:
            lines += ["", "## Machine checks", "", "| check | pass | warn | fail | error |"]
            lines.append("|---|---|---|---|---|")
            for name in sorted({c for c, _ in checks}):
                row = [checks[(name, s)] for s in ("pass", "warn", "fail", "error")]
                lines.append(f"| {name} | " + " | ".join(map(str, row)) + " |")
        if self.answers:
            lines += [
                "",
                "## Consensus (Delphi)",
                "",
                f"{self.answers} answers over {self.phases} phase(s); "
                f"{self.moved} of {self.revised} revised answers changed, each with its reason "
                "(phase 1 holds the blind ratings as given).",
            ]
        return "\n".join(lines + _per_task(self.confirmed, self.fixed, taxonomy)) + "\n"


def _per_task(
    confirmed: list[dict], fixed: list[dict], taxonomy: dict[str, tuple[str, str]]
) -> list[str]:
    """AUDIT.md's lines on each task with confirmed findings or a fix, and each fix's diff."""
    lines = []
    if confirmed or fixed:
        lines += ["", "## Per task", ""]
    for record in confirmed:
        for f in record["findings"]:
            if f["state"] == "confirmed":
                label = taxonomy.get(f["category"], (f["category"], ""))[0]
                votes = f.get("votes") or {}
                panel = (
                    f" (the panel's votes: {votes['for']} for, {votes['against']} against)"
                    if votes.get("for") or votes.get("against")
                    else ""
                )
                lines.append(
                    f"- **{record['task']}** v{record['version']}: {label} ({f['severity']}): "
                    f"{_one_line(f['description'])}{panel}"
                )
    for record in fixed:
        linked = [
            f"#{f['id']}" for f in record["earlier_findings"] if f.get("fixed_in") is not None
        ]
        lines.append(
            f"- **{record['task']}** v{record['version']}: fixed after "
            f"{len(record['earlier_findings'])} finding(s) on earlier versions "
            f"(since v{record['fixed_since']}; changed: {', '.join(record['fixed_fields'])})"
            + (f"; a lead linked {', '.join(linked)} to the fix" if linked else "")
        )
    if fixed:
        lines += ["", "## Fixes", ""]
        lines.append(
            "Each field changed since the version the findings were made on, as a unified "
            f"diff (cut at {DIFF_LIMIT:,} characters; `evidence/audit.jsonl` holds the values "
            "before and after and their sha256)."
        )
    for record in fixed:
        for fix in record.get("fixed", []):
            fence = _fence(fix["diff"])
            lines += [
                "",
                f"**{record['task']}** v{record['fixed_since']} -> v{record['version']}, "
                f"{fix['field']}" + (" (cut)" if fix.get("diff_truncated") else "") + ":",
                "",
                f"{fence}diff",
                fix["diff"].rstrip("\n"),
                fence,
            ]
    return lines


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`.

    >>> _fence("a ``` b")
    '````'
    """
    longest, run = 0, 0
    for c in text:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def _lines(path: Path) -> list[str]:
    """A JSON-lines file's lines, split at line feeds only (a JSON string may hold U+2028,
    which `str.splitlines` would split at)."""
    text = path.read_text(encoding="utf-8")
    return [line for line in text.split("\n") if line]


def _ledger(folder: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The ledger slice's digests: each finding's `add` entry's content_sha256, and each task
    version's `import` entry's content_hash (by `task@vN`)."""
    findings, versions = {}, {}
    ledger = folder / LEDGER_FILE
    if ledger.is_file():
        for line in _lines(ledger):
            entry = json.loads(line)
            payload = entry.get("payload") or {}
            if entry.get("artifact_type") == "finding" and entry.get("action") == "add":
                findings[str(entry.get("artifact_id"))] = payload.get("content_sha256")
            elif entry.get("artifact_type") == "task" and entry.get("action") == "import":
                versions[str(entry.get("artifact_id"))] = payload.get("content_hash")
    return findings, versions


def verify_audit(folder: Path) -> list[str]:
    """Problems of the audit record against the ledger slice of the same export: each
    finding's content must hash to the digest its `add` entry records; each fix must name
    versions whose content hashes the slice records, and each value shown whole must hash to
    its digest; each task's audit summary in every format (`verify_summaries`) must be the
    one its line gives."""
    audit = folder / AUDIT_FILE
    if not audit.is_file():
        return []
    recorded, hashes = _ledger(folder)
    problems, expected = [], {}
    for number, line in enumerate(_lines(audit), start=1):
        record = json.loads(line)
        where = f"{AUDIT_FILE} line {number}"
        for f in record.get("findings", []) + record.get("earlier_findings", []):
            content = {k: f.get(k) for k in ("category", "severity", "description", "anchors")}
            digest = content_digest(content)
            cited = recorded.get(str(f.get("id")))
            if cited is None:
                problems.append(f"{where}: finding {f.get('id')} has no ledger entry")
            elif cited != digest or f.get("content_sha256") != digest:
                problems.append(f"{where}: finding {f.get('id')} differs from its ledger entry")
        problems += _fix_problems(record, hashes, where)
        expected[(record["task"], record["version"])] = summary(record, sha256_text(line))
    return problems + verify_summaries(folder, expected)


def _fix_problems(record: dict, hashes: dict[str, str], where: str) -> list[str]:
    """A fix that names versions the ledger slice does not record with those content hashes,
    or shows a value that does not hash to its digest."""
    task, since = record["task"], record.get("fixed_since")
    problems = []
    if since is not None and (
        hashes.get(f"{task}@v{since}") != record.get("fixed_from_content_hash")
        or hashes.get(f"{task}@v{record['version']}") != record.get("fixed_to_content_hash")
    ):
        problems.append(
            f"{where}: the fix of task {task} names versions v{since} and "
            f"v{record['version']} with content hashes the ledger slice does not record"
        )
    for fix in record.get("fixed") or []:
        if fix.get("truncated"):
            continue
        if (
            sha256_text(fix["before"]) != fix["before_sha256"]
            or sha256_text(fix["after"]) != fix["after_sha256"]
        ):
            problems.append(
                f"{where}: task {task}'s {fix['field']} before or after the fix differs from "
                "its sha256"
            )
    return problems


def verify_summaries(folder: Path, expected: dict[tuple[str, int], dict]) -> list[str]:
    """Each task's audit summary beside it in every format written (native `itsmreview.audit`,
    the Hugging Face row's `audit_*` columns and its copy of evidence/audit.jsonl, Harbor's
    `[metadata.itsmreview_audit]`, the tau2 sidecar) against `expected`, the summaries that
    evidence/audit.jsonl gives."""
    problems = []
    try:
        found = _summaries_found(folder)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        return [f"an audit summary beside the tasks is unreadable ({exc!r})"]
    for where, key, audit in found:
        if key not in expected:
            problems.append(f"{where}: task {key[0]} v{key[1]} has no line in {AUDIT_FILE}")
        elif audit != expected[key]:
            problems.append(
                f"{where}: the audit summary of task {key[0]} v{key[1]} differs from its line "
                f"in {AUDIT_FILE}"
            )
    copy = folder / hf.ROOT / AUDIT_FILE
    if copy.is_file() and copy.read_bytes() != (folder / AUDIT_FILE).read_bytes():
        problems.append(f"{hf.ROOT}/{AUDIT_FILE} differs from {AUDIT_FILE}")
    return problems


def _summaries_found(folder: Path) -> list[tuple[str, tuple[str, int], dict | None]]:
    """(where, (task, version), summary) of each summary written beside a task."""
    found = []
    path = folder / native.PATH
    if path.is_file():
        for number, line in enumerate(_lines(path), start=1):
            task = json.loads(line)
            record = task[native.EXPORT_KEY]
            found.append(
                (f"{native.PATH} line {number}", (task["id"], record["version"]), record["audit"])
            )
    path = folder / hf.ROOT / "data/train.jsonl"
    if path.is_file():
        for number, line in enumerate(_lines(path), start=1):
            row = json.loads(line)
            audit = {
                k.removeprefix(hf.AUDIT_PREFIX): v
                for k, v in row.items()
                if k.startswith(hf.AUDIT_PREFIX)
            }
            where = f"{hf.ROOT}/data/train.jsonl line {number}"
            found.append((where, (row["id"], row["version"]), audit))
    path = folder / harbor.ROOT / harbor.SIDECAR
    if path.is_file():
        for entry in json.loads(path.read_text(encoding="utf-8"))["tasks"]:
            relative = f"{harbor.ROOT}/{entry['folder']}/task.toml"
            config = tomllib.loads(safe_join(folder, relative).read_text(encoding="utf-8"))
            audit = (config.get("metadata") or {}).get(harbor.AUDIT_TABLE)
            if audit is not None:  # the null TOML cannot hold, back in its place
                audit = {"fixed_since": None, **audit}
            found.append((relative, (entry["id"], entry["version"]), audit))
    path = folder / tau2.SIDECAR
    if path.is_file():
        for entry in json.loads(path.read_text(encoding="utf-8"))["tasks"]:
            found.append((tau2.SIDECAR, (entry["id"], entry["version"]), entry["audit"]))
    return found
