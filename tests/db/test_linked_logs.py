"""BPI 2014's four linked tables, imported with the bpi2014 preset from a folder or as files,
on both databases; the case attributes checked against pandas reading the same files."""

import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from itsmreview.coverage.models import EventLog
from itsmreview.coverage.service import import_log
from itsmreview.coverage.synthetic_bpi2014 import FILES, generate_bpi2014, write_bpi2014
from itsmreview.errors import InvalidInput
from itsmreview.storage import get_storage
from sqlmodel import func, select


@pytest.fixture
def tables(tmp_path):
    found = generate_bpi2014(incidents=300, seed=9)
    incidents = found["incidents"]
    # what the real files hold: a Latin-1 character, a day-first date, a decimal comma
    incidents.loc[0, "CI Name (aff)"] = "Gebäude-Drucker"
    incidents.loc[0, "Open Time"] = "07-01-2013 08:17:17"
    incidents.loc[0, "Handle Time (Hours)"] = "3,8744"
    folder = tmp_path / "bpi2014"
    write_bpi2014(found, folder)
    return folder, found


def _cases(log: EventLog) -> pd.DataFrame:
    return pq.read_table(get_storage().path(log.events_path, "cases.parquet")).to_pandas()


def test_the_four_tables_import_from_their_folder(session, tables, tmp_path):
    folder, _ = tables
    raw = {
        k: pd.read_csv(folder / n, sep=";", encoding="latin-1", dtype=str) for k, n in FILES.items()
    }  # noqa: E501
    log = import_log(folder, session=session, preset="bpi2014").log
    session.commit()
    activities = raw["activities"]
    assert (log.n_events, log.n_cases) == (len(activities), activities["Incident ID"].nunique())
    assert log.mapping["linked"]["incidents"]["matched_cases"] == log.n_cases
    cases = _cases(log).set_index("case_id")
    first = cases.loc["IM0000001"]
    assert first["attr:ci_name"] == "Gebäude-Drucker"  # read as Latin-1
    assert first["attr:open_time"] == pd.Timestamp("2013-01-07 08:17:17", tz="UTC")  # day first
    assert first["attr:handle_time_hours"] == pytest.approx(3.8744)  # decimal comma
    # independent: pandas counts and joins on the raw files
    reassigned = (
        activities[activities["IncidentActivity_Type"] == "Reassignment"]
        .groupby("Incident ID")
        .size()
        .reindex(cases.index, fill_value=0)
    )
    assert (cases["attr:reassignments"] == reassigned).all()
    interactions = raw["interactions"]
    linked = interactions[interactions["Related Incident"] != "#N/B"]
    per_case = linked.groupby("Related Incident").size().reindex(cases.index, fill_value=0)
    assert (cases["attr:interactions"] == per_case).all()
    merged = raw["incidents"].merge(
        raw["changes"], left_on="Related Change", right_on="Change ID", how="inner"
    )
    expected = merged.set_index("Incident ID")["Change Type"]
    assert len(expected) > 0
    assert (cases.loc[expected.index, "attr:change_type"] == expected).all()
    assert cases["attr:change_type"].notna().sum() == len(expected)
    priority = raw["incidents"].set_index("Incident ID")["Priority"]
    assert (cases["attr:priority"] == priority.reindex(cases.index)).all()


def test_linked_tables_leave_the_events_as_the_activity_table_alone_gives(
    session, tables, tmp_path
):
    folder, _ = tables
    alone = import_log(folder / FILES["activities"], session=session, preset="bpi2014").log

    def import_joined():
        return import_log(
            folder / FILES["activities"],
            session=session,
            preset="bpi2014",
            name="joined",
            linked={"incidents": folder / FILES["incidents"]},
        )

    joined = import_joined().log
    assert (alone.n_events, alone.n_variants, alone.n_df_pairs) == (
        joined.n_events,
        joined.n_variants,
        joined.n_df_pairs,
    )
    assert not [c for c in _cases(alone).columns if c.startswith("attr:")]
    assert "attr:closure_code" in _cases(joined).columns
    again = import_joined()
    assert not again.created and again.log.id == joined.id


