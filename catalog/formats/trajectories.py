"""Transcripts: tau2-bench simulation runs, tau-bench (v1) trajectories, Harbor's ATIF."""

import json
from pathlib import Path

from itsmreview.catalog.formats.common import (
    ORIGINAL,
    ORIGINAL_FORMAT,
    FormatError,
    arguments_of,
    load_json,
    need,
)

ROLE_FROM_CHAT = {"system": "system", "user": "user", "assistant": "agent", "tool": "tool"}


def _transcript(
    transcript_id: str, title: str, simulator: dict, messages: list[dict], fmt: str, original
) -> dict:
    return {
        "id": transcript_id,
        "title": title,
        "simulator": simulator,
        "messages": messages,
        ORIGINAL_FORMAT: fmt,
        ORIGINAL: original,
    }


# tau2-bench ------------------------------------------------------------------------------


def tau2_looks_like(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("simulations"), list)


def _tau2_simulator(info: dict) -> dict:
    out = {}
    for side in ("agent_info", "user_info"):
        part = info.get(side) or {}
        llm_args = part.get("llm_args") or {}
        out[side.split("_")[0]] = {
            "implementation": part.get("implementation"),
            "backbone": part.get("llm"),
            "temperature": llm_args.get("temperature"),
        }
    return out


def read_tau2(path: Path) -> dict[str, list[dict]]:
    data = load_json(path)
    if not tau2_looks_like(data):
        raise FormatError(f"{path}: a tau2 results file has a 'simulations' list")
    simulator = _tau2_simulator(data.get("info") or {})
    out: dict[str, list[dict]] = {}
    for index, sim in enumerate(data["simulations"]):
        where = f"{path}: $.simulations[{index}]"
        task_id = str(need(sim, "task_id", where))
        messages = []
        for turn, message in enumerate(need(sim, "messages", where, list)):
            spot = f"{where}.messages[{turn}]"
            role = need(message, "role", spot, str)
            if role not in ("assistant", "user", "tool", "system"):
                raise FormatError(f"{spot}.role: {role!r} is not assistant, user, tool or system")
            converted = {
                "role": ROLE_FROM_CHAT[role],
                "actor": {
                    "assistant": "Agent",
                    "user": "Simulated user",
                    "tool": "tool",
                    "system": "System",
                }[role],
                "content": message.get("content") or "",
                "time": message.get("timestamp"),
            }
            calls = []
            for c, call in enumerate(message.get("tool_calls") or []):
                calls.append(
                    {
                        "id": str(need(call, "id", f"{spot}.tool_calls[{c}]")),
                        "name": need(call, "name", f"{spot}.tool_calls[{c}]", str),
                        "arguments": arguments_of(call.get("arguments"), f"{spot}.tool_calls[{c}]"),
                        "requested_by": call.get("requestor", role),
                    }
                )
            if calls:
                converted["tool_calls"] = calls
            if role == "tool":
                converted["tool_call_id"] = str(need(message, "id", spot))
                converted["actor"] = f"tool ({message.get('requestor', 'assistant')})"
            messages.append(converted)
        sim_id = str(sim.get("id") or f"{task_id}-{index}")
        out.setdefault(task_id, []).append(
            _transcript(
                sim_id,
                f"tau2 run {sim.get('trial', index)}",
                simulator,
                messages,
                "tau2-sim",
                {"info": data.get("info"), "simulation": sim},
            )
        )
    return out


def write_tau2(transcripts: list[dict], path: Path) -> None:
    info = transcripts[0][ORIGINAL]["info"] if transcripts else None
    body = {"info": info, "simulations": [t[ORIGINAL]["simulation"] for t in transcripts]}
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False))


# tau-bench (v1) --------------------------------------------------------------------------


def taubench_looks_like(data) -> bool:
    return (
        isinstance(data, list) and bool(data) and isinstance(data[0], dict) and ("traj" in data[0])
    )


def read_taubench(path: Path) -> dict[str, list[dict]]:
    data = load_json(path)
    if not taubench_looks_like(data):
        raise FormatError(f"{path}: tau-bench results are a list of objects with 'traj'")
    out: dict[str, list[dict]] = {}
    for index, result in enumerate(data):
        where = f"{path}: $[{index}]"
        task_id = str(need(result, "task_id", where))
        messages = []
        for turn, message in enumerate(need(result, "traj", where, list)):
            spot = f"{where}.traj[{turn}]"
            role = need(message, "role", spot, str)
            if role not in ROLE_FROM_CHAT:
                raise FormatError(f"{spot}.role: {role!r} is not system, user, assistant or tool")
            converted = {
                "role": ROLE_FROM_CHAT[role],
                "actor": {
                    "system": "System",
                    "user": "Simulated user",
                    "assistant": "Agent",
                    "tool": message.get("name") or "tool",
                }[role],
                "content": message.get("content") or "",
            }
            calls = []
            for c, call in enumerate(message.get("tool_calls") or []):
                function = need(call, "function", f"{spot}.tool_calls[{c}]", dict)
                calls.append(
                    {
                        "id": str(need(call, "id", f"{spot}.tool_calls[{c}]")),
                        "name": need(function, "name", f"{spot}.tool_calls[{c}].function", str),
                        "arguments": arguments_of(
                            function.get("arguments"), f"{spot}.tool_calls[{c}].function"
                        ),
                        "requested_by": "agent",
                    }
                )
            if calls:
                converted["tool_calls"] = calls
            if role == "tool":
                converted["tool_call_id"] = str(need(message, "tool_call_id", spot))
            messages.append(converted)
        out.setdefault(task_id, []).append(
            _transcript(
                f"taubench-{task_id}-{result.get('trial', index)}",
                "tau-bench trajectory",
                {"reward": result.get("reward")},
                messages,
                "taubench",
                result,
            )
        )
    return out


