"""Hostile event-log inputs (issue 28), each refused with a message naming the file, the field
and the row, never a traceback, and with nothing written: no log in the database (SQLite and
PostgreSQL) and nothing under the data folder."""

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from itsmreview import settings as settings_module
from itsmreview.coverage import linked as linked_module
from itsmreview.coverage import service as service_module
from itsmreview.coverage.eventlog import PRESETS
from itsmreview.coverage.models import EventLog
from itsmreview.coverage.service import import_log
from itsmreview.coverage.synthetic_bpi2014 import FILES, generate_bpi2014, write_bpi2014
from itsmreview.coverage.teams import parse_mapping
from itsmreview.errors import InvalidInput
from itsmreview.storage import get_storage
from sqlmodel import func, select

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def folder(tmp_path):
    """A small BPI 2014 folder (the published layout), its tables as text frames."""
    found = generate_bpi2014(incidents=30, seed=3)
    where = tmp_path / "bpi2014"
    write_bpi2014(found, where)
    return where, found


def _nothing_written(session, data_dir: Path) -> None:
    session.rollback()
    assert session.exec(select(func.count()).select_from(EventLog)).one() == 0
    logs = data_dir / "logs"
    assert not logs.exists() or not any(logs.iterdir()), list(logs.iterdir())


def _refused(session, tmp_path, path, match, **options):
    data_dir = tmp_path / "data"
    with pytest.raises(InvalidInput, match=match) as raised:
        import_log(path, session=session, **options)
    _nothing_written(session, data_dir)
    return str(raised.value)


@pytest.fixture
def no_hashing(monkeypatch):
    """Fail the test if an import hashes a file (it must refuse before)."""

    def hashing(*_args, **_kwargs):
        raise AssertionError("a file was hashed before it was checked")

    monkeypatch.setattr(service_module, "file_digests", hashing)
    monkeypatch.setattr(service_module, "file_sha256", hashing)
    monkeypatch.setattr(linked_module, "file_sha256", hashing)


@pytest.fixture
def limits(monkeypatch):
    def set_limits(**values):
        for name, value in values.items():
            monkeypatch.setenv(f"ITSMREVIEW_{name.upper()}", str(value))
        settings_module.get_settings.cache_clear()

    yield set_limits
    settings_module.get_settings.cache_clear()


# --- size and kind before anything is read or hashed ---------------------------------------


def test_an_oversized_table_is_refused_from_its_size_before_hashing(
    session, folder, tmp_path, limits, no_hashing
):
    where, _ = folder
    limits(max_log_bytes=2**20)
    with open(where / FILES["interactions"], "wb") as handle:
        handle.truncate(2 * 2**20)  # sparse: 2 MiB of NULs, written in no time
    message = _refused(session, tmp_path, where, "over the limit", preset="bpi2014")
    assert "Detail_Interaction.csv: 2,097,152 bytes" in message
    assert "ITSMREVIEW_MAX_LOG_BYTES" in message


def test_a_nul_filled_table_under_the_limit_is_refused_before_hashing(
    session, folder, tmp_path, no_hashing
):
    where, _ = folder
    with open(where / FILES["changes"], "wb") as handle:
        handle.truncate(3 * 2**20)
    message = _refused(session, tmp_path, where, "NUL bytes", preset="bpi2014")
    assert "Detail_Change.csv" in message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_or_device_is_refused_not_read(session, folder, tmp_path, no_hashing):
    where, _ = folder
    (where / FILES["incidents"]).unlink()
    os.mkfifo(where / FILES["incidents"])
    _refused(session, tmp_path, where, r"Detail_Incident.csv: is a FIFO", preset="bpi2014")
    fifo = tmp_path / "log.csv"
    os.mkfifo(fifo)
    _refused(session, tmp_path, fifo, "is a FIFO, not a regular file", preset="bpi2013")
    _refused(
        session,
        tmp_path,
        where / FILES["activities"],
        "is a device or socket",
        preset="bpi2014",
        linked={"changes": Path("/dev/zero")},
    )


