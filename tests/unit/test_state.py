"""The expected end state: read from the real EnterpriseOps-Gym and tau2 tasks, validated,
shown as a diff; the authoring fields leave old content hashes alone."""

import hashlib
import json

import pytest
from itsmreview.catalog.formats import read_tasks
from itsmreview.catalog.formats.eogym import state_of as eogym_state
from itsmreview.catalog.native import OPTIONAL_FIELDS, parse_bundle
from itsmreview.catalog.state import (
    diff_rows,
    normalise_difficulty,
    normalise_user_type,
    preserve_rows,
    simulator_backbone,
    state_summary,
)
from itsmreview.ledger.chain import canonical_json


def test_the_real_eogym_task_shows_its_sql_checks_as_record_changes(real_file):
    path = real_file("tasks", "enterpriseops_gym_itsm_task.json")
    [task] = parse_bundle(read_tasks(path, "eogym"), str(path))
    raw = json.loads(path.read_text())
    assert len(raw["verifiers"]) == len(task.state.changes)  # every check became a change
    incident, sla = task.state.changes
    assert (incident.entity, incident.key, incident.change) == ("incident", "INC_003", "changed")
    assert incident.after == {"impact": "high", "priority": "high"}
    assert (sla.entity, sla.change) == ("incident_sla", "added")
    assert sla.after == {"incident_id": "INC_003", "sla_def_id": "SLA_002"}
    assert incident.note == raw["verifiers"][0]["name"]
    rows = diff_rows(task.state.model_dump())
    assert [(r["entity"], r["field"], r["after"]) for r in rows] == [
        ("incident", "impact", "high"),
        ("incident", "priority", "high"),
        ("incident_sla", "incident_id", "INC_003"),
        ("incident_sla", "sla_def_id", "SLA_002"),
    ]
    assert state_summary(task.state.model_dump()) == "2 record changes in 2 entities"


def test_eogym_checks_that_are_not_counts_of_equalities_are_kept_as_written():
    verifiers = [
        {
            "name": "gone",
            "validation_config": {
                "query": "SELECT COUNT(*) FROM task_sla WHERE task_sla_id = 'T1'",
                "expected_value": 0,
            },
        },
        {
            "name": "odd",
            "validation_config": {
                "query": "SELECT state FROM incident WHERE id = 3 OR 1=1",
                "expected_value": "closed",
            },
        },
        {
            "name": "quoted",
            "validation_config": {
                "query": "SELECT COUNT(*) FROM incident WHERE id = 7 AND note = 'it''s done';",
                "expected_value": 1,
            },
        },
    ]
    state = eogym_state(verifiers)
    assert state["changes"][0] == {
        "entity": "task_sla",
        "key": "T1",
        "change": "removed",
        "note": "gone",
        "before": {},
    }
    assert state["changes"][1]["key"] == "7" and state["changes"][1]["after"] == {
        "note": "it's done"
    }
    assert state["checks"] == [
        'odd: SELECT state FROM incident WHERE id = 3 OR 1=1 equals "closed"'
    ]


def test_the_real_tau2_tasks_show_assertions_and_expected_actions(real_file):
    path = real_file("tasks", "tau2_telecom_tasks_small.json")
    raw = json.loads(path.read_text())
    tasks = parse_bundle(read_tasks(path, "tau2"), str(path))
    for task, original in zip(tasks, raw, strict=True):
        criteria = original["evaluation_criteria"]
        assertions = criteria.get("env_assertions") or []
        assert len(task.state.changes) == len(assertions)
        assert [a.name for a in task.state.actions] == [a["name"] for a in criteria["actions"]]
    first = tasks[0].state
    assert first.changes[0].entity == "user environment"
    assert first.changes[0].after == {"mobile_data_status": True}
    assert first.changes[1].after == {
        "internet_speed.speed": 200,
        "internet_speed.desc": "excellent",
    }
    assert (first.actions[0].name, first.actions[0].by) == ("toggle_roaming", "user")


