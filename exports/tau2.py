"""tau2-bench `tasks.json`: the documents the tau2 tasks were imported from, unchanged."""

import json

from itsmreview.catalog.formats.common import ORIGINAL, ORIGINAL_FORMAT

PATH = "tasks/tau2/tasks.json"


def render(tasks: list[dict]) -> dict[str, str]:
    chosen = [t for t in tasks if t.get(ORIGINAL_FORMAT) == "tau2"]
    if not chosen:
        return {}
    return {PATH: json.dumps([t[ORIGINAL] for t in chosen], indent=4, ensure_ascii=False) + "\n"}
