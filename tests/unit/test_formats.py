"""Task and transcript formats: real fixtures, round trips, and clear errors."""

import json

import pytest
from itsmreview.catalog.formats import detect_format, export_tasks, read_tasks, read_transcripts
from itsmreview.catalog.formats.common import FormatError
from itsmreview.catalog.native import parse_bundle

TASK_TOML = """schema_version = "1.1"

[task]
name = "itsm/reset-password"
description = "Reset a locked account"
keywords = ["identity"]

[metadata]
persona = "L1 service desk agent"
track = "simulated-actors"
difficulty = "easy"

[verifier]
timeout_sec = 120.0
"""


def harbor_task(root, name="reset", toml=TASK_TOML):
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "solution").mkdir()
    (folder / "environment").mkdir()
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text("Unlock the account of user U-1042.\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/sh\npytest /tests/test_state.py\n")
    (folder / "solution" / "solve.sh").write_text("#!/bin/sh\nitsm unlock U-1042\n")
    (folder / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    return folder


@pytest.mark.realdata
def test_real_tau2_tasks_import_and_round_trip(real_file, tmp_path):
    path = real_file("tasks", "tau2_telecom_tasks_small.json")
    assert detect_format(path) == "tau2"
    natives = read_tasks(path, "tau2")
    tasks = parse_bundle(natives, str(path))
    assert len(tasks) == 20 and tasks[0].id.startswith("[mobile_data_issue]")
    assert "excellent internet speed" in tasks[0].instruction
    assert "assert_internet_speed" in tasks[0].verifier
    # the id's [PERSONA:...] is the simulated user's persona (its words are in the instruction)
    by_tag = {t.id.rsplit("[PERSONA:", 1)[1].rstrip("]"): t.user_type for t in tasks}
    assert by_tag == {"None": None, "Easy": "easy_persona", "Hard": "hard_persona"}
    hard = next(t for t in tasks if t.user_type == "hard_persona")
    assert "Simulated user persona" in hard.instruction and "64 years old" in hard.instruction
    out = tmp_path / "tasks.json"
    export_tasks([t.model_dump(mode="json") for t in tasks], "tau2", out)
    assert json.loads(out.read_text()) == json.loads(path.read_text())


@pytest.mark.realdata
def test_real_eogym_task_imports_and_round_trips(real_file, tmp_path):
    path = real_file("tasks", "enterpriseops_gym_itsm_task.json")
    assert detect_format(path) == "eogym"
    (task,) = parse_bundle(read_tasks(path, "eogym"), str(path))
    assert task.id == "enterpriseops_gym_itsm_task"
    assert "SELECT COUNT(*) FROM incident" in task.verifier
    assert "update_incident" in task.environment
    out = tmp_path / "task.json"
    export_tasks([task.model_dump(mode="json")], "eogym", out)
    assert json.loads(out.read_text()) == json.loads(path.read_text())


def test_harbor_dataset_round_trip(tmp_path):
    dataset = tmp_path / "dataset"
    harbor_task(dataset, "reset")
    harbor_task(dataset, "reopen", TASK_TOML.replace("reset-password", "reopen"))
    assert detect_format(dataset) == "harbor"
    tasks = parse_bundle(read_tasks(dataset, "harbor"), "d")
    assert [t.id for t in tasks] == ["itsm/reopen", "itsm/reset-password"]
    first = tasks[1]
    assert first.track == "simulated-actors" and "tests/test.sh" in first.verifier
    assert "itsm unlock" in first.ground_truth and "identity" in first.tags
    out = tmp_path / "out"
    export_tasks([t.model_dump(mode="json") for t in tasks], "harbor", out)
    for name in ("reset", "reopen"):
        for file in (
            "task.toml",
            "instruction.md",
            "tests/test.sh",
            "solution/solve.sh",
            "environment/Dockerfile",
        ):
            assert (out / name / file).read_text() == (dataset / name / file).read_text()


def test_harbor_dataset_toml_names_its_folder(tmp_path):
    dataset = tmp_path / "dataset"
    harbor_task(dataset, "reset")
    (dataset / "dataset.toml").write_text('[dataset]\nname = "itsm/demo"\n')
    assert detect_format(dataset / "dataset.toml") == "harbor"
    assert [t["id"] for t in read_tasks(dataset / "dataset.toml", "harbor")] == [
        "itsm/reset-password"
    ]


def test_harbor_registry_json_lists_local_task_folders(tmp_path):
    harbor_task(tmp_path / "datasets" / "itsm", "reset")
    registry = tmp_path / "registry.json"
    registry.write_text(
        json.dumps(
            [
                {
                    "name": "itsm",
                    "version": "1.0",
                    "tasks": [{"name": "reset", "git_url": None, "path": "datasets/itsm/reset"}],
                }
            ]
        )
    )
    assert detect_format(registry) == "harbor"
    assert [t["id"] for t in read_tasks(registry, "harbor")] == ["itsm/reset-password"]
    registry.write_text(
        json.dumps(
            [
                {
                    "name": "x",
                    "tasks": [
                        {
                            "name": "far",
                            "git_url": "https://example.invalid/repo.git",
                            "git_commit_id": "abc",
                            "path": "nowhere/far",
                        }
                    ],
                }
            ]
        )
    )
    with pytest.raises(FormatError, match=r"\$\[0\].tasks\[0\]: task 'far' lives in "):
        read_tasks(registry, "harbor")


def test_harbor_errors_name_the_file(tmp_path):
    folder = harbor_task(tmp_path, "bad", "[task\nname = 1")
    with pytest.raises(FormatError, match=r"bad/task.toml: invalid TOML"):
        read_tasks(folder, "harbor")
    other = harbor_task(tmp_path, "noinst")
    (other / "instruction.md").unlink()
    with pytest.raises(FormatError, match="instruction.md is missing"):
        read_tasks(other, "harbor")
    with pytest.raises(FormatError, match="no Harbor task folder"):
        read_tasks(tmp_path / "bad" / "tests", "harbor")


def test_native_round_trip(tmp_path):
    bundle = {
        "tasks": [
            {
                "id": "n1",
                "title": "T",
                "persona": "L2 resolver",
                "track": "single-agent",
                "instruction": "Fix.",
                "x_custom": [1, 2],
                "transcripts": [
                    {"id": "r", "messages": [{"role": "user", "content": "hi", "turn_idx": 0}]}
                ],
            }
        ]
    }
    (task,) = parse_bundle(bundle, "b")
    for suffix in (".json", ".yaml", ".jsonl"):
        out = tmp_path / f"out{suffix}"
        export_tasks([task.model_dump(mode="json")], "native", out)
        from itsmreview.catalog.native import load_bundle

        (again,) = load_bundle(out)
        assert again.content_hash() == task.content_hash()
        assert again.model_dump()["x_custom"] == [1, 2]


TAU2_RESULTS = {
    "info": {
        "agent_info": {
            "implementation": "llm_agent",
            "llm": "gpt-4.1",
            "llm_args": {"temperature": 0.0},
        },
        "user_info": {
            "implementation": "user_simulator",
            "llm": "gpt-4.1",
            "llm_args": {"temperature": 0.7},
        },
    },
    "simulations": [
        {
            "id": "sim-1",
            "task_id": "t1",
            "trial": 0,
            "messages": [
                {
                    "role": "assistant",
                    "content": "How can I help?",
                    "turn_idx": 0,
                    "timestamp": "2025-06-01T10:00:00",
                },
                {
                    "role": "user",
                    "content": "No data.",
                    "turn_idx": 1,
                    "tool_calls": [
                        {
                            "id": "u1",
                            "name": "check_status_bar",
                            "arguments": {},
                            "requestor": "user",
                        }
                    ],
                },
                {
                    "role": "tool",
                    "id": "u1",
                    "content": "No Service",
                    "requestor": "user",
                    "turn_idx": 2,
                },
            ],
        }
    ],
}


def test_tau2_simulations_keep_requestor_and_simulator(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(TAU2_RESULTS))
    assert detect_format(path) == "tau2-sim"
    found = read_transcripts(path, "tau2-sim")
    (transcript,) = found["t1"]
    assert transcript["simulator"]["user"] == {
        "implementation": "user_simulator",
        "backbone": "gpt-4.1",
        "temperature": 0.7,
    }
    call = transcript["messages"][1]["tool_calls"][0]
    assert call["requested_by"] == "user" and transcript["messages"][2]["tool_call_id"] == "u1"
    from itsmreview.catalog.formats.trajectories import write_tau2

    out = tmp_path / "again.json"
    write_tau2(found["t1"], out)
    assert json.loads(out.read_text()) == TAU2_RESULTS


def test_taubench_arguments_are_json_strings(tmp_path):
    results = [
        {
            "task_id": 3,
            "reward": 1.0,
            "traj": [
                {"role": "system", "content": "policy"},
                {"role": "user", "content": "cancel my order"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {
                                "name": "cancel_order",
                                "arguments": '{"order_id": "#W1"}',
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "name": "cancel_order", "content": "ok"},
            ],
        }
    ]
    path = tmp_path / "tb.json"
    path.write_text(json.dumps(results))
    assert detect_format(path) == "taubench"
    (transcript,) = read_transcripts(path, "taubench")["3"]
    assert transcript["messages"][2]["tool_calls"][0]["arguments"] == {"order_id": "#W1"}
    from itsmreview.catalog.formats.trajectories import write_taubench

    out = tmp_path / "again.json"
    write_taubench(read_transcripts(path, "taubench")["3"], out)
    assert json.loads(out.read_text()) == results
    results[0]["traj"][2]["tool_calls"][0]["function"]["arguments"] = "{oops"
    path.write_text(json.dumps(results))
    with pytest.raises(
        FormatError,
        match=r"traj\[2\].tool_calls\[0\].function: tool-call "
        r"arguments are not valid JSON",
    ):
        read_transcripts(path, "taubench")


def test_atif_trajectory(tmp_path):
    trajectory = {
        "schema_version": "ATIF-v1.4",
        "session_id": "s-1",
        "agent": {"name": "terminus", "version": "1", "model_name": "m"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "Reset U-1042"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "Unlocking.",
                "tool_calls": [
                    {
                        "tool_call_id": "c1",
                        "function_name": "unlock",
                        "arguments": {"user": "U-1042"},
                    }
                ],
                "observation": {"results": [{"source_call_id": "c1", "content": "unlocked"}]},
            },
        ],
    }
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(trajectory))
    assert detect_format(path) == "atif"
    with pytest.raises(FormatError, match="pass --task ID"):
        read_transcripts(path, "atif")
    (transcript,) = read_transcripts(path, "atif", task="t9")["t9"]
    roles = [m["role"] for m in transcript["messages"]]
    assert roles == ["user", "agent", "tool"]
    assert transcript["simulator"]["agent"]["backbone"] == "m"
    from itsmreview.catalog.formats.trajectories import write_atif

    out = tmp_path / "again.json"
    write_atif([transcript], out)
    assert json.loads(out.read_text()) == trajectory


