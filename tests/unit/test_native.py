import json

import pytest
from itsmreview.catalog.native import load_bundle, parse_bundle
from itsmreview.demo.taskset import load_specs

TASK = {
    "id": "t1",
    "title": "Reset a password",
    "persona": "L1 service desk agent",
    "track": "simulated-actors",
    "instruction": "Reset it.",
    "transcripts": [
        {
            "id": "r1",
            "messages": [
                {"role": "user", "content": "help"},
                {"role": "agent", "tool_calls": [{"id": "c1", "name": "reset", "arguments": {}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            ],
        }
    ],
}


def test_valid_task_and_unknown_fields_are_kept():
    (task,) = parse_bundle({"tasks": [{**TASK, "x_custom": {"a": 1}}]}, "b.json")
    assert task.model_dump()["x_custom"] == {"a": 1}
    assert len(task.content_hash()) == 64


def test_content_hash_changes_with_content_only():
    (a,) = parse_bundle([TASK], "a")
    (b,) = parse_bundle([dict(reversed(list(TASK.items())))], "b")
    (c,) = parse_bundle([{**TASK, "instruction": "Reset it now."}], "c")
    assert a.content_hash() == b.content_hash() != c.content_hash()


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"track": "solo"}, r"\$.tasks\[0\].track: Input should be"),
        ({"instruction": ""}, r"\$.tasks\[0\].instruction: String should have at least 1"),
        ({"title": 5}, r"\$.tasks\[0\].title: Input should be a valid string"),
    ],
)
def test_errors_name_the_json_path(change, expected):
    with pytest.raises(ValueError, match=expected):
        parse_bundle({"tasks": [TASK, {**TASK, "id": "t2", **change}][1:]}, "b.json")


def test_missing_required_field_and_duplicate_ids():
    broken = {k: v for k, v in TASK.items() if k != "persona"}
    with pytest.raises(ValueError, match=r"persona: Field required"):
        parse_bundle({"tasks": [broken]}, "b.json")
    with pytest.raises(ValueError, match=r"id 't1' already used by task \$.tasks\[0\]"):
        parse_bundle({"tasks": [TASK, TASK]}, "b.json")


def test_dangling_tool_result_is_rejected():
    transcript = {"id": "r1", "messages": [{"role": "tool", "tool_call_id": "nope"}]}
    with pytest.raises(ValueError, match="answers no earlier tool call"):
        parse_bundle([{**TASK, "transcripts": [transcript]}], "b.json")


def test_bad_json_gives_line_and_column(tmp_path):
    path = tmp_path / "b.json"
    path.write_text('{"tasks": [\n  {"id": "t1",,}\n]}')
    with pytest.raises(ValueError, match=r"b.json: invalid JSON at line 2, column 15"):
        load_bundle(path)


def test_jsonl_and_yaml_bundles(tmp_path):
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text(json.dumps(TASK) + "\n" + json.dumps({**TASK, "id": "t2"}) + "\n")
    assert [t.id for t in load_bundle(jsonl)] == ["t1", "t2"]


def test_demo_specs_cover_personas_and_tracks():
    specs = load_specs()
    assert len(specs) >= 24
    assert len({s["persona"] for s in specs}) >= 4
    assert {s["track"] for s in specs} == {"single-agent", "simulated-actors", "multi-agent-team"}
    assert len({s["id"] for s in specs}) == len(specs)


def test_shipped_json_schema_is_current_and_validates_the_demo_bundle():
    import jsonschema
    from itsmreview.catalog.native import SCHEMA_PATH, bundle_schema

    shipped = json.loads(SCHEMA_PATH.read_text())
    assert shipped == bundle_schema(), "regenerate catalog/native.schema.json"
    jsonschema.validate({"tasks": [TASK]}, shipped)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tasks": [{**TASK, "track": "solo"}]}, shipped)
