"""A Hugging Face dataset folder that stands on its own: `README.md` (the dataset card, YAML
`configs`), `data/train.jsonl` (the tasks, config `default`), `data/task_summary.jsonl` (config
`task_summary`), and `evidence/` (a copy of the export's evidence; `evidence/ratings.jsonl` is
config `ratings`), so pushing the folder to the Hub keeps the evidence with the tasks. Nested
task parts (transcripts, provenance, roles) are JSON text, so every row has the same columns
and types; so are the `audit_*` columns, each task's audit summary (exports.audit.summary).
Text from outside (names, personas, log names) is escaped in the card's body."""

import json
import re
import string

from itsmreview.catalog.formats.common import ORIGINAL_FORMAT
from itsmreview.exports.bundle import jsonl

ROOT = "tasks/hf"
FIELDS = {
    "id": "task id, stable across versions",
    "version": "the approved version's number",
    "content_hash": "sha256 of the version's canonical content",
    "decision": "the review decision (always `approved` in an export)",
    "title": "short title",
    "persona": "the job persona the task is for",
    "track": "single-agent, simulated-actors or multi-agent-team",
    "instruction": "what the agent is asked, as the requester would say it",
    "environment": "the initial environment (text)",
    "ground_truth": "the expected resolution (text)",
    "verifier": "how success is checked (text)",
    "tags": "free tags",
    "source_log": "name of the event log the task was derived from (null if none)",
    "variants": "process variants (activity sequences) of that log the task follows",
    "case_ids": "example cases of the log",
    "roles_json": "JSON: role attribute -> values of the log the task involves",
    "provenance_json": "JSON: per field, its source kind (logs, external, expert) and reference",
    "transcripts_json": "JSON: the transcripts of the simulated actors",
    "original_format": "the format the task was imported in (native, harbor, tau2, eogym)",
    "difficulty": "easy, medium or hard (null if not given)",
    "user_type": "the simulated user's type, e.g. rookie or entangled_requests (null if none)",
    "state_json": "JSON: the verifier's expected end state (record changes, preserve, actions)",
    "alternatives_json": "JSON: other acceptable end states",
}
AUDIT_PREFIX = "audit_"
# each task's audit summary (exports.audit.summary), one column a key, the same type in every row
AUDIT_FIELDS = {
    "sha256": "sha256 of the task's line in `evidence/audit.jsonl` (without its line break)",
    "findings": "findings of the experts on this version and earlier ones",
    "findings_open": "of them, not decided by the panel",
    "findings_confirmed": "of them, confirmed by the panel",
    "findings_rejected": "of them, rejected by the panel",
    "findings_major": "of them, of severity major",
    "findings_minor": "of them, of severity minor",
    "confirmed_categories": "categories of the confirmed findings (`findings categories`)",
    "fixed_since": "the version the newest earlier findings were made on (null if none)",
    "fixed_fields": "fields changed since that version (`expected end state` among them)",
    "failed_checks": "machine checks whose newest result is fail or error",
    "consensus_phases": "Delphi phases the task went through (0 outside a Delphi round)",
    "consensus_changed": "answers changed after phase 1 of the Delphi round",
}
NO_AUDIT = {
    **{key: 0 for key in AUDIT_FIELDS},
    "sha256": "",
    "confirmed_categories": [],
    "fixed_since": None,
    "fixed_fields": [],
    "failed_checks": [],
}
FIELDS.update({f"{AUDIT_PREFIX}{key}": text for key, text in AUDIT_FIELDS.items()})
# The type of each column of config `default`, declared in the card (`dataset_info`): without
# it `datasets` types a column by the first block of rows it reads, and a column that is null
# or an empty list all through that block (no fix yet, no tags) refuses a later value.
STRING, INT = "string", "int64"
STRINGS, STRING_LISTS = [STRING], [[STRING]]
FEATURES = {
    **dict.fromkeys(FIELDS, STRING),
    "version": INT,
    "tags": STRINGS,
    "variants": STRING_LISTS,
    "case_ids": STRINGS,
    **{
        f"{AUDIT_PREFIX}{key}": INT
        for key in AUDIT_FIELDS
        if key.startswith(("findings", "consensus"))
    },
    f"{AUDIT_PREFIX}fixed_since": INT,
    f"{AUDIT_PREFIX}confirmed_categories": STRINGS,
    f"{AUDIT_PREFIX}fixed_fields": STRINGS,
    f"{AUDIT_PREFIX}failed_checks": STRINGS,
}