def test_a_link_out_of_the_folder_is_refused(session, folder, tmp_path):
    where, _ = folder
    outside = tmp_path / "elsewhere.csv"
    shutil.move(where / FILES["changes"], outside)
    os.symlink(outside, where / FILES["changes"])
    _refused(session, tmp_path, where, "not a regular file inside", preset="bpi2014")


# --- linked-table specs ---------------------------------------------------------------------

SPEC = """name: snow
files:
  audit: audit.csv
  incidents: incident.csv
  changes: change.csv
timestamp_format: "%Y-%m-%d %H:%M:%S"
events: {table: audit, case: number, activity: state, timestamp: at}
cases:
  table: incidents
  id: number
  attributes:
    priority: {column: priority}
    related_change: {column: rfc}
    handle_hours: {column: hours, kind: decimal}
    reassignments: {column: moves, kind: count}
    opened: {column: opened_at, kind: time}
lookups:
  - {table: changes, id: number, via: related_change, attributes: {change_type: type}}
"""


@pytest.fixture
def snow(tmp_path):
    where = tmp_path / "snow"
    where.mkdir()
    pd.DataFrame(
        {
            "number": ["INC1", "INC1", "INC2"],
            "state": ["New", "Resolved", "New"],
            "at": ["2024-03-01 08:00:00", "2024-03-01 09:00:00", "2024-03-02 08:00:00"],
        }
    ).to_csv(where / "audit.csv", index=False)
    incidents = pd.DataFrame(
        {
            "number": ["INC1", "INC2"],
            "priority": ["1", "3"],
            "rfc": ["CHG1", ""],
            "hours": ["3,8744", "12"],
            "moves": ["2", "0"],
            "opened_at": ["2024-03-01 08:00:00", "2024-03-02 08:00:00"],
        }
    )
    incidents.to_csv(where / "incident.csv", index=False)
    pd.DataFrame({"number": ["CHG1"], "type": ["Normal"]}).to_csv(where / "change.csv", index=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    return where, spec, incidents


def _spec(tmp_path, text: str) -> Path:
    path = tmp_path / "changed.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_spec_used_by_these_cases_imports(session, snow, tmp_path):
    where, spec, _ = snow
    log = import_log(where, session=session, linked_spec=spec).log
    cases = pq.read_table(get_storage().path(log.events_path, "cases.parquet")).to_pandas()
    first = cases.set_index("case_id").loc["INC1"]
    assert first["attr:handle_hours"] == pytest.approx(3.8744)
    assert first["attr:change_type"] == "Normal" and first["attr:reassignments"] == 2


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        ("change.csv", "chnage.csv", r"no file 'chnage.csv' for table 'changes' \(files.changes\)"),
        ("change.csv", "../change.csv", r"files: changes: '\.\./change.csv' leaves the folder"),
        ("change.csv", "/etc/passwd", r"files: changes: '/etc/passwd' leaves the folder"),
        ('timestamp_format: "', 'seperator: ";"\ntimestamp_format: "', r"seperator: unknown field"),
        ("{column: priority}", "{column: priority, knd: text}", r"priority.knd: unknown field"),
        (
            "via: related_change",
            "via: related",
            r"lookups\[0\].via: 'related' is not an attribute of the cases table",
        ),
        ("name: snow\n", "name: snow\nencoding: rot13\n", r"encoding: unknown encoding 'rot13'"),
        ("    priority: {", "    '': {", r"cases.attributes.: '' is not a usable name"),
        ("    priority: {", "    '<b>x</b>': {", r"'<b>x</b>' is not a usable name"),
        ("{change_type: type}", "{priority: type}", r"attribute 'priority' is given by both"),
        ("{column: priority}", "{column: ''}", r"column name '' is empty"),
    ],
)
def test_a_wrong_spec_is_refused_naming_its_field(session, snow, tmp_path, before, after, message):
    where, spec, _ = snow
    text = SPEC.replace(before, after, 1)
    assert text != SPEC
    _refused(session, tmp_path, where, message, linked_spec=_spec(tmp_path, text))


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("hours", "3.8744", r"'hours' are not numbers with a decimal comma.*row 2: '3.8744'"),
        ("hours", "inf", r"'hours' are not numbers with a decimal comma.*row 2: 'inf'"),
        ("moves", "-3", r"'moves' are not whole numbers from 0.*row 2: '-3'"),
        ("opened_at", "1500-01-01 00:00:00", r"'opened_at' lie outside the years 1970-2100"),
        ("opened_at", "01/03/2024 08:00", r"'opened_at' do not match format.*row 2"),
    ],
)
def test_a_bad_case_attribute_value_is_refused_with_its_row(
    session, snow, tmp_path, column, value, message
):
    where, spec, incidents = snow
    incidents.loc[0, column] = value
    incidents.to_csv(where / "incident.csv", index=False)
    text = _refused(session, tmp_path, where, message, linked_spec=spec)
    assert "incident.csv" in text