def test_a_bad_table_is_refused_with_its_place_and_nothing_is_stored(session, tables, tmp_path):
    folder, found = tables
    incidents = found["incidents"].copy()
    incidents.loc[5, "Close Time"] = "2013/01/07 08:17"
    incidents.to_csv(folder / FILES["incidents"], sep=";", index=False, encoding="latin-1")
    with pytest.raises(
        InvalidInput,
        match=r"Detail_Incident.csv: 1 timestamp\(s\) in column 'Close Time'.*"
        r"\(row 7: '2013/01/07 08:17'\)",
    ):
        import_log(folder, session=session, preset="bpi2014")
    session.rollback()
    assert session.exec(select(func.count()).select_from(EventLog)).one() == 0
    stored = tmp_path / "d" / "logs"
    assert not stored.exists() or not any(stored.iterdir())  # no events or cases written


def test_a_folder_link_out_of_it_or_a_missing_table_is_refused(session, tables, tmp_path):
    folder, _ = tables
    outside = tmp_path / "elsewhere.csv"
    (folder / FILES["incidents"]).rename(outside)
    os.symlink(outside, folder / FILES["incidents"])
    with pytest.raises(InvalidInput, match="not a regular file inside"):
        import_log(folder, session=session, preset="bpi2014")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidInput, match="no Detail_Incident_Activity.csv in the folder"):
        import_log(empty, session=session, preset="bpi2014")
    with pytest.raises(InvalidInput, match="is a folder"):
        import_log(folder, session=session, preset="bpi2013")
    with pytest.raises(InvalidInput, match="need --preset bpi2014"):
        import_log(
            folder / FILES["activities"],
            session=session,
            preset="bpi2013",
            linked={"incidents": outside},
        )


def test_the_synthetic_tables_keep_the_public_layout_and_links(tmp_path):
    found = generate_bpi2014(incidents=400, seed=4)
    write_bpi2014(found, tmp_path)
    head = (tmp_path / FILES["activities"]).read_bytes().splitlines()[0].decode("latin-1")
    assert head == (
        "Incident ID;DateStamp;IncidentActivity_Number;IncidentActivity_Type;"
        "Assignment Group;KM number;Interaction ID"
    )
    incidents, activities = found["incidents"], found["activities"]
    assert set(activities["Incident ID"]) == set(incidents["Incident ID"])
    stamps = pd.to_datetime(activities["DateStamp"], format="%d-%m-%Y %H:%M:%S")
    assert stamps.notna().all()
    assert incidents["Handle Time (Hours)"].str.fullmatch(r"\d+,\d{4}").all()
    shares = {k: len(found[k]) / len(incidents) for k in found}
    assert 8 < shares["activities"] < 12  # about ten events an incident, as in the real log
    assert 2.8 < shares["interactions"] < 3.5 and 0.5 < shares["changes"] < 0.8
    assert activities["Assignment Group"].nunique() > 50


def _task(task_id, **source):
    return {
        "id": task_id,
        "title": task_id,
        "persona": "L2 resolver",
        "track": "single-agent",
        "instruction": "Resolve the incident.",
        "source": {"log": "b14", **source},
    }


