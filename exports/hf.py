"""A Hugging Face dataset folder: `README.md` (dataset card with YAML `configs`) and
`data/train.jsonl`, which `datasets.load_dataset(folder)` reads. Nested task parts
(transcripts, provenance, roles) are JSON text, so every row has the same columns and types."""

import json

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
    }


def size_category(count: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if count < limit:
            return label
    return "100K<n<1M"


def card(*, name: str, count: int, summary: dict) -> str:
    personas = ", ".join(f"{p} ({n})" for p, n in sorted(summary["personas"].items()))
    logs = ", ".join(sorted(summary["logs"])) or "none"
    fields = "\n".join(f"- `{key}`: {text}" for key, text in FIELDS.items())
    return f"""---
pretty_name: {json.dumps(name)}
license: other
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
  data_files:
  - split: train
    path: data/train.jsonl
---

# Dataset Card for {name}

## Dataset Summary

{count} IT-service-management benchmark tasks for AI agents, each approved by practitioners in
an itsmreview review round. Personas: {personas}. Source event logs: {logs}.

## Dataset Structure

One row per task (its approved version), split `train`.

### Data Fields

{fields}

## Dataset Creation

### Source Data

Tasks were derived from real operational event logs (process variants, roles and example
cases named in `source_log`, `variants`, `case_ids`) and from external practice and experts,
as `provenance_json` records per field.

### Annotations

Domain experts rated each task on a structured rubric next to the log variant it came from;
the approval gate, the ratings (pseudonymised), Krippendorff's alpha with bootstrap intervals
and each task's decision with its reasons are in the export's `evidence/` folder, and
`manifest.json` holds the sha256 of every file (`itsmreview export verify`).

## Considerations for Using the Data

Approval means the raters judged the task realistic under the rubric in
`evidence/rubrics.json`; read the agreement report before relying on it.

## Licensing Information

Set by the exporting team; the source logs keep their own licences.

## Citation Information

Cite the ledger head in `manifest.json` (`ledger_head`) with the export.
"""


def render(tasks: list[dict], records: list[dict], *, name: str) -> dict[str, str]:
    rows = [row(t, r) for t, r in zip(tasks, records, strict=True)]
    summary = {
        "personas": {},
        "logs": {r["source_log"] for r in rows if r["source_log"]},
    }
    for r in rows:
        summary["personas"][r["persona"]] = summary["personas"].get(r["persona"], 0) + 1
    return {
        f"{ROOT}/README.md": card(name=name, count=len(rows), summary=summary),
        f"{ROOT}/data/train.jsonl": jsonl(rows),
    }
