"""EnterpriseOps-Gym task JSON: system prompt, user prompt, tools, SQL state verifiers."""

import json
from pathlib import Path

from itsmreview.catalog.formats.common import (
    ORIGINAL,
    ORIGINAL_FORMAT,
    FormatError,
    load_json,
    need,
    text_block,
)


def looks_like(data) -> bool:
    return isinstance(data, dict) and "user_prompt" in data and "verifiers" in data


def to_native(task: dict, task_id: str, where: str, persona: str, log: str | None) -> dict:
    prompt = need(task, "user_prompt", where, str)
    verifiers = need(task, "verifiers", where, list)
    checks = []
    for index, verifier in enumerate(verifiers):
        spot = f"{where}.verifiers[{index}]"
        config = need(verifier, "validation_config", spot, dict)
        query = need(config, "query", f"{spot}.validation_config", str)
        checks.append(
            f"{verifier.get('name') or verifier.get('description') or 'check'}\n"
            f"  {query.strip()}\n  {config.get('comparison_type', 'equals')} "
            f"{json.dumps(config.get('expected_value'))}"
        )
    servers = task.get("gym_servers_config") or []
    user = servers[0].get("user_info") if servers and isinstance(servers[0], dict) else None
    native = {
        "id": task_id,
        "title": prompt.split(". ")[0][:200],
        "persona": persona,
        "track": "single-agent",
        "instruction": prompt,
        "environment": text_block(
            ("Tools", ", ".join(task.get("selected_tools") or [])),
            ("Acting user", user),
            ("System prompt", task.get("system_prompt")),
        ),
        "ground_truth": "The database satisfies every state check of the verifier.",
        "verifier": "\n\n".join(checks),
        "tags": ["eogym"],
        "provenance": [
            {
                "field": "instruction",
                "source": "external",
                "reference": "EnterpriseOps-Gym ITSM task",
            }
        ],
        ORIGINAL_FORMAT: "eogym",
        ORIGINAL: task,
    }
    if log:
        native["source"] = {"log": log}
    return native


def read(
    path: Path, *, persona: str = "L1 service desk agent", log: str | None = None
) -> list[dict]:
    data = load_json(path)
    items = data if isinstance(data, list) else [data]
    out = []
    for index, task in enumerate(items):
        if not isinstance(task, dict):
            raise FormatError(f"{path}: $[{index}]: expected a task object")
        task_id = str(
            task.get("task_id")
            or task.get("id")
            or (path.stem if len(items) == 1 else f"{path.stem}-{index + 1}")
        )
        where = f"{path}: $" if len(items) == 1 else f"{path}: $[{index}]"
        out.append(to_native(task, task_id, where, persona, log))
    return out


def write(tasks: list[dict], path: Path) -> None:
    originals = [t[ORIGINAL] for t in tasks]
    body = originals[0] if len(originals) == 1 else originals
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False))