def test_record_changes_must_fit_their_kind():
    base = {"id": "t", "title": "T", "persona": "p", "track": "single-agent", "instruction": "x"}
    for change, message in (
        ({"entity": "i", "change": "added", "before": {"a": 1}}, "an added record has no"),
        ({"entity": "i", "change": "removed", "after": {"a": 1}}, "a removed record has no"),
        ({"entity": "i", "change": "changed"}, "a changed record needs 'after'"),
        ({"entity": "i", "change": "moved", "after": {"a": 1}}, r"state\.changes\[0\]\.change"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_bundle([{**base, "state": {"changes": [change]}}], "x")
    with pytest.raises(ValueError, match="alternative id\\(s\\) used twice: a"):
        parse_bundle([{**base, "alternatives": [{"id": "a", "description": "x"}] * 2}], "x")


def test_the_diff_marks_fields_that_must_not_change():
    state = {
        "changes": [
            {
                "entity": "incident",
                "key": "I1",
                "change": "changed",
                "before": {"s": 1},
                "after": {"s": 2, "caller": "B"},
            },
            {"entity": "incident", "change": "added", "after": {"s": 1}},
        ],
        "preserve": [
            {"entity": "incident", "key": "I1", "fields": ["caller"]},
            {"entity": "incident"},
        ],
    }
    rows = {(r["key"], r["field"]): r["must_not_change"] for r in diff_rows(state)}
    assert rows == {("I1", "caller"): True, ("I1", "s"): False, ("", "s"): False}
    assert [r["key"] for r in preserve_rows(state)] == ["I1", "(every other record)"]


def test_a_task_without_authoring_fields_keeps_its_old_content_hash():
    item = {"id": "t", "title": "T", "persona": "p", "track": "single-agent", "instruction": "x"}
    [task] = parse_bundle([item], "x")
    legacy = task.model_dump(mode="json")
    for name in OPTIONAL_FIELDS:
        del legacy[name]
    assert task.content_hash() == hashlib.sha256(canonical_json(legacy).encode()).hexdigest()
    [with_state] = parse_bundle([{**item, "difficulty": "L1"}], "x")
    assert with_state.content_hash() != task.content_hash()


def test_difficulty_user_type_and_backbone_are_normalised():
    assert [normalise_difficulty(v) for v in ("L1", "2", "Hard", "medium", None)] == [
        "easy",
        "medium",
        "hard",
        "medium",
        None,
    ]
    with pytest.raises(ValueError, match="not one of L1, L2, L3"):
        normalise_difficulty("extreme")
    assert normalise_user_type("Mismatched expectations!") == "mismatched_expectations"
    assert (
        simulator_backbone(
            [
                {"user": {"backbone": "gpt-4.1"}},
                {"backbone": "claude"},
                {"agent": {"backbone": "x"}},
            ]
        )
        == "claude, gpt-4.1"
    )
    assert simulator_backbone([{}]) is None


def test_a_padded_or_oversized_sql_check_is_kept_as_written_not_backtracked_over():
    padded = "SELECT COUNT(*) FROM incident WHERE id = 7" + " " * 200_000 + "x"
    trailing = "  SELECT COUNT(*) FROM incident WHERE id = 7 AND state = 'closed'  ;  \n"
    state = eogym_state(
        [
            {"name": "padded", "validation_config": {"query": padded, "expected_value": 1}},
            {"name": "ends", "validation_config": {"query": trailing, "expected_value": 1}},
        ]
    )
    assert len(state["checks"]) == 1 and state["checks"][0].startswith("padded: SELECT")
    assert state["changes"][0]["key"] == "7"
    assert state["changes"][0]["after"] == {"state": "closed"}


def test_a_transcript_user_type_that_is_no_word_is_reported_where_it_is():
    item = {"id": "t", "title": "T", "persona": "p", "track": "single-agent", "instruction": "x"}
    transcript = {
        "id": "r",
        "simulator": {"user_type": "x" * 100},
        "messages": [{"role": "user", "content": "hi"}],
    }
    with pytest.raises(ValueError, match=r"transcripts\[0\]\.simulator: .*at most 64 characters"):
        parse_bundle([{**item, "transcripts": [transcript]}], "x")
