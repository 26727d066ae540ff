"""EnterpriseOps-Gym task JSON: system prompt, user prompt, tools, SQL state verifiers."""

import json
import re
from pathlib import Path

from itsmreview.catalog.formats.common import (
    ORIGINAL,
    ORIGINAL_FORMAT,
    FormatError,
    load_json,
    need,
    text_block,
)

# matched against the query stripped of its ends and its final `;`, so that no part of the
# pattern competes for the same characters (linear however the query is padded)
_COUNT = re.compile(
    r"SELECT\s+COUNT\(\s*\*\s*\)\s+FROM\s+(?P<table>[A-Za-z_][A-Za-z0-9_]*)\s+"
    r"WHERE\s+(?P<where>.+)",
    re.IGNORECASE | re.DOTALL,
)
MAX_PARSED_QUERY = 2_000  # characters; a longer check is kept as written, not parsed
_EQUALS = re.compile(
    r"^\s*(?P<column>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:'(?P<text>(?:[^']|'')*)'|(?P<number>-?\d+(?:\.\d+)?))\s*$"
)


def _conditions(where: str) -> dict[str, object] | None:
    """column -> value of a WHERE made of `column = value` joined by AND, else None."""
    out: dict[str, object] = {}
    for part in re.split(r"\s+AND\s+", where.strip(), flags=re.IGNORECASE):
        found = _EQUALS.match(part)
        if found is None:
            return None
        if found["text"] is not None:
            out[found["column"]] = found["text"].replace("''", "'")
        else:
            number = found["number"]
            out[found["column"]] = float(number) if "." in number else int(number)
    return out


def state_of(verifiers: list[dict]) -> dict:
    """The change set the SQL state checks state: `COUNT(*) FROM t WHERE a = x AND ...`
    equal to 1 is a record that must end with those fields (changed when the WHERE names the
    table's own key, `<table>_id` or `id`, else added); equal to 0 is a record that must be
    gone (removed). Any other check is kept as written."""
    changes, checks = [], []
    for verifier in verifiers:
        config = verifier.get("validation_config") or {}
        query = str(config.get("query") or "")
        name = verifier.get("name") or verifier.get("description") or "check"
        stripped = query.strip().removesuffix(";").rstrip()
        found = _COUNT.fullmatch(stripped) if len(stripped) <= MAX_PARSED_QUERY else None
        conditions = _conditions(found["where"]) if found else None
        expected = config.get("expected_value")
        comparison = config.get("comparison_type", "equals")
        if conditions is None or comparison != "equals" or expected not in (0, 1):
            checks.append(f"{name}: {query.strip()} {comparison} {json.dumps(expected)}")
            continue
        table = found["table"]
        key_column = next((c for c in (f"{table}_id", "id") if c in conditions), None)
        key = str(conditions[key_column]) if key_column else ""
        fields = {c: v for c, v in conditions.items() if c != key_column}
        if expected == 0:
            changes.append(
                {"entity": table, "key": key, "change": "removed", "note": name, "before": fields}
            )
        elif key and fields:
            changes.append(
                {"entity": table, "key": key, "change": "changed", "after": fields, "note": name}
            )
        else:
            changes.append(
                {"entity": table, "key": key, "change": "added", "after": conditions, "note": name}
            )
    return {k: v for k, v in {"changes": changes, "checks": checks}.items() if v}


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
        "state": state_of(verifiers) or None,
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