def taubench_task(result: dict, task_id: str, persona: str, log: str | None) -> dict | None:
    """The native task a tau-bench (v1) result carries in `info.task` (user id, instruction,
    expected actions, outputs), or None when it carries none."""
    task = (result.get("info") or {}).get("task")
    if not isinstance(task, dict) or not str(task.get("instruction") or "").strip():
        return None
    instruction = str(task["instruction"])  # as the file has it: spaces at its ends too
    actions = task.get("actions") or []
    outputs = task.get("outputs") or []
    expected = {"actions": actions, "outputs": outputs}
    lines = [
        f"{a.get('name')}({json.dumps(a.get('kwargs') or {}, sort_keys=True)})"
        for a in actions
        if isinstance(a, dict)
    ]
    verifier = "The end state after these actions (tau-bench compares the database):\n" + (
        "\n".join(lines) or "(no actions)"
    )
    if outputs:
        verifier += "\nThe agent's replies must contain: " + ", ".join(map(str, outputs))
    native = {
        "id": task_id,
        "title": instruction.strip().split(". ")[0][:200],
        "persona": persona,
        "track": "simulated-actors",
        "instruction": instruction,
        "ground_truth": json.dumps(expected, indent=2, ensure_ascii=False, sort_keys=True),
        "verifier": verifier,
        "tags": ["tau-bench"],
        "source": {"log": log} if log else {},
        "user_id": task.get("user_id"),
    }
    return native


def write_taubench(transcripts: list[dict], path: Path) -> None:
    path.write_text(json.dumps([t[ORIGINAL] for t in transcripts], indent=2, ensure_ascii=False))


# ATIF ------------------------------------------------------------------------------------


def atif_looks_like(data) -> bool:
    return isinstance(data, dict) and str(data.get("schema_version", "")).startswith("ATIF")


def read_atif(path: Path, task_id: str | None) -> dict[str, list[dict]]:
    data = load_json(path)
    if not atif_looks_like(data):
        raise FormatError(f"{path}: an ATIF trajectory has schema_version 'ATIF-v1.x'")
    if not task_id:
        raise FormatError(f"{path}: an ATIF trajectory names no task; pass --task ID")
    agent = need(data, "agent", f"{path}: $", dict)
    messages = []
    for index, step in enumerate(need(data, "steps", f"{path}: $", list)):
        where = f"{path}: $.steps[{index}]"
        source = need(step, "source", where, str)
        if source not in ("system", "user", "agent"):
            raise FormatError(f"{where}.source: {source!r} is not system, user or agent")
        message = {
            "role": source,
            "content": step.get("message") or "",
            "actor": agent.get("name", "agent") if source == "agent" else source,
            "time": step.get("timestamp"),
        }
        calls = [
            {
                "id": str(need(c, "tool_call_id", f"{where}.tool_calls[{i}]")),
                "name": need(c, "function_name", f"{where}.tool_calls[{i}]", str),
                "arguments": arguments_of(c.get("arguments"), f"{where}.tool_calls[{i}]"),
                "requested_by": "agent",
            }
            for i, c in enumerate(step.get("tool_calls") or [])
        ]
        if calls:
            message["tool_calls"] = calls
        messages.append(message)
        for r, result in enumerate((step.get("observation") or {}).get("results") or []):
            call_id = result.get("source_call_id")
            content = result.get("content") or json.dumps(
                result.get("subagent_trajectory_ref") or "", ensure_ascii=False
            )
            if call_id:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(call_id),
                        "actor": "observation",
                        "content": content,
                        "time": step.get("timestamp"),
                    }
                )
            else:
                messages.append(
                    {
                        "role": "system",
                        "actor": "observation",
                        "content": content,
                        "time": step.get("timestamp"),
                    }
                )
            del r
    simulator = {
        "agent": {
            "name": agent.get("name"),
            "version": agent.get("version"),
            "backbone": agent.get("model_name"),
        }
    }
    return {
        task_id: [
            _transcript(
                str(data.get("session_id") or path.stem),
                f"ATIF trajectory ({agent.get('name', 'agent')})",
                simulator,
                messages,
                "atif",
                data,
            )
        ]
    }


def write_atif(transcripts: list[dict], path: Path) -> None:
    if len(transcripts) != 1:
        raise FormatError("an ATIF file holds exactly one trajectory; export one at a time")
    path.write_text(json.dumps(transcripts[0][ORIGINAL], indent=2, ensure_ascii=False))