def test_outcome_coverage_follows_the_cases_and_values_tasks_declare(session, tables, tmp_path):
    from itsmreview.catalog.native import parse_bundle
    from itsmreview.catalog.service import import_tasks
    from itsmreview.coverage.report import coverage_report

    folder, found = tables
    import_log(folder, session=session, preset="bpi2014", name="b14")
    incidents = found["incidents"].set_index("Incident ID")
    chosen = ["IM0000002", "IM0000003"]
    tasks = [
        _task("by-cases", case_ids=chosen),
        _task("by-outcome", outcomes={"closure_code": "Hardware", "reassigned": ["3+"]}),
    ]
    import_tasks(parse_bundle(tasks, "t"), session=session)
    session.commit()
    report, _ = coverage_report(
        session=session, log_name="b14", sla_hours={"1": 8, "2": 16, "3": 48, "4": 96, "5": 240}
    )
    outcomes = report.outcomes
    assert {"closure_code", "priority", "reassigned", "sla", "ci_type"} <= set(outcomes)
    assert "ci_name" not in outcomes and "related_change" not in outcomes  # identifiers
    # independent: the same shares counted from the raw incident table with pandas
    codes = incidents["Closure Code"]
    covered_codes = set(codes[chosen]) | {"Hardware"}
    assert outcomes["closure_code"]["covered_values"] == sorted(covered_codes)
    assert outcomes["closure_code"]["coverage"] == pytest.approx(codes.isin(covered_codes).mean())
    reassigned = incidents["# Reassignments"].astype(int).map(lambda n: str(n) if n < 3 else "3+")
    covered = set(reassigned[chosen]) | {"3+"}
    assert outcomes["reassigned"]["coverage"] == pytest.approx(reassigned.isin(covered).mean())
    priority = incidents["Priority"]
    gaps = outcomes["priority"]["gaps"]
    assert [g["value"] for g in gaps] == list(
        priority[~priority.isin(set(priority[chosen]))].value_counts().index
    )
    opened = pd.to_datetime(incidents["Open Time"], format="mixed", dayfirst=True)
    resolved = pd.to_datetime(incidents["Resolved Time"], format="mixed", dayfirst=True)
    hours = (resolved - opened).dt.total_seconds() / 3600
    target = priority.map({"1": 8, "2": 16, "3": 48, "4": 96, "5": 240})
    met = (hours <= target).map({True: "met", False: "breached"})
    assert outcomes["sla"]["value_cases"] == met.value_counts().to_dict()
    record = report.to_record()
    assert type(report).from_record(record).outcomes == outcomes  # stored for the page


def test_a_log_without_case_attributes_has_no_outcomes(session, tables, tmp_path):
    from itsmreview.coverage.report import coverage_report

    folder, _ = tables
    import_log(
        folder / FILES["activities"],
        session=session,
        preset="bpi2014",
        name="alone",
    )
    report, _ = coverage_report(session=session, log_name="alone")
    assert report.outcomes == {} and report.as_dict()["outcomes"] == {}


