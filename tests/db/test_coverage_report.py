import json

import pytest
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.cli import app
from itsmreview.coverage.report import coverage_report
from itsmreview.coverage.service import import_log
from itsmreview.coverage.synthetic import generate_log, write_csv
from itsmreview.db import session_scope
from itsmreview.errors import InvalidInput, NotFound
from typer.testing import CliRunner


def _task(task_id, **source):
    return {
        "id": task_id,
        "title": task_id,
        "persona": "L1 service desk agent",
        "track": "single-agent",
        "instruction": "x",
        "source": {"log": "s", **source},
    }


@pytest.fixture
def log_with_tasks(session, tmp_path):
    frame = generate_log(400, seed=9)
    path = write_csv(frame, tmp_path / "s.csv")
    log = import_log(path, session=session, name="s", preset="bpi2013").log
    first_case = frame["SR Number"].iloc[0]
    case_sequence = frame[frame["SR Number"] == first_case]["Activity"].tolist()
    tasks = [
        _task("by-case", case_ids=[first_case, "no-such-case"], roles={"ST Level": ["L1"]}),
        _task("absent", variants=[["Made up", "Completed-Closed"]]),
        {**_task("other-log"), "source": {"log": "elsewhere", "variants": [case_sequence]}},
    ]
    import_tasks(parse_bundle(tasks, "t"), session=session)
    session.commit()
    return log, frame, case_sequence


def test_case_ids_resolve_absent_sequences_and_filters(session, log_with_tasks):
    log, frame, case_sequence = log_with_tasks
    report, unresolved = coverage_report(session=session, log_name="s")
    assert report.tasks == 2
    cases = frame.groupby("SR Number", sort=False)["Activity"].agg(list)
    expected = sum(seq == case_sequence for seq in cases) / len(cases)
    assert report.variant_coverage == pytest.approx(expected)
    assert unresolved == {"by-case": ["no-such-case"]}
    assert [a.task_ids for a in report.absent_sequences] == [["absent"]]
    levels = frame["ST Level"]
    assert report.role_coverage["ST Level"] == pytest.approx((levels == "L1").mean())
    rated, _ = coverage_report(session=session, log_name="s", task_filter="rated")
    assert rated.tasks == 0 and rated.variant_coverage == 0
    with pytest.raises(InvalidInput, match="not one of approved, rated, all"):
        coverage_report(session=session, log_name="s", task_filter="some")
    with pytest.raises(NotFound):
        coverage_report(session=session, log_name="nope")


def test_coverage_cli_json_keys(configured, tmp_path):
    path = write_csv(generate_log(100, seed=2), tmp_path / "c.csv")
    with session_scope() as session:
        import_log(path, session=session, name="c", preset="bpi2013")
    result = CliRunner().invoke(app, ["coverage", "c", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in (
        "variant_coverage",
        "variant_coverage_collapsed",
        "df_coverage",
        "activity_coverage",
        "role_coverage",
        "gaps",
    ):
        assert key in data
    assert data["tasks"] == 0 and set(data["role_coverage"]) >= {"ST Level", "Involved ST"}