def features_yaml(features: dict) -> str:
    """The card's `features` list of a config: `dtype` for a value, `sequence` for a list
    (the form every `datasets` since 3 reads).

    >>> print(features_yaml({"id": "string", "variants": [["string"]]}), end="")
      - name: id
        dtype: string
      - name: variants
        sequence:
          sequence: string
    """

    def kind(value, indent: str) -> str:
        if isinstance(value, list):
            inner = value[0]
            if isinstance(inner, list):
                return f"{indent}sequence:\n" + kind(inner, indent + "  ")
            return f"{indent}sequence: {inner}\n"
        return f"{indent}dtype: {value}\n"

    return "".join(f"  - name: {name}\n" + kind(value, "    ") for name, value in features.items())


def row(task: dict, record: dict) -> dict:
    source = task.get("source") or {}
    return {
        "id": task["id"],
        "version": record["version"],
        "content_hash": record["content_hash"],
        "decision": record["decision"],
        "title": task["title"],
        "persona": task["persona"],
        "track": task["track"],
        "instruction": task["instruction"],
        "environment": task.get("environment", ""),
        "ground_truth": task.get("ground_truth", ""),
        "verifier": task.get("verifier", ""),
        "tags": [str(t) for t in task.get("tags", [])],
        "source_log": source.get("log"),
        "variants": [[str(a) for a in v] for v in source.get("variants", [])],
        "case_ids": [str(c) for c in source.get("case_ids", [])],
        "roles_json": json.dumps(source.get("roles", {}), sort_keys=True, ensure_ascii=False),
        "provenance_json": json.dumps(task.get("provenance", []), ensure_ascii=False),
        "transcripts_json": json.dumps(task.get("transcripts", []), ensure_ascii=False),
        "original_format": task.get(ORIGINAL_FORMAT) or "native",
        "difficulty": task.get("difficulty"),
        "user_type": task.get("user_type"),
        "state_json": json.dumps(task.get("state") or {}, ensure_ascii=False),
        "alternatives_json": json.dumps(task.get("alternatives") or [], ensure_ascii=False),
        **{f"{AUDIT_PREFIX}{k}": v for k, v in (record.get("audit") or NO_AUDIT).items()},
    }


MARKDOWN_LIMIT = 50  # tasks listed in the card; all of them are in config task_summary
_PUNCTUATION = frozenset(string.punctuation) - {"&", "<", ">"}
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def escape(text: object) -> str:
    r"""Markdown (and HTML) source that renders as `text` on one line: control characters
    become spaces, `&`, `<` and `>` entities, other ASCII punctuation is backslash-escaped.

    >>> escape("<b>x</b> *y*\n| [z](http://e)")
    '&lt;b&gt;x&lt;\\/b&gt; \\*y\\* \\| \\[z\\]\\(http\\:\\/\\/e\\)'
    """
    flat = re.sub(r"[\x00-\x1f\x7f\u2028\u2029]+", " ", str(text))
    return "".join(_HTML.get(c) or ("\\" + c if c in _PUNCTUATION else c) for c in flat)


