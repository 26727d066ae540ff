"""Importing task and transcript files into the catalog on both databases."""

import json

import pytest
from itsmreview.catalog.exporting import export_catalog
from itsmreview.catalog.importing import import_path, show_task
from itsmreview.catalog.models import TaskVersion, Transcript
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.schema import metadata
from sqlalchemy import func
from sqlmodel import select


def counts(session):
    return {
        name: session.exec(select(func.count()).select_from(table)).one()
        for name, table in metadata.tables.items()
    }


@pytest.mark.realdata
def test_real_fixtures_import_version_and_export(session, real_file, tmp_path):
    tau2 = real_file("tasks", "tau2_telecom_tasks_small.json")
    eogym = real_file("tasks", "enterpriseops_gym_itsm_task.json")
    dry = import_path(tau2, session=session, dry_run=True)
    assert len(dry.report.created) == 20 and counts(session)["tasks"] == 0
    first = import_path(tau2, session=session)
    import_path(eogym, session=session)
    session.commit()
    assert (first.format, len(first.report.created)) == ("tau2", 20)
    again = import_path(tau2, session=session)
    assert len(again.report.unchanged) == 20 and not again.report.created
    out = tmp_path / "tau2.json"
    assert (
        export_catalog(
            out,
            session=session,
            fmt="tau2",
            external_ids=[t["id"] for t in json.loads(tau2.read_text())],
        )
        == 20
    )
    assert sorted(json.loads(out.read_text()), key=lambda t: t["id"]) == sorted(
        json.loads(tau2.read_text()), key=lambda t: t["id"]
    )
    out = tmp_path / "eogym.json"
    export_catalog(out, session=session, fmt="eogym", external_ids=["enterpriseops_gym_itsm_task"])
    assert json.loads(out.read_text()) == json.loads(eogym.read_text())
    shown = show_task(session=session, external_id="enterpriseops_gym_itsm_task")
    version = session.exec(select(TaskVersion)).all()
    stored = {v.content_hash for v in version}
    from itsmreview.catalog.native import parse_bundle

    assert parse_bundle([shown["task"]], "x")[0].content_hash() in stored


def test_transcripts_attach_as_a_new_version(session, tmp_path):
    bundle = tmp_path / "b.json"
    bundle.write_text(
        json.dumps(
            [
                {
                    "id": "t1",
                    "title": "No data abroad",
                    "persona": "L1",
                    "track": "simulated-actors",
                    "instruction": "Fix data.",
                }
            ]
        )
    )
    import_path(bundle, session=session)
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps(
            {
                "info": {},
                "simulations": [
                    {
                        "id": "sim-1",
                        "task_id": "t1",
                        "messages": [
                            {"role": "assistant", "content": "Hi"},
                            {"role": "user", "content": "No data", "turn_idx": 1},
                        ],
                    }
                ],
            }
        )
    )
    result = import_path(results, session=session)
    assert result.format == "tau2-sim" and result.report.new_versions == ["t1"]
    shown = show_task(session=session, external_id="t1")
    assert shown["version"] == 2
    transcript = shown["task"]["transcripts"][0]
    assert transcript["messages"][1]["content"] == "No data"
    assert transcript["original"]["simulation"]["messages"][1]["turn_idx"] == 1
    assert import_path(results, session=session).report.unchanged == ["t1"]
    assert session.exec(select(func.count()).select_from(Transcript)).one() == 1
    orphan = tmp_path / "orphan.json"
    orphan.write_text(json.dumps({"simulations": [{"task_id": "nope", "messages": []}]}))
    with pytest.raises(NotFound, match="task 'nope', which is not in the catalog"):
        import_path(orphan, session=session)