def test_a_number_column_refuses_infinity_and_a_decimal_comma(session, snow, tmp_path):
    where, spec, incidents = snow
    text = SPEC.replace("{column: hours, kind: decimal}", "{column: hours, kind: number}")
    incidents.loc[1, "hours"] = "1e999"
    incidents.to_csv(where / "incident.csv", index=False)
    _refused(
        session,
        tmp_path,
        where,
        r"not numbers with a decimal point.*row 2: '3,8744'.*row 3: '1e999'.*kind decimal",
        linked_spec=_spec(tmp_path, text),
    )


def test_an_over_long_row_names_its_file_and_line(session, snow, tmp_path, limits):
    where, spec, incidents = snow
    limits(max_log_row_bytes=4096)
    incidents.loc[1, "priority"] = "x" * 10_000
    incidents.to_csv(where / "incident.csv", index=False)
    _refused(
        session,
        tmp_path,
        where,
        r"incident.csv: a row is longer than 4,096 bytes \(line 3: .*MAX_LOG_ROW_BYTES",
        linked_spec=spec,
    )


def test_an_extra_field_in_a_row_is_said_in_words(session, tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("case,act,time\nc1,a,2020-01-01T00:00:00Z,extra\n", encoding="utf-8")
    from itsmreview.coverage.eventlog import ColumnMapping

    mapping = ColumnMapping(case="case", activity="act", timestamp="time")
    _refused(
        session,
        tmp_path,
        log,
        r"log.csv: a CSV row has 4 fields where the header has 3 \(the row starts 'c1,a,",
        mapping=mapping,
    )


# --- the bpi2014 preset on a folder ---------------------------------------------------------


def test_encoding_given_with_the_preset_reads_every_table_of_the_folder(session, folder, tmp_path):
    where, found = folder
    found["incidents"].loc[0, "CI Name (aff)"] = "Gebäude-Drucker"
    for key, name in FILES.items():
        found[key].to_csv(where / name, sep=";", index=False, encoding="utf-8")
    mapping = replace(PRESETS["bpi2014"], encoding="utf-8")
    log = import_log(where, session=session, preset="bpi2014", mapping=mapping).log
    cases = pq.read_table(get_storage().path(log.events_path, "cases.parquet")).to_pandas()
    assert cases.set_index("case_id").loc["IM0000001", "attr:ci_name"] == "Gebäude-Drucker"
    assert log.mapping["encoding"] == "utf-8"
    session.rollback()
    service_module.discard_files(log)  # not committed: its files go as the CLI's do
    bad = replace(PRESETS["bpi2014"], encoding="rot13")
    _refused(session, tmp_path, where, "unknown encoding 'rot13'", preset="bpi2014", mapping=bad)


# --- team mappings --------------------------------------------------------------------------


def test_yaml_group_names_stay_text():
    teams, levels = parse_mapping("ON: Desk\nNO: {team: Desk, level: L1}\n0012: Net\n", "m.yaml")
    assert teams == {"ON": "Desk", "NO": "Desk", "0012": "Net"} and levels == {"NO": "L1"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("g1: {team: {name: Desk}}\n", "entry 1: the team is a mapping, not a name"),
        ("g1: [Desk, Net]\n", "entry 1: the team is a list, not a name"),
        ('g1: "Desk\\0"\n', r"entry 1: the team 'Desk\\x00' holds a control character"),
        ('"g\\e[2J": Desk\n', r"entry 1: the group 'g\\x1b\[2J' holds a control character"),
    ],
)
def test_a_team_mapping_with_nested_or_control_values_is_refused(text, message):
    with pytest.raises(InvalidInput, match=message):
        parse_mapping(text, "m.yaml")


