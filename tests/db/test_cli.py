"""The CLI against real databases (both backends)."""

import json

from itsmreview.cli import app
from itsmreview.coverage.synthetic import generate_log, write_csv
from typer.testing import CliRunner

runner = CliRunner()


def run(*args, input=None):
    return runner.invoke(app, list(args), input=input)


def _no_nan(constant):
    raise AssertionError(f"{constant} is not JSON")


def test_users_add_and_list(configured):
    result = run("users", "add", "eva", "--role", "expert", "--expertise", "L2 resolver")
    assert result.exit_code == 0, result.output
    assert "password:" in result.output
    result = run(
        "users", "add", "leo", "--role", "lead", "--password-stdin", input="a-long-password\n"
    )
    assert result.exit_code == 0 and "password:" not in result.output
    listed = json.loads(run("users", "list", "--json").output)
    assert [(u["username"], u["role"]) for u in listed] == [("eva", "expert"), ("leo", "lead")]
    duplicate = run("users", "add", "eva", "--role", "lead")
    assert duplicate.exit_code == 1 and "exists already" in duplicate.output


def test_log_import_stats_and_errors(configured, tmp_path):
    path = write_csv(generate_log(120, seed=4), tmp_path / "log.csv")
    result = run("log", "import", str(path), "--preset", "bpi2013", "--name", "small", "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(run("log", "stats", "small", "--json").output)
    for key in (
        "cases",
        "events",
        "activities",
        "variants",
        "collapsed_variants",
        "df_pairs",
        "singleton_variants",
    ):
        assert isinstance(stats[key], int)
    assert stats["cases"] == 120
    missing = run("log", "stats", "nope")
    assert missing.exit_code == 1 and "no log named 'nope'" in missing.output
    partial = run("log", "import", str(path), "--case", "SR Number")
    assert partial.exit_code == 1 and "needs all of --case, --activity and --timestamp" in (
        partial.output
    )


def test_tasks_import_dry_run_and_ledger_verify(configured, tmp_path):
    bundle = tmp_path / "b.json"
    bundle.write_text(
        json.dumps(
            {
                "tasks": [
                    {
                        "id": "x1",
                        "title": "T",
                        "persona": "L2 resolver",
                        "track": "single-agent",
                        "instruction": "Fix it.",
                        "provenance": [{"field": "instruction", "source": "expert"}],
                    },
                ]
            }
        )
    )
    dry = json.loads(run("tasks", "import", str(bundle), "--dry-run", "--json").output)
    assert dry["created"] == ["x1"] and dry["dry_run"]
    assert json.loads(run("tasks", "list", "--json").output) == []
    assert run("tasks", "import", str(bundle)).exit_code == 0
    listed = run("tasks", "list", "--json").output
    assert [t["external_id"] for t in json.loads(listed, parse_constant=_no_nan)] == ["x1"]
    assert json.loads(listed)[0]["difficulty"] is None  # strict JSON: null, not NaN
    assert "nan" not in run("tasks", "list").output  # nothing declared, nothing shown
    verified = run("ledger", "verify")
    assert verified.exit_code == 0 and "chain intact" in verified.output


def test_tasks_list_writes_words_and_leaves_out_what_a_task_does_not_declare(configured, tmp_path):
    """One task declares a difficulty and a user type, the other nothing: the listing's columns
    hold NaN for the second, which the list must not print (`difficulty=nan`)."""
    common = {"persona": "L2 resolver", "track": "single-agent", "instruction": "Fix it."}
    bundle = tmp_path / "b.json"
    tasks = [
        {"id": "x1", "title": "T1", **common, "difficulty": "L3", "user_type": "edge_case"},
        {"id": "x2", "title": "T2", **common},
    ]
    bundle.write_text(json.dumps({"tasks": tasks}))
    assert run("tasks", "import", str(bundle)).exit_code == 0
    lines = run("tasks", "list").output.splitlines()
    assert len(lines) == 2
    declared, bare = sorted(lines)
    assert declared.startswith("x1") and "difficulty Hard, user Edge case" in declared
    assert bare.startswith("x2") and bare.rstrip().endswith("L2 resolver")
    for line in lines:
        assert "nan" not in line.lower() and "None" not in line and "_" not in line
        assert "In review" in line or "Draft" in line or "Pending" in line


def test_db_upgrade_and_current(configured):
    result = run("db", "upgrade")
    assert result.exit_code == 0 and "->" in result.output
    from alembic.script import ScriptDirectory
    from itsmreview.db import alembic_config

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert run("db", "current").output.strip() == head


def test_demo_no_serve_prints_logins(configured, monkeypatch):
    monkeypatch.setenv("ITSMREVIEW_DEMO_CASES", "300")
    from itsmreview.settings import get_settings

    get_settings.cache_clear()
    result = run("demo", "--no-serve")
    assert result.exit_code == 0, result.output
    assert "expert1" in result.output and "itsm-demo" in result.output
    assert "logs 'demo-vinst' and 'rabobank-demo'" in result.output  # both demo logs named


def test_round_create_list_close(configured, tmp_path):
    bundle = tmp_path / "b.json"
    bundle.write_text(
        json.dumps(
            [
                {
                    "id": f"r{i}",
                    "title": "T",
                    "persona": "L2 resolver",
                    "track": "single-agent",
                    "instruction": "x",
                }
                for i in range(3)
            ]
        )
    )
    assert run("tasks", "import", str(bundle)).exit_code == 0
    created = run("round", "create", "Pilot", "--k", "2")
    assert created.exit_code == 0 and "3 task(s), k=2" in created.output
    assert run("round", "create", "Pilot").exit_code == 1
    rounds = json.loads(run("round", "list", "--json").output)
    assert rounds == [
        {
            "name": "Pilot",
            "status": "open",
            "k": 2,
            "assigned": 0,
            "submitted": 0,
            "mode": "standard",
            "phase": None,
            "stage": None,
        }
    ]
    assert run("round", "close", "Pilot").exit_code == 0
    assert json.loads(run("round", "list", "--json").output)[0]["status"] == "closed"


def test_round_create_takes_the_tasks_a_filter_selects_and_admits_experts(configured, tmp_path):
    bundle = tmp_path / "b.json"
    bundle.write_text(
        json.dumps(
            [
                {
                    "id": f"{persona[:2]}-{i}",
                    "title": f"T{i}",
                    "persona": persona,
                    "track": "single-agent",
                    "instruction": "x",
                }
                for persona in ("L2 resolver", "Change manager")
                for i in range(2)
            ]
        )
    )
    assert run("tasks", "import", str(bundle)).exit_code == 0
    assert run("users", "add", "e1", "--role", "expert").exit_code == 0
    created = run("round", "create", "L2 only", "--persona", "L2 resolver", "--expert", "e1")
    assert created.exit_code == 0, created.output
    assert "opened round 'L2 only': 2 task(s)" in created.output
    # the rest are still drafts: a second round takes them by status
    created = run("round", "create", "The rest", "--status", "draft")
    assert "opened round 'The rest': 2 task(s)" in created.output
    missing = run("round", "create", "Named", "--id", "L2-0", "--id", "nope")
    assert missing.exit_code == 1
    assert "1 task id(s) not in the catalog: nope" in missing.output
    unknown = run("round", "create", "Who", "--expert", "nobody")
    assert unknown.exit_code == 1 and "nobody" in unknown.output


def test_serve_listens_on_this_machine_unless_told(configured, monkeypatch):
    import itsmreview.cli.server as cli

    launched = []
    monkeypatch.setattr(cli.os, "execve", lambda _exe, command, _env: launched.append(command))
    assert run("serve", "--port", "8765").exit_code == 0
    assert run("serve", "--address", "0.0.0.0").exit_code == 0
    addresses = [c[c.index("--server.address") + 1] for c in launched]
    assert addresses == ["127.0.0.1", "0.0.0.0"]
    assert launched[0][launched[0].index("--server.port") + 1] == "8765"


def test_light_commands_start_without_pandas_pm4py_or_streamlit(configured):
    """`--help` and `round list` answer without importing the heavy libraries (and, on a
    current database, without Alembic)."""
    import subprocess
    import sys

    assert CliRunner().invoke(app, ["round", "list"]).exit_code == 0  # migrates once
    probe = (
        "import sys\n"
        "from itsmreview.cli import main\n"
        "for argv in (['itsmreview', '--help'], ['itsmreview', 'round', 'list']):\n"
        "    sys.argv = argv\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as exit:\n"
        "        assert not exit.code, exit.code\n"
        "heavy = {'pandas', 'pm4py', 'streamlit', 'alembic', 'numpy'} & set(sys.modules)\n"
        "print('heavy:', sorted(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "heavy: []"