@pytest.mark.parametrize(
    "content, message",
    [
        (
            '[{"id": "x", "user_scenario": 5, "evaluation_criteria": {}}]',
            r"\$\[0\].user_scenario: expected dict",
        ),
        ('[{"user_scenario": {}, "evaluation_criteria": {}}]', r"\$\[0\].id: required field"),
        (
            '{"user_prompt": "x", "verifiers": [{"name": "v"}]}',
            r"verifiers\[0\].validation_config: required field",
        ),
    ],
)
def test_malformed_foreign_files(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(FormatError, match=message):
        read_tasks(path, detect_format(path))


@pytest.mark.realdata
def test_real_taubench_instructions_keep_their_trailing_space(real_file):
    """tau-bench v1 task 34 of the real results ends its instruction with a space: the task
    made from it keeps it (text exactly as the file has it)."""
    from itsmreview.catalog.formats.common import ORIGINAL
    from itsmreview.catalog.formats.trajectories import taubench_task

    path = real_file("transcripts", "taubench_gpt4o_airline_even.json")
    results = json.loads(path.read_text(encoding="utf-8"))
    padded = [r for r in results if r["info"]["task"]["instruction"].endswith(" ")]
    assert padded, "the real file no longer holds a padded instruction"
    for result in padded:
        (transcript, *_) = read_transcripts(path, "taubench")[str(result["task_id"])]
        task = taubench_task(transcript[ORIGINAL], str(result["task_id"]), "agent", None)
        assert task["instruction"] == result["info"]["task"]["instruction"]
        (stored,) = parse_bundle([{**task, "transcripts": []}], "real")
        assert stored.instruction == result["info"]["task"]["instruction"]


def test_instructions_are_kept_verbatim_by_taubench_and_harbor(tmp_path):
    from itsmreview.catalog.formats.trajectories import taubench_task

    text = "  Cancel order #W1.\n\nThen confirm by mail.  \n"
    result = {"task_id": 7, "info": {"task": {"user_id": "u1", "instruction": text}}}
    task = taubench_task(result, "7", "agent", None)
    assert task["instruction"] == text and task["title"].startswith("Cancel order #W1.")
    folder = harbor_task(tmp_path)
    (folder / "instruction.md").write_text(text)
    (native,) = read_tasks(folder, "harbor")
    assert native["instruction"] == text
    (stored,) = parse_bundle([native], "h")
    assert stored.instruction == text
