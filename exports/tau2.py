"""tau2-bench `tasks.json`: the documents the tau2 tasks were imported from, unchanged, and
the sidecar `itsmreview.json` beside it: per task its id, version, content hash and audit
summary (exports.audit.summary).

tau2's `Task` (tau2.data_model.tasks, a pydantic model with the default `extra="ignore"`) has
no field for metadata: a key added to a task would be dropped when tau2 loads it, and the file
would no longer be the one imported (a re-import would make a new version). So the audit goes
beside the file, which tau2 never reads."""

import json

from itsmreview.catalog.formats.common import ORIGINAL, ORIGINAL_FORMAT
from itsmreview.exports.bundle import canonical

PATH = "tasks/tau2/tasks.json"
SIDECAR = "tasks/tau2/itsmreview.json"


def render(tasks: list[dict], records: list[dict] | None = None) -> dict[str, str]:
    """{relative path: text}: the tau2 tasks' documents, and with `records` (each task's
    export record: version, content hash, audit summary) the sidecar."""
    chosen = [
        (t, r)
        for t, r in zip(tasks, records or [None] * len(tasks), strict=True)
        if t.get(ORIGINAL_FORMAT) == "tau2"
    ]
    if not chosen:
        return {}
    files = {
        PATH: json.dumps([t[ORIGINAL] for t, _ in chosen], indent=4, ensure_ascii=False) + "\n"
    }
    if records is not None:
        files[SIDECAR] = canonical(
            {
                "note": "itsmreview's record of tasks.json, task by task; tau2 ignores this file",
                "tasks": [
                    {
                        "id": t["id"],
                        "tau2_id": t[ORIGINAL].get("id"),
                        "version": r["version"],
                        "content_hash": r["content_hash"],
                        "audit": r.get("audit"),
                    }
                    for t, r in chosen
                ],
            },
            indent=1,
        )
    return files