def test_a_bad_teams_file_stops_the_import_before_it_writes(configured, folder, tmp_path):
    from itsmreview.cli import app
    from itsmreview.db import session_scope
    from typer.testing import CliRunner

    where, _ = folder
    teams = tmp_path / "teams.yaml"
    teams.write_text("TEAM0001: {team: {nested: 1}}\n", encoding="utf-8")
    result = CliRunner().invoke(
        app, ["log", "import", str(where), "--preset", "bpi2014", "--teams", str(teams)]
    )
    assert result.exit_code == 1
    assert "teams.yaml: entry 1: the team is a mapping" in result.output
    assert "Traceback" not in result.output
    with session_scope() as session:
        _nothing_written(session, Path(configured.data_dir))


def test_a_mapping_refused_after_the_import_removes_its_files(configured, tmp_path):
    """A log without role attributes cannot take a team mapping: the import rolls back and
    its event files are removed."""
    from itsmreview.cli import app
    from itsmreview.db import session_scope
    from typer.testing import CliRunner

    log = tmp_path / "log.csv"
    log.write_text("case,act,time\nc1,a,2020-01-01T00:00:00Z\n", encoding="utf-8")
    teams = tmp_path / "teams.csv"
    teams.write_text("group,team\ng,Desk\n", encoding="utf-8")
    options = ["--case", "case", "--activity", "act", "--timestamp", "time"]
    result = CliRunner().invoke(app, ["log", "import", str(log), *options, "--teams", str(teams)])
    assert result.exit_code == 1 and "has no role attribute" in result.output
    with session_scope() as session:
        _nothing_written(session, Path(configured.data_dir))


# --- XES without org:resource ---------------------------------------------------------------

XES = """<?xml version="1.0" encoding="UTF-8"?>
<log xes.version="1.0">
<trace><string key="concept:name" value="c1"/>
<event><string key="concept:name" value="Open"/><string key="workgroup" value="Desk"/>
<date key="time:timestamp" value="2013-01-07T08:17:17+00:00"/></event>
<event><string key="concept:name" value="Close"/><string key="workgroup" value="Net"/>
<date key="time:timestamp" value="2013-01-07T09:00:00+00:00"/></event>
</trace>
<trace><string key="concept:name" value="c2"/>
<event><string key="concept:name" value="Open"/><string key="workgroup" value="Desk"/>
<date key="time:timestamp" value="2013-01-08T08:00:00+00:00"/></event>
</trace>
</log>
"""


def test_xes_without_org_resource_imports_with_the_standard_keys(configured, tmp_path):
    import json

    from itsmreview.cli import app
    from typer.testing import CliRunner

    path = tmp_path / "bpi2014.xes"
    path.write_text(XES, encoding="utf-8")
    runner = CliRunner()
    plain = runner.invoke(app, ["log", "import", str(path), "--json"])
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)[("cases")] == 2
    with_role = runner.invoke(
        app, ["log", "import", str(path), "--role", "workgroup", "--name", "r", "--json"]
    )
    assert with_role.exit_code == 0, with_role.output
    assert json.loads(with_role.stdout)["events"] == 3
    wrong = runner.invoke(app, ["log", "import", str(path), "--role", "team", "--name", "w"])
    assert wrong.exit_code == 1
    assert "mapped column(s) 'team' not in the file" in wrong.output
    assert "'workgroup'" in wrong.output and "'concept:name'" in wrong.output  # what it has