def size_category(count: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if count < limit:
            return label
    return "100K<n<1M"


def license_yaml(license: dict) -> str:
    """The card's licence metadata: an SPDX id as the Hub's lower-case id, or `other` with
    its name."""
    if license["spdx"].lower() != "other" and not license["spdx"].startswith("LicenseRef-"):
        return f"license: {license['spdx'].lower()}"
    return f"license: other\nlicense_name: {slug_name(license.get('name') or license['spdx'])}"


def slug_name(text: str) -> str:
    """The Hub's `license_name` form: lower-case letters, digits, `.` and `-`.

    >>> slug_name("Acme Data Licence 1.0")
    'acme-data-licence-1.0'
    """
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "unnamed"


def _figure(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _origin_lines(logs: list[dict]) -> str:
    if not logs:
        return "No task of this set names a source event log."
    lines = []
    for log in logs:
        what = {
            "synthetic": "**synthetic** (generated, not a real organisation's operations)",
            "real": "**real** operational event log",
            "not recorded": "origin **not recorded** in the ledger",
        }[log["origin"]]
        line = f"- `{escape(log['name'])}`"
        if log.get("version"):
            line += f" (version {log['version']}, {log['cases']:,} cases, {log['events']:,} events)"
        line += f": {what}"
        if log.get("statement"):
            line += f"; the ledger says: {escape(log['statement'])}"
        if log.get("imported_from"):
            line += f"; imported from {escape(log['imported_from'])}"
        lines.append(line + ".")
    return "\n".join(lines)


def _agreement_lines(agreement: dict[str, list[dict]]) -> str:
    if not any(agreement.values()):
        return "No agreement figures (no round with ratings)."
    out = []
    for round_name, items in sorted(agreement.items()):
        out += [
            f"Round `{escape(round_name)}`:",
            "",
            "| dimension | alpha | 95% CI | units |",
            "|---|---|---|---|",
        ]
        for item in items:
            interval = (
                "n/a"
                if item.get("ci_low") is None
                else f"{_figure(item['ci_low'])} to {_figure(item['ci_high'])}"
            )
            out.append(
                f"| {escape(item.get('label') or item['item'])} | {_figure(item.get('alpha'))} "
                f"| {interval} | {item.get('units') or 0} |"
            )
        out.append("")
    return "\n".join(out).rstrip()


def _summary_lines(summary: list[dict], dimensions: list[str], total: int | None = None) -> str:
    """The card's table of the first MARKDOWN_LIMIT tasks of `summary` (the first rows are
    enough), `total` tasks in all (default: the length of `summary`)."""
    total = len(summary) if total is None else total
    if not total:
        return "No task was rated."
    shown = summary[:MARKDOWN_LIMIT]
    header = ["task", "version", "ratings", *[f"median {d}" for d in dimensions], "verdicts"]
    out = [
        "| " + " | ".join(escape(h) for h in header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in shown:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(row["verdicts"].items())) or "-"
        cells = [
            escape(row["task"]),
            str(row["version"]),
            str(row["ratings"]),
            *[_figure(row["median"].get(d)) for d in dimensions],
            escape(verdicts),
        ]
        out.append("| " + " | ".join(cells) + " |")
    if total > len(shown):
        out.append(
            f"\nThe first {len(shown)} of {total} tasks; all of them are in config "
            "`task_summary` (`data/task_summary.jsonl`)."
        )
    return "\n".join(out)


def summary_rows(summary: list[dict], dimensions: list[str]) -> list[dict]:
    """The per-task summary flattened for `datasets`: one column per dimension's median,
    verdict counts as JSON text."""
    return [
        {
            "task": row["task"],
            "version": row["version"],
            "ratings": row["ratings"],
            **{f"median_{d}": row["median"].get(d) for d in dimensions},
            "verdicts_json": json.dumps(row["verdicts"], sort_keys=True),
        }
        for row in summary
    ]


def _front_matter(name: str, license: dict, count: int) -> str:
    """The card's YAML header: name, licence, tags, size and the three configs."""
    return f"""---
pretty_name: {json.dumps(name, ensure_ascii=False)}
{license_yaml(license)}
language:
- en
tags:
- itsm
- agent-benchmark
- itsmreview
size_categories:
- {size_category(count)}
configs:
- config_name: default
  default: true
  data_files:
  - split: train
    path: data/train.jsonl
- config_name: task_summary
  data_files:
  - split: train
    path: data/task_summary.jsonl
- config_name: ratings
  data_files:
  - split: train
    path: evidence/ratings.jsonl
dataset_info:
- config_name: default
  features:
{features_yaml(FEATURES)}---
"""


def _source_claim(logs: list[dict]) -> str:
    """What the card says the tasks were derived from, by the origins of their logs."""
    kinds = {log["origin"] for log in logs}
    if kinds == {"synthetic"}:
        return "synthetic event logs (generated, not recorded from real operations)"
    if kinds == {"real"}:
        return "real operational event logs"
    if logs:
        return "event logs whose origin is stated per log below"
    return "no event log"


def card(
    *,
    name: str,
    count: int,
    personas: dict[str, int],
    license: dict,
    logs: list[dict],
    agreement: dict[str, list[dict]],
    summary: list[dict],
    dimensions: list[str],
    summary_total: int | None = None,
) -> str:
    """The dataset card. Nothing in it depends on where the export is written. `summary`
    needs only its first MARKDOWN_LIMIT rows when `summary_total` says how many there are."""
    persona_text = ", ".join(f"{escape(p)} ({n})" for p, n in sorted(personas.items()))
    fields = "\n".join(f"- `{key}`: {text}" for key, text in FIELDS.items())
    licence_text = f"`{escape(license['spdx'])}`" + (
        f" ({escape(license['name'])})" if license.get("name") else ""
    )
    return f"""{_front_matter(name, license, count)}
# Dataset Card for {escape(name)}

## Dataset Summary

{count} IT-service-management benchmark tasks for AI agents, each approved by practitioners in
an itsmreview review round. Personas: {persona_text or "none"}.

## Dataset Structure

Config `default`: one row per task (its approved version), split `train`. Config
`task_summary`: per task, the number of human ratings, the median of each rubric dimension and
the verdicts. Config `ratings`: every rating (raters pseudonymised).

### Data Fields

{fields}

## Dataset Creation

### Source Data

Tasks were derived from {_source_claim(logs)} (process variants, roles and example cases named in
`source_log`, `variants`, `case_ids`) and from external practice and experts, as
`provenance_json` records per field. Each source log, as the provenance ledger records it:

{_origin_lines(logs)}

### Annotations

Domain experts rated each task on a structured rubric next to the log variant it came from.
Krippendorff's alpha per rubric dimension, with bootstrap 95% intervals:

{_agreement_lines(agreement)}

Per task:

{_summary_lines(summary, dimensions, summary_total)}

Each task's audit summary is in its `audit_*` columns: findings by state and severity, the
categories of confirmed ones, the fields fixed since the version they were made on, failed
machine checks and the Delphi consensus trail; `audit_sha256` is the sha256 of the task's line in
`evidence/audit.jsonl`, which holds the findings with their anchors and each fixed field's value
before and after.

The approval gate and each task's decision with its reasons, the ratings, adjudications,
coverage, rubrics and the ledger slice are in this folder's `evidence/`; the export's
`manifest.json` (beside the `tasks/` folder) holds the sha256 of every file
(`itsmreview export verify`).

## Considerations for Using the Data

Approval means the raters judged the task realistic under the rubric in
`evidence/rubrics.json`; read the agreement figures above before relying on it.

## Licensing Information

The task set: {licence_text}. The source logs keep their own licences.

## Citation Information

Cite the ledger head in the export's `manifest.json` (`ledger_head`) with the export.
"""


def render(
    tasks: list[dict],
    records: list[dict],
    *,
    name: str,
    license: dict,
    logs: list[dict],
    agreement: dict[str, list[dict]],
    summary: list[dict],
    dimensions: list[str],
) -> dict[str, str]:
    """{relative path: text} of the card, the task rows and the per-task summary (the
    evidence is copied in by the caller)."""
    rows = [row(t, r) for t, r in zip(tasks, records, strict=True)]
    personas: dict[str, int] = {}
    for r in rows:
        personas[r["persona"]] = personas.get(r["persona"], 0) + 1
    return {
        f"{ROOT}/README.md": card(
            name=name,
            count=len(rows),
            personas=personas,
            license=license,
            logs=logs,
            agreement=agreement,
            summary=summary,
            dimensions=dimensions,
        ),
        f"{ROOT}/data/train.jsonl": jsonl(rows),
        f"{ROOT}/data/task_summary.jsonl": jsonl(summary_rows(summary, dimensions)),
    }
