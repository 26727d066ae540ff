"""tau2-bench task sets (`tasks.json`): user scenario, initial state, evaluation criteria."""

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


def looks_like(data) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and isinstance(data[0], dict)
        and ("user_scenario" in data[0] and "evaluation_criteria" in data[0])
    )


def state_of(criteria: dict) -> dict:
    """The change set the evaluation criteria state: each environment assertion
    (`assert_<field>` on the user's device or the assistant's backend) is a field the
    environment must end with; the expected actions are listed as they are."""
    changes = []
    for assertion in criteria.get("env_assertions") or []:
        if not isinstance(assertion, dict) or not assertion.get("func_name"):
            continue
        func = str(assertion["func_name"])
        field = func.removeprefix("assert_")
        arguments = assertion.get("arguments") or {}
        after = {
            f"{field}.{k.removeprefix('expected_')}" if len(arguments) > 1 else field: v
            for k, v in arguments.items()
        } or {field: True}
        if assertion.get("assert_value") is False:
            after = {k: {"not": v} for k, v in after.items()}
        changes.append(
            {
                "entity": f"{assertion.get('env_type') or 'environment'} environment",
                "key": "",
                "change": "changed",
                "after": after,
                "note": assertion.get("message") or func,
            }
        )
    actions = [
        {
            "name": str(a.get("name")),
            "by": str(a.get("requestor") or "assistant"),
            "arguments": a.get("arguments") or {},
        }
        for a in criteria.get("actions") or []
        if isinstance(a, dict) and a.get("name")
    ]
    checks = [str(a) for a in criteria.get("nl_assertions") or []]
    found = {"changes": changes, "actions": actions, "checks": checks}
    return {k: v for k, v in found.items() if v}


def to_native(task: dict, where: str, persona: str, domain_log: str | None) -> dict:
    task_id = need(task, "id", where, str)
    scenario = need(task, "user_scenario", where, dict)
    instructions = scenario.get("instructions") or {}
    if isinstance(instructions, str):
        instructions = {"task_instructions": instructions}
    description = task.get("description") or {}
    criteria = task.get("evaluation_criteria") or {}
    actions = [
        f"{a.get('requestor', 'assistant')}: {a.get('name')}"
        f"({json.dumps(a.get('arguments') or {}, ensure_ascii=False)})"
        for a in criteria.get("actions") or []
    ]
    assertions = [
        f"{a.get('env_type')}.{a.get('func_name')}"
        f"({json.dumps(a.get('arguments') or {}, ensure_ascii=False)}) is "
        f"{a.get('assert_value')}"
        for a in criteria.get("env_assertions") or []
    ]
    title = (description.get("purpose") if isinstance(description, dict) else None) or task_id
    native = {
        "id": task_id,
        "title": title[:512],
        "persona": persona,
        "track": "simulated-actors",
        "instruction": text_block(
            ("Ticket", task.get("ticket")),
            ("Reason for call", instructions.get("reason_for_call")),
            ("Known to the user", instructions.get("known_info")),
            ("Unknown to the user", instructions.get("unknown_info")),
            ("Simulated user behaviour", instructions.get("task_instructions")),
            ("Simulated user persona", scenario.get("persona")),
        )
        or task_id,
        "environment": text_block(
            ("Domain", instructions.get("domain")),
            ("Initial state", task.get("initial_state")),
            (
                "Relevant policies",
                description.get("relevant_policies") if isinstance(description, dict) else None,
            ),
        ),
        "ground_truth": text_block(
            ("Expected actions", "\n".join(actions)),
            ("Communicate", criteria.get("communicate_info")),
        ),
        "verifier": text_block(
            ("Environment assertions", "\n".join(assertions)),
            ("Natural-language assertions", criteria.get("nl_assertions")),
            ("Reward basis", criteria.get("reward_basis")),
        ),
        "state": state_of(criteria) or None,
        "tags": [
            "tau2",
            *(["domain:" + instructions["domain"]] if instructions.get("domain") else []),
        ],
        "provenance": [
            {"field": "instruction", "source": "external", "reference": "tau2-bench task set"}
        ],
        ORIGINAL_FORMAT: "tau2",
        ORIGINAL: task,
    }
    persona_tag = PERSONA_TAG.search(task_id)
    if persona_tag and persona_tag.group(1).lower() != "none":
        native["user_type"] = f"{persona_tag.group(1)}_persona"  # tau2's user persona
    if domain_log:
        native["source"] = {"log": domain_log}
    return native


PERSONA_TAG = re.compile(r"\[PERSONA:([A-Za-z0-9_-]{1,32})\]")  # as in `...[PERSONA:Hard]`


def read(
    path: Path, *, persona: str = "L1 service desk agent", log: str | None = None
) -> list[dict]:
    data = load_json(path)
    if isinstance(data, dict) and "tasks" in data:
        data = data["tasks"]
    if not isinstance(data, list):
        raise FormatError(f"{path}: a tau2 task set is a JSON list of tasks")
    return [to_native(task, f"{path}: $[{i}]", persona, log) for i, task in enumerate(data)]


def write(tasks: list[dict], path: Path) -> None:
    path.write_text(json.dumps([t[ORIGINAL] for t in tasks], indent=4, ensure_ascii=False))