MALFORMED = [
    (
        "missing.json",
        {"tasks": [{"id": "a", "title": "A", "track": "single-agent", "instruction": "x"}]},
        r"persona: Field required",
    ),
    (
        "types.json",
        {
            "tasks": [
                {
                    "id": "a",
                    "title": ["A"],
                    "persona": "p",
                    "track": "single-agent",
                    "instruction": "x",
                }
            ]
        },
        r"\$.tasks\[0\].title: Input should be a valid string",
    ),
    (
        "dupes.json",
        {
            "tasks": [
                {
                    "id": "a",
                    "title": "A",
                    "persona": "p",
                    "track": "single-agent",
                    "instruction": "x",
                }
            ]
            * 2
        },
        r"id 'a' already used",
    ),
    (
        "dangling.json",
        {
            "tasks": [
                {
                    "id": "a",
                    "title": "A",
                    "persona": "p",
                    "track": "single-agent",
                    "instruction": "x",
                    "transcripts": [
                        {"id": "r", "messages": [{"role": "tool", "tool_call_id": "c9"}]}
                    ],
                }
            ]
        },
        r"tool_call_id 'c9' answers no earlier tool call",
    ),
    (
        "huge.json",
        {
            "tasks": [
                {
                    "id": "a",
                    "title": "A",
                    "persona": "p",
                    "track": "single-agent",
                    "instruction": "x" * 600_000,
                }
            ]
        },
        r"instruction: String should have at most 500000 characters",
    ),
    (
        "track.json",
        {"tasks": [{"id": "a", "title": "A", "persona": "p", "track": "team", "instruction": "x"}]},
        r"track: Input should be 'single-agent'",
    ),
]


@pytest.mark.parametrize("name, content, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_gives_its_error_and_changes_nothing(
    session, tmp_path, name, content, message
):
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            [
                {
                    "id": "keep",
                    "title": "K",
                    "persona": "p",
                    "track": "single-agent",
                    "instruction": "x",
                }
            ]
        )
    )
    import_path(good, session=session)
    session.commit()
    before = counts(session)
    path = tmp_path / name
    path.write_text(
        json.dumps(
            {
                "tasks": [
                    *content["tasks"],
                    {
                        "id": "fine",
                        "title": "F",
                        "persona": "p",
                        "track": "single-agent",
                        "instruction": "y",
                    },
                ]
            }
        )
    )
    with pytest.raises(InvalidInput, match=message):
        import_path(path, session=session)
    session.rollback()
    assert counts(session) == before


def test_bad_toml_in_a_harbor_folder(session, tmp_path):
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "task.toml").write_text("[task\n")
    (folder / "instruction.md").write_text("x")
    with pytest.raises(InvalidInput, match=r"task.toml: invalid TOML"):
        import_path(folder, session=session)
    with pytest.raises(InvalidInput, match="format 'csv' is not one of auto"):
        import_path(folder, session=session, fmt="csv")


def _taubench_result(trial: int, reply: str) -> dict:
    return {
        "task_id": 7,
        "trial": trial,
        "reward": 1.0 if trial == 0 else 0.0,
        "info": {
            "task": {
                "user_id": "mia_li_3668",
                "instruction": "You are Mia Li. You want to cancel order #W1 because you no "
                "longer need it. Confirm the refund goes to the original card.",
                "actions": [
                    {
                        "name": "cancel_pending_order",
                        "kwargs": {"order_id": "#W1", "reason": "no longer needed"},
                    },
                ],
                "outputs": ["refund"],
            },
            "source": "user",
        },
        "traj": [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "Please cancel my order #W1."},
            {"role": "assistant", "content": reply},
        ],
    }


def test_taubench_results_that_carry_their_task_create_it_once(session, tmp_path):
    """tau-bench (v1) results hold their task in info.task: two trials of one task import one
    task with two transcripts, instead of refusing the file."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps([_taubench_result(0, "Done."), _taubench_result(1, "Sorry.")]))
    result = import_path(path, session=session, log="retail-log", persona="L1 service desk agent")
    assert result.format == "taubench" and result.report.created == ["7"]
    shown = show_task(session=session, external_id="7")["task"]
    assert shown["instruction"].startswith("You are Mia Li.")
    assert shown["track"] == "simulated-actors" and shown["source"]["log"] == "retail-log"
    assert json.loads(shown["ground_truth"])["actions"][0]["name"] == "cancel_pending_order"
    assert 'cancel_pending_order({"order_id": "#W1"' in shown["verifier"]
    assert [t["id"] for t in shown["transcripts"]] == ["taubench-7-0", "taubench-7-1"]
    assert import_path(path, session=session).report.unchanged == ["7"]  # the same file again
    bare = tmp_path / "bare.json"
    carried = _taubench_result(0, "x")
    del carried["info"]
    carried["task_id"] = 8
    bare.write_text(json.dumps([carried]))
    with pytest.raises(NotFound, match="task '8', which is not in the catalog"):
        import_path(bare, session=session)