def _mapping_csv(path: Path, groups: list[str]) -> Path:
    lines = ["group,team,level"]
    for index, group in enumerate(groups):
        team = "Service desk" if index < 3 else f"Resolvers {index % 4}"
        lines.append(f"{group},{team},{'L1' if index < 3 else 'L2'}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_team_mapping_is_versioned_recorded_and_read_by_coverage(session, tables, tmp_path):
    from itsmreview.accounts.service import create_user
    from itsmreview.catalog.native import parse_bundle
    from itsmreview.catalog.service import import_tasks
    from itsmreview.coverage.report import coverage_report
    from itsmreview.coverage.teams import group_table, read_mapping_file, set_team_mapping
    from itsmreview.ledger.models import LedgerEntry

    folder, found = tables
    import_log(folder, session=session, preset="bpi2014", name="b14")
    lead, _ = create_user(session=session, username="lena", role="lead", password="lead-pass-1")
    activities = found["activities"]
    events = activities["Assignment Group"].value_counts()
    groups = list(events.index[:20])  # the 20 busiest groups; the rest stay unmapped
    teams, levels = read_mapping_file(_mapping_csv(tmp_path / "teams.csv", [*groups, "TEAM9999"]))
    first, unknown = set_team_mapping(
        session=session,
        actor=lead,
        log_name="b14",
        teams=teams,
        levels=levels,
        source_kind="external",
        reference="Org chart 2013-01",
    )
    assert (first.version, first.attribute, unknown) == (1, "Assignment Group", ["TEAM9999"])
    same, _ = set_team_mapping(
        session=session,
        actor=lead,
        log_name="b14",
        teams=teams,
        levels=levels,
        source_kind="external",
    )
    assert same.id == first.id  # nothing changed: no new version
    with pytest.raises(InvalidInput, match="the team is longer than 256 characters"):
        set_team_mapping(session=session, actor=lead, log_name="b14", teams={"g": "x" * 300})
    teams[groups[5]] = "Service desk"
    second, _ = set_team_mapping(session=session, actor=lead, log_name="b14", teams=teams)
    assert second.version == 2
    entries = session.exec(
        select(LedgerEntry).where(LedgerEntry.artifact_type == "team_mapping")
    ).all()
    assert [(e.artifact_id, e.source_kind) for e in entries] == [
        ("b14:Assignment Group@v1", "external"),
        ("b14:Assignment Group@v2", "expert"),
    ]
    table = group_table(session=session, log_name="b14").set_index("group")
    assert table.loc[groups[5], "team"] == "Service desk"
    assert table.loc[groups[0], "level"] == ""  # version 2 was saved without levels
    assert (table["events"] == events.reindex(table.index)).all()
    import_tasks(
        parse_bundle(
            [
                _task("desk", roles={"Assignment Group": [groups[1]]}),
                _task("named", roles={"team": ["Resolvers 3"]}),
            ],
            "t",
        ),
        session=session,
    )
    session.commit()
    report, _ = coverage_report(session=session, log_name="b14")
    # independent: events of the groups whose team a task declares, among mapped groups' events
    team_of = pd.Series(teams)
    mapped_events = events[events.index.isin(team_of.index)]
    declared = {teams[groups[1]], "Resolvers 3"}
    covered = mapped_events[team_of.reindex(mapped_events.index).isin(declared)].sum()
    assert report.role_coverage["team"] == pytest.approx(covered / mapped_events.sum())
    groups_covered = events[groups[1]] / events.sum()
    assert report.role_coverage["Assignment Group"] == pytest.approx(groups_covered)
    assert {g["value"] for g in report.gaps["role_values"] if g["attribute"] == "team"} <= set(
        team_of
    )
    assert "level" not in report.role_coverage  # version 2 has no levels
    set_team_mapping(session=session, actor=lead, log_name="b14", teams=teams, levels=levels)
    session.commit()
    with_levels, _ = coverage_report(session=session, log_name="b14")
    level_of = pd.Series(levels)
    leveled = events[events.index.isin(level_of.index)]
    declared = {levels[groups[1]]}
    expected = leveled[level_of.reindex(leveled.index).isin(declared)].sum() / leveled.sum()
    assert with_levels.role_coverage["level"] == pytest.approx(expected)


@pytest.mark.parametrize(
    "text, name, message",
    [
        ("groep,team\nA,B\n", "m.csv", "must name the columns group,team"),
        ("group,team\nA,Desk\nA,Network\n", "m.csv", "mapped to both 'Desk' and 'Network'"),
        ("group,team\nA,\n", "m.csv", "m.csv:2: a group and its team are both needed"),
        ("[1, 2]\n", "m.yaml", "entry 1 is not a record"),
        ("{}\n", "m.yaml", "the mapping is empty"),
    ],
)
def test_a_broken_mapping_file_says_where(text, name, message):
    from itsmreview.coverage.teams import parse_mapping

    with pytest.raises(InvalidInput, match=message):
        parse_mapping(text, name)


def test_the_cli_imports_with_a_team_mapping_and_shows_it(configured, tables, tmp_path):
    import json

    from itsmreview.cli import app
    from typer.testing import CliRunner

    folder, found = tables
    groups = list(found["activities"]["Assignment Group"].value_counts().index[:6])
    mapping = _mapping_csv(tmp_path / "teams.csv", groups)
    runner = CliRunner()
    result = runner.invoke(
        app, ["log", "import", str(folder), "--preset", "bpi2014", "--teams", str(mapping)]
    )
    assert result.exit_code == 0, result.output
    assert "incidents     Detail_Incident.csv: 300 rows; matched cases 300" in result.stdout
    shown = runner.invoke(app, ["log", "teams", "bpi2014", "--json"])
    assert shown.exit_code == 0, shown.output
    groups_shown = json.loads(shown.stdout)["groups"]
    assert sum(1 for g in groups_shown if g["team"]) == 6
    changed = tmp_path / "teams.yaml"
    changed.write_text(f"{groups[0]}: Network\n", encoding="utf-8")
    again = runner.invoke(app, ["log", "teams", "bpi2014", str(changed), "--source", "external"])
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("1 of ")
    bad = runner.invoke(app, ["log", "teams", "bpi2014", str(changed), "--source", "rumour"])
    assert bad.exit_code == 1 and "not one of expert, external" in bad.output
    coverage = runner.invoke(app, ["coverage", "bpi2014", "--json", "--sla-hours", "1=8,2=16"])
    assert coverage.exit_code == 0, coverage.output
    report = json.loads(coverage.stdout)
    assert "team" in report["role_coverage"] and "sla" in report["outcomes"]
    wrong = runner.invoke(app, ["coverage", "bpi2014", "--sla-hours", "1=soon"])
    assert wrong.exit_code == 1 and "is not PRIORITY=HOURS" in wrong.output


def test_coverage_per_persona_and_across_logs(session, tables, tmp_path):
    from itsmreview.accounts.service import create_user
    from itsmreview.catalog.native import parse_bundle
    from itsmreview.catalog.service import import_tasks
    from itsmreview.coverage.across_logs import benchmark_coverage
    from itsmreview.coverage.report import coverage_report
    from itsmreview.coverage.synthetic import generate_log, write_csv

    folder, found = tables
    import_log(folder, session=session, preset="bpi2014", name="b14")
    small = write_csv(generate_log(200, seed=4), tmp_path / "v.csv")
    import_log(small, session=session, preset="bpi2013", name="vinst")
    lead, _ = create_user(session=session, username="lena", role="lead", password="lead-pass-1")
    activities = found["activities"]
    by_case = activities.groupby("Incident ID", sort=False)["IncidentActivity_Type"].agg(list)
    l1 = {**_task("l1", variants=[by_case["IM0000001"]]), "persona": "L1 agent"}
    l2 = {**_task("l2", variants=[by_case["IM0000002"], by_case["IM0000003"]])}
    vinst = generate_log(200, seed=4).groupby("SR Number", sort=False)["Activity"].agg(list)
    other = {**_task("v1", variants=[vinst.iloc[0]]), "persona": "L1 agent"}
    other["source"]["log"] = "vinst"
    import_tasks(parse_bundle([l1, l2, other], "t"), session=session)
    session.commit()
    share = by_case.map(tuple).value_counts(normalize=True)
    only_l1, _ = coverage_report(session=session, log_name="b14", persona="L1 agent")
    assert (only_l1.tasks, only_l1.variant_coverage) == (
        1,
        pytest.approx(share[tuple(l1["source"]["variants"][0])]),
    )  # noqa: E501
    resolvers, _ = coverage_report(session=session, log_name="b14", persona="L2 resolver")
    expected = share[[tuple(v) for v in l2["source"]["variants"]]].sum()
    assert resolvers.tasks == 1 and resolvers.variant_coverage == pytest.approx(expected)
    both = {
        w: benchmark_coverage(session=session, actor=lead, weight=w) for w in ("events", "equal")
    }  # noqa: E501
    events = {"b14": len(activities), "vinst": len(generate_log(200, seed=4))}
    logs = both["events"]["logs"]
    assert {n: logs[n]["events"] for n in logs} == events
    total = sum(events.values())
    expected = sum(logs[n]["variant_coverage"] * events[n] / total for n in events)
    assert both["events"]["total"]["variant_coverage"] == pytest.approx(expected)
    assert both["equal"]["total"]["variant_coverage"] == pytest.approx(
        sum(logs[n]["variant_coverage"] for n in events) / 2
    )
    matrix = both["events"]["personas"]
    assert matrix["L1 agent"]["logs"]["b14"]["variant_coverage"] == pytest.approx(
        only_l1.variant_coverage
    )
    assert matrix["L1 agent"]["logs"]["vinst"]["tasks"] == 1
    assert matrix["L2 resolver"]["logs"]["vinst"] == {
        **matrix["L2 resolver"]["logs"]["vinst"],
        "tasks": 0,
        "variant_coverage": 0.0,
    }  # noqa: E501
    with pytest.raises(InvalidInput, match="weight 'cases' is not one of events, equal"):
        benchmark_coverage(session=session, actor=lead, weight="cases")


def test_a_fresh_process_imports_into_a_database_already_at_head(tables, tmp_path):
    """No migration runs then, so no model module gets imported by Alembic: the command must
    know every table itself (a flush failed on the users table it had not imported)."""
    import subprocess
    import sys

    folder, _ = tables
    env = dict(
        os.environ,
        ITSMREVIEW_DATABASE_URL=f"sqlite:///{tmp_path / 'fresh.db'}",
        ITSMREVIEW_DATA_DIR=str(tmp_path / "data"),
    )
    command = [sys.executable, "-m", "itsmreview.cli"]
    subprocess.run([*command, "db", "upgrade"], env=env, check=True, capture_output=True)
    result = subprocess.run(
        [*command, "log", "import", str(folder), "--preset", "bpi2014"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "bpi2014 v1 imported: 300 cases" in result.stdout


@pytest.mark.realdata
@pytest.mark.parametrize(
    "parts, preset, cases, events, attribute",
    [
        (("logs", "bpi2013_incidents.csv.gz"), "bpi2013", 7554, 65533, "Involved ST"),
        (("logs", "helpdesk.xes.gz"), "helpdesk", 4580, 21348, "workgroup"),
    ],
)
def test_the_real_logs_keep_their_numbers_under_the_new_mechanisms(
    session, real_file, tmp_path, parts, preset, cases, events, attribute
):
    """BPI 2013 and Helpdesk through the import that now also reads linked tables: the same
    counts; no outcomes; and a team mapping adds `team` without moving any other figure."""
    from itsmreview.accounts.service import create_user
    from itsmreview.catalog.native import parse_bundle
    from itsmreview.catalog.service import import_tasks
    from itsmreview.coverage import queries
    from itsmreview.coverage.metrics import compute_coverage
    from itsmreview.coverage.report import coverage_report, load_log_tables, resolve_sources
    from itsmreview.coverage.teams import group_table, set_team_mapping

    log = import_log(real_file(*parts), session=session, preset=preset, name="real")
    log = log.log
    assert (log.n_cases, log.n_events) == (cases, events)
    assert not [c for c in _cases(log).columns if c.startswith("attr:")]
    variants = queries.variants_frame(session=session, log_id=log.id)
    groups = group_table(session=session, log_name="real", attribute=attribute)
    tasks = [
        {
            **_task("a", variants=[list(variants["sequence"].iloc[0])]),
            "source": {
                "log": "real",
                "variants": [list(variants["sequence"].iloc[0])],
                "roles": {attribute: [groups["group"].iloc[0]]},
            },
        },
        {
            **_task("b", variants=[list(variants["sequence"].iloc[3])]),
            "source": {"log": "real", "variants": [list(variants["sequence"].iloc[3])]},
        },
    ]
    import_tasks(parse_bundle(tasks, "t"), session=session)
    session.commit()
    before, _ = coverage_report(session=session, log_name="real")
    tables = load_log_tables(session=session, log_id=log.id, n_cases=log.n_cases)
    rows = [(t["id"], t["source"]) for t in tasks]
    sources, _ = resolve_sources(rows, tables=tables, events_path=log.events_path)
    direct = compute_coverage(tables, sources).as_dict()
    assert before.as_dict() == direct  # outcomes {} on both sides: nothing added
    lead, _ = create_user(session=session, username="lena", role="lead", password="lead-pass-1")
    half = groups["group"].iloc[: len(groups) // 2]
    set_team_mapping(
        session=session,
        actor=lead,
        log_name="real",
        attribute=attribute,
        teams={g: f"team {i % 3}" for i, g in enumerate(half)},
    )
    session.commit()
    after, _ = coverage_report(session=session, log_name="real")
    moved = {k: v for k, v in after.as_dict().items() if k not in ("role_coverage", "gaps")}
    assert moved == {k: v for k, v in direct.items() if k not in ("role_coverage", "gaps")}
    assert {k: v for k, v in after.role_coverage.items() if k != "team"} == before.role_coverage
    assert 0 < after.role_coverage["team"] <= 1


def _documented_spec(tmp_path: Path) -> Path:
    """The ServiceNow spec docs/formats.md shows, exactly as written there."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text()
    block = text.split("```yaml linked-spec\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "servicenow.yaml"
    path.write_text(block, encoding="utf-8")
    return path


def test_the_documented_servicenow_spec_joins_its_tables(session, tmp_path):
    from itsmreview.coverage.report import coverage_report

    folder = tmp_path / "snow"
    folder.mkdir()
    pd.DataFrame(
        {
            "documentkey": ["INC1", "INC1", "INC1", "INC2", "INC2"],
            "newvalue": ["New", "In Progress", "Resolved", "New", "Resolved"],
            "sys_created_on": [
                "2024-03-01 08:00:00",
                "2024-03-01 09:00:00",
                "2024-03-02 10:00:00",
                "2024-03-03 08:00:00",
                "2024-03-03 08:30:00",
            ],
            "user": ["ann", "bob", "bob", "ann", "ann"],
        }
    ).to_csv(folder / "sys_audit.csv", index=False)
    pd.DataFrame(
        {
            "number": ["INC1", "INC2", "INC3"],
            "priority": ["2 - High", "4 - Low", "3 - Moderate"],
            "close_code": ["Solved (Permanently)", "Solved (Work Around)", ""],
            "assignment_group": ["Network", "Service Desk", "Network"],
            "reassignment_count": ["2", "0", "1"],
            "opened_at": ["2024-03-01 08:00:00", "2024-03-03 08:00:00", "2024-03-04 08:00:00"],
            "resolved_at": ["2024-03-02 10:00:00", "2024-03-03 08:30:00", "NULL"],
            "rfc": ["CHG7", "", ""],
        }
    ).to_csv(folder / "incident.csv", index=False)
    pd.DataFrame({"task": ["INC1", "INC1", "INC2"], "sla": ["a", "b", "c"]}).to_csv(
        folder / "task_sla.csv", index=False
    )
    pd.DataFrame({"number": ["CHG7"], "type": ["Normal"], "risk": ["Moderate"]}).to_csv(
        folder / "change_request.csv", index=False
    )
    spec = _documented_spec(tmp_path)
    log = import_log(folder, session=session, linked_spec=spec).log
    session.commit()
    assert (log.n_cases, log.n_events, log.preset) == (2, 5, "servicenow")
    cases = _cases(log).set_index("case_id")
    assert cases.loc["INC1", "attr:priority"] == "2 - High"
    assert cases.loc["INC1", "attr:reassignments"] == 2
    assert cases.loc["INC1", "attr:sla_records"] == 2 and cases.loc["INC2", "attr:sla_records"] == 1
    assert cases.loc["INC1", "attr:change_type"] == "Normal"
    assert pd.isna(cases.loc["INC2", "attr:change_type"])
    assert cases.loc["INC1", "attr:resolved_time"] == pd.Timestamp("2024-03-02 10:00", tz="UTC")
    report, _ = coverage_report(session=session, log_name="snow", sla_hours={"2 - High": 24})
    assert report.outcomes["reassigned"]["value_cases"] == {"2": 1, "0": 1}
    assert report.outcomes["sla"]["value_cases"] == {"breached": 1}  # 26 h against 24 h
    broken = tmp_path / "broken.yaml"
    broken.write_text(spec.read_text().replace("table: audit", "table: trail"), encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"tables \['trail'\] have no file under `files`"):
        import_log(folder, session=session, linked_spec=broken)
    with pytest.raises(InvalidInput, match="drop --preset"):
        import_log(folder, session=session, linked_spec=spec, preset="bpi2014")


def test_configured_sla_targets_give_the_sla_outcome(configured, tables, monkeypatch):
    from itsmreview.coverage.overview import log_overview
    from itsmreview.coverage.report import coverage_report
    from itsmreview.db import session_scope
    from itsmreview.settings import get_settings

    folder, _ = tables
    with session_scope() as session:
        import_log(folder, session=session, preset="bpi2014", name="b14")
        report, _ = coverage_report(session=session, log_name="b14")
        assert "sla" not in report.outcomes
    monkeypatch.setenv("ITSMREVIEW_SLA_HOURS", "1=8,2=16,3=48,4=96,5=240")
    get_settings.cache_clear()
    with session_scope() as session:
        from itsmreview.accounts.service import create_user

        lead, _ = create_user(session=session, username="lena", role="lead", password="lead-pass-1")
        report, _ = coverage_report(session=session, log_name="b14")
        assert set(report.outcomes["sla"]["value_cases"]) <= {"met", "breached"}
        shown = log_overview(session=session, actor=lead, name="b14")  # what the page reads
        assert shown.report.outcomes["sla"] == report.outcomes["sla"]
    monkeypatch.setenv("ITSMREVIEW_SLA_HOURS", "1=soon")
    get_settings.cache_clear()
    with session_scope() as session, pytest.raises(InvalidInput, match="ITSMREVIEW_SLA_HOURS"):
        coverage_report(session=session, log_name="b14")
    get_settings.cache_clear()


REAL_FORMAT = Path(__file__).resolve().parents[1] / "fixtures" / "bpi2014"


def test_the_published_formats_of_every_table_import_as_pandas_reads_them(session, tmp_path):
    """tests/fixtures/bpi2014: a few rows of each public table as published (written by the
    project: the real headers, `;`, Latin-1, `#N/B`/`#MULTIVALUE`, decimal commas), each
    table writing its times its own way: activities `07-01-2013 08:17:17`, incidents
    `05/02/2012 13:32:57` (and a few without seconds or zeros), interactions `9-9-2011 9:23`."""
    log = import_log(REAL_FORMAT, session=session, preset="bpi2014").log
    session.commit()
    raw = {
        k: pd.read_csv(REAL_FORMAT / n, sep=";", encoding="latin-1", dtype=str)
        for k, n in FILES.items()
    }
    # independent: pandas reads each day-first form, with and without seconds
    activities = raw["activities"]
    stamps = pd.to_datetime(activities["DateStamp"], format="mixed", dayfirst=True, utc=True)
    assert (log.n_events, log.n_cases) == (len(activities), activities["Incident ID"].nunique())
    assert log.first_timestamp.replace(tzinfo=None) == stamps.min().to_pydatetime().replace(
        tzinfo=None
    )
    events = pq.read_table(get_storage().path(log.events_path, "events.parquet")).to_pandas()
    expected = (
        activities.assign(timestamp=stamps)
        .reset_index()
        .sort_values(["Incident ID", "timestamp", "index"], kind="stable")
    )
    assert events["case_id"].astype(str).tolist() == expected["Incident ID"].tolist()
    assert events["activity"].astype(str).tolist() == expected["IncidentActivity_Type"].tolist()
    assert (events["timestamp"].to_numpy() == expected["timestamp"].to_numpy()).all()
    cases = _cases(log).set_index("case_id")
    incidents = raw["incidents"].set_index("Incident ID").loc[cases.index]
    for attribute, column in (
        ("open_time", "Open Time"),
        ("resolved_time", "Resolved Time"),
        ("close_time", "Close Time"),
    ):
        want = pd.to_datetime(incidents[column], format="mixed", dayfirst=True, utc=True)
        assert (cases[f"attr:{attribute}"] == want).all(), column
    hours = incidents["Handle Time (Hours)"].str.replace(".", "").str.replace(",", ".")
    assert cases["attr:handle_time_hours"].tolist() == pytest.approx(hours.astype(float).tolist())
    assert cases.loc["IM0000005", "attr:ci_name"] == "Gebäude-Drucker"
    assert cases.loc["IM0000006", "attr:handle_time_hours"] == 1234.5
    interactions = raw["interactions"]
    per_case = interactions.groupby("Related Incident").size().reindex(cases.index, fill_value=0)
    assert (cases["attr:interactions"] == per_case).all()
    changes = raw["changes"].set_index("Change ID")
    related = incidents["Related Change"].map(changes["Change Type"])
    assert cases["attr:change_type"].fillna("-").tolist() == related.fillna("-").tolist()
    assert log.mapping["linked"]["incidents"]["rows"] == len(raw["incidents"])
