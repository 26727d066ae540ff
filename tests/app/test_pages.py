"""AppTest of the app on a seeded (demo) database: login, role-aware navigation, pages."""

import re
from pathlib import Path

import itsmreview
import numpy as np
import pandas as pd
import pytest
from itsmreview.ui.preload import KEY_PREFIX as PRELOAD
from itsmreview.ui.text import literal
from streamlit.testing.v1 import AppTest

APP = Path(itsmreview.__file__).parent / "streamlit_app.py"
TIMEOUT = 60


def log_in(username: str, password: str = "itsm-demo") -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    at.text_input(key="login_username").input(username)
    at.text_input(key="login_password").input(password)
    at.button(key="FormSubmitter:login-Log in").click().run()
    assert not at.exception, at.exception
    return at


def open_page(at: AppTest, name: str) -> AppTest:
    at.switch_page(f"views/{name}.py").run()
    assert not at.exception, at.exception
    return at


def toasts(at: AppTest) -> list[str]:
    return [t.value for t in at.toast]


def titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


def follow(at: AppTest, label_start: str) -> AppTest:
    """Open the page a link (its label starting `label_start`) leads to, with its address."""
    from urllib.parse import parse_qs

    [link] = [p for p in at.page_link if p.value.startswith(label_start)]
    at.query_params = parse_qs(link.proto.query_string)
    return open_page(at, link.proto.page)


def task_filters_shown(at: AppTest) -> dict:
    """The Tasks page's persona and source-variant filters, and its count of tasks."""
    return {
        "personas": at.multiselect(key="tasks-personas").value,
        "variant": at.selectbox(key="tasks-variant_key").value,
        "tasks": int(at.caption[0].value.split()[0]),
    }


def _top_score(radio) -> str:
    """An item's highest point (an optional item's last choice is Not applicable)."""
    return next(o for o in reversed(radio.options) if o != "Not applicable")


def test_login_page_renders(demo_configured):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    assert titles(at) == ["itsmreview"]
    assert at.text_input(key="login_username") is not None


def test_wrong_password_is_refused(demo_configured):
    at = log_in("expert1", "not-the-password")
    assert [e.value for e in at.error] == ["unknown username or wrong password"]
    assert "itsmreview_user" not in at.session_state


def test_expert_logs_in_and_lands_on_the_queue(demo_configured):
    at = log_in("expert1")
    assert titles(at) == ["My queue"]
    assert at.selectbox[0].options, "the demo expert has assigned tasks"
    assert at.get("progress")
    assert any(e.label.startswith("Source log variant (") for e in at.expander)
    assert len(at.radio) >= 8, "rubric dimensions are shown as radio scales"


def test_expert_submits_a_rating_from_the_page(demo_configured):
    at = open_page(log_in("expert1"), "queue")
    before = at.get("progress")[0].value
    for radio in at.radio:
        radio.set_value(_top_score(radio))
    at.button(key=next(b.key for b in at.button if b.label == "Submit rating")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    [notice] = toasts(at)  # announced, then shown as a toast by the app's rerun
    assert notice.startswith("Rating submitted. Next: ")
    at.run()
    assert at.get("progress")[0].value > before
    task = next(box for box in at.selectbox if box.label == "Task")
    assert task.options[task.index].startswith("To rate")  # the next task, without a click
    title = task.options[task.index].split(" · ", 1)[1].rsplit(" (", 1)[0]
    assert notice.endswith(literal(title) + ".")  # the task that opens, shown as written


def test_a_queued_submit_is_shown_waiting_on_the_dashboard_until_applied(
    demo_configured, monkeypatch
):
    from itsmreview.review.gate.work import apply_pending
    from itsmreview.settings import get_settings

    monkeypatch.setenv("ITSMREVIEW_GATE_APPLY", "queue")  # a server whose worker runs apart
    get_settings.cache_clear()
    at = open_page(log_in("expert1"), "queue")
    for radio in at.radio:
        radio.set_value(_top_score(radio))
    at.button(key=next(b.key for b in at.button if b.label == "Submit rating")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    lead = log_in("lead")
    [waiting] = [c.value for c in lead.caption if "on their way to the gate" in c.value]
    assert waiting.startswith("1 rating(s) submitted since ")
    assert apply_pending() == 1
    lead.run()
    assert not lead.exception
    assert not [c.value for c in lead.caption if "on their way to the gate" in c.value]
    get_settings.cache_clear()


def test_lead_lands_on_the_dashboard_and_opens_lead_pages(demo_configured):
    at = log_in("lead")
    assert titles(at) == ["Dashboard"]
    assert at.get("plotly_chart")
    for page, title in (
        ("coverage", "Coverage"),
        ("ledger", "Provenance ledger"),
        ("exports", "Exports"),
        ("home", "itsmreview"),
    ):
        assert titles(open_page(at, page)) == [title]


def test_admin_lands_on_users_and_opens_imports(demo_configured):
    at = log_in("admin")
    assert titles(at) == ["Users"]
    assert titles(open_page(at, "imports")) == ["Imports"]


@pytest.mark.parametrize(
    "page, role",
    [
        ("dashboard", "lead"),
        ("rounds", "lead"),
        ("coverage", "lead"),
        ("teams", "lead"),
        ("ledger", "lead"),
        ("exports", "lead"),
        ("model_review", "lead"),
        ("imports", "lead"),
        ("users", "admin"),
    ],
)
def test_an_expert_switching_to_lead_or_admin_pages_is_told_the_role(demo_configured, page, role):
    at = log_in("expert1")
    # not in the expert's menu, but its address answers: with the role it needs, and nothing
    # of the page itself
    at.switch_page(f"views/{page}.py").run()
    assert [e.value for e in at.error] == [f"This page needs the {role} role."]
    assert not at.title and not at.dataframe


@pytest.mark.parametrize(
    "page, role",
    [
        ("dashboard", "lead"),
        ("coverage", "lead"),
        ("ledger", "lead"),
        ("model_review", "lead"),
        ("users", "admin"),
        ("imports", "lead"),
    ],
)
def test_pages_refuse_the_wrong_role_even_when_opened_directly(demo_configured, page, role):
    at = AppTest.from_file(str(APP.parent / "views" / f"{page}.py"), default_timeout=TIMEOUT)
    at.session_state["itsmreview_user"] = {
        "id": 3,
        "username": "expert1",
        "display_name": "Eva Ek",
        "role": "expert",
        "expertise": [],
        "active": True,
        "password_hash": "",
        "epoch": 0,
    }
    at.run()
    assert [e.value for e in at.error] == [f"This page needs the {role} role."]
    assert not at.title and not at.dataframe


def test_coverage_page_shows_metrics_gaps_and_df_map(demo_configured):
    at = open_page(log_in("lead"), "coverage")
    labels = [m.label for m in at.metric]
    assert labels[:5] == [
        "Tasks",
        "Variant coverage",
        "Collapsed variants",
        "Directly-follows",
        "Activities",
    ]
    assert at.metric[0].value == "24"
    # only the open tab is drawn: Variants first, the others once chosen
    assert at.get("plotly_chart") and not at.get("graphviz_chart")
    assert not any(h.value == "Most frequent uncovered variants" for h in at.subheader)
    at.session_state["coverage-tab"] = "Gaps"  # what choosing the tab does
    at.run()
    assert any(h.value == "Most frequent uncovered variants" for h in at.subheader)
    assert not at.get("graphviz_chart")
    at.session_state["coverage-tab"] = "Directly-follows map"
    at.run()
    assert at.get("graphviz_chart")
    at.segmented_control[0].set_value("rated").run()
    assert not at.exception
    assert int(at.metric[0].value) < 24


def test_coverage_page_shows_the_outcomes_of_a_log_of_linked_tables(demo_configured, tmp_path):
    from itsmreview.coverage.service import import_log
    from itsmreview.coverage.synthetic_bpi2014 import generate_bpi2014, write_bpi2014
    from itsmreview.db import session_scope

    write_bpi2014(generate_bpi2014(incidents=200, seed=2), tmp_path / "b14")
    with session_scope() as session:
        import_log(tmp_path / "b14", session=session, preset="bpi2014", name="rabobank")
    at = open_page(log_in("lead"), "coverage")
    assert [t.label for t in at.tabs][-1] != "Outcomes"  # the demo log has no case attributes
    at.selectbox[0].set_value("rabobank").run()
    assert not at.exception
    assert [t.label for t in at.tabs][-1] == "Outcomes"
    at.session_state["coverage-tab"] = "Outcomes"
    at.run()
    outcome = next(b for b in at.selectbox if b.label == "Outcome")
    assert "closure_code" in outcome.options and "reassigned" in outcome.options
    outcome.set_value("closure_code").run()
    assert not at.exception
    assert any(c.value.startswith("Uncovered values") for c in at.caption)


def test_the_team_mapping_page_lists_groups_and_saves_a_version(demo_configured):
    at = open_page(log_in("lead"), "teams")
    assert titles(at) == ["Team mapping"]
    assert next(m.value for m in at.metric if m.label == "Mapped") == "0"
    assert "None yet." in [c.value for c in at.caption]
    [editor] = at.dataframe  # the groups with their events, teams to type in
    assert editor.value["group"].tolist()[:1] and "team" in editor.value.columns
    at.button(key="FormSubmitter:team-mapping-Save as a new version").click().run()
    assert [e.value for e in at.error] == ["give at least one group its team"]
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.coverage.teams import group_table, set_team_mapping
    from itsmreview.db import session_scope

    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        groups = group_table(session=session, log_name="demo-vinst")["group"].tolist()
        set_team_mapping(
            session=session, actor=lead, log_name="demo-vinst", teams={groups[0]: "Desk"}
        )
    at.run()
    assert next(m.value for m in at.metric if m.label == "Mapped") == "1"
    assert at.get("plotly_chart")
    coverage = open_page(at, "coverage")
    roles = coverage.tabs[2]
    assert not coverage.exception and roles.label == "Roles"


def test_coverage_per_persona_and_across_logs_on_the_page(demo_configured):
    at = open_page(log_in("lead"), "coverage")
    everyone = int(at.metric[0].value)
    persona = next(b for b in at.selectbox if b.label == "Persona")
    persona.set_value("L2 resolver").run()
    assert not at.exception
    assert 0 < int(at.metric[0].value) < everyone
    assert any(e.label.startswith("Across logs") for e in at.expander)
    assert not any(c.value.startswith("Variant coverage of each persona") for c in at.caption)
    at.session_state["open-across"] = True  # what opening the section does
    at.run()
    assert not at.exception
    assert any(c.value.startswith("Variant coverage of each persona") for c in at.caption)


def test_coverage_of_a_large_catalog_renders_while_it_is_computed(demo_configured, monkeypatch):
    """Above the inline limit the page says coverage is on its way, then shows the same
    figures a direct computation gives; a new rating marks them as older than the data."""
    from itsmreview.coverage import overview
    from itsmreview.summaries.service import wait_for_background

    monkeypatch.setattr(overview, "INLINE_TASKS", 0)
    at = open_page(log_in("lead"), "coverage")
    assert not at.exception
    assert any("being computed in the background" in i.value for i in at.info)
    wait_for_background()
    at.run()
    assert not at.exception and not at.info
    assert at.metric[0].value == "24"
    at.segmented_control[0].set_value("rated").run()
    wait_for_background()
    at.run()
    rated = int(at.metric[0].value)
    assert rated < 24


def test_variant_explorer_shows_real_cases(demo_configured):
    at = open_page(log_in("lead"), "variants")
    assert titles(at) == ["Variant explorer"]
    assert [m.label for m in at.metric][:3] == ["Rank", "Cases", "Median duration"]
    assert at.metric[0].value == "#1"
    at.selectbox[1].set_value(2).run()
    assert not at.exception
    assert at.metric[0].value == "#2"


def test_the_variant_explorer_opens_the_tasks_that_cover_a_variant(demo_configured):
    from itsmreview.catalog.task_list import task_table
    from itsmreview.db import session_scope
    from itsmreview.sequences import sequence_key

    at = open_page(log_in("lead"), "tasks")  # a filter chosen before the link is followed
    at.multiselect(key="tasks-tracks").set_value(["single-agent"]).run()
    at = open_page(at, "variants")
    rank = next(b for b in at.selectbox if b.label == "Variant")
    sequence = rank.options[0].split(" cases · ", 1)[1].split(" → ")
    key = sequence_key(sequence)
    [link] = at.page_link
    assert link.value == literal("Open the 1 task(s) that cover this variant")
    at = follow(at, literal("Open the"))
    assert titles(at) == ["Tasks"]
    assert task_filters_shown(at) == {"personas": [], "variant": key, "tasks": 1}
    assert at.multiselect(key="tasks-tracks").value == []  # the link's filters, no other
    assert at.query_params == {}  # read once: a filter chosen now is not undone
    with session_scope() as session:
        from itsmreview.accounts.queries import user_by_username

        lead = user_by_username(session=session, username="lead")
        covering = task_table(session=session, actor=lead, variant_key=key).rows
    assert at.header[0].value == literal(covering.iloc[0]["title"])  # that task, in full
    at = open_page(at, "variants")
    next(b for b in at.selectbox if b.label == "Variant").set_value(605).run()
    assert not at.page_link  # a variant no task declares: a gap, said so
    assert any(c.value.startswith("No task declares this variant") for c in at.caption)
    expert = open_page(log_in("expert1"), "variants")
    assert not expert.page_link and not expert.exception  # the Tasks page is a lead's


def test_a_persona_opens_its_tasks_from_completeness_and_coverage(demo_configured):
    at = open_page(log_in("lead"), "completeness")
    labels = [link.value for link in at.page_link]
    assert literal("Open the tasks of L2 resolver") in labels and len(labels) == 4
    at = follow(at, literal("Open the tasks of L2 resolver"))
    assert titles(at) == ["Tasks"]
    shown = task_filters_shown(at)
    assert shown["personas"] == ["L2 resolver"] and shown["variant"] is None
    assert 0 < shown["tasks"] < _tasks()
    assert set(at.dataframe[0].value["Persona"]) == {"L2 resolver"}
    at = open_page(at, "coverage")
    assert not at.page_link  # every persona: no link
    next(b for b in at.selectbox if b.label == "Persona").set_value("Incident manager").run()
    at = follow(at, literal("Open the tasks of Incident manager"))
    managed = _tasks(persona="Incident manager")
    assert task_filters_shown(at) == {
        "personas": ["Incident manager"],
        "variant": None,
        "tasks": managed,
    }


def test_the_home_tiles_open_their_pages(demo_configured):
    at = open_page(log_in("lead"), "home")
    assert [m.label for m in at.metric] == ["Event logs", "Tasks", "Review rounds", "Ratings"]
    links = [(link.value, link.proto.page) for link in at.page_link]
    assert links == [
        ("Coverage", "coverage"),
        ("Tasks", "tasks"),
        ("Rounds", "rounds"),
        ("Dashboard", "dashboard"),
    ]
    assert titles(follow(at, "Rounds")) == ["Review rounds"]
    expert = open_page(log_in("expert1"), "home")
    links = [(link.value, link.proto.page) for link in expert.page_link]
    assert links == [("Variant explorer", "variants")] + [("My queue", "queue")] * 3


def test_dashboard_of_a_large_round_renders_while_agreement_is_computed(
    demo_configured, monkeypatch
):
    """Above the inline limit the first view shows that agreement is on its way; the next
    view, once the background computation is in, shows the chart."""
    from itsmreview.review.dashboard import service as dashboard_module
    from itsmreview.summaries.service import wait_for_background
    from itsmreview.ui import cache

    monkeypatch.setattr(dashboard_module, "INLINE_TASKS", 0)
    monkeypatch.setattr(cache, "INLINE_LEDGER_ENTRIES", 0)
    at = log_in("lead")
    assert not at.exception
    assert any("being computed in the background" in i.value for i in at.info)
    # progress per expert is counted in the background too; the figures of closed expanders
    # wait for them to open
    assert len(at.get("plotly_chart")) == 0
    at.session_state["open-over-time"] = at.session_state["open-realism"] = True
    for _ in range(3):  # agreement, then the figures the agreement's items lead to
        wait_for_background()
        at.run()
        assert not at.exception
        if not at.info:
            break
    assert not at.info, [i.value for i in at.info]
    assert len(at.get("plotly_chart")) >= 5  # alpha, over time, realism x2, progress


SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
RAW_VALUES = re.compile(r"^(None|nan|NaN|NaT|<NA>|True|False)$|\d:\d\d:\d\d\.\d")


def shown_tables(at: AppTest) -> list[pd.DataFrame]:
    """Every table of the page as its reader sees it: a styled data grid's display text, a
    Markdown table's cells."""
    from streamlit import dataframe_util

    tables = []
    for grid in at.dataframe:
        styled = grid.proto.arrow_data.styler.display_values
        tables.append(
            dataframe_util.convert_arrow_bytes_to_pandas_df(styled) if styled else grid.value
        )
    for block in at.markdown:
        lines = [line for line in block.value.splitlines() if line.startswith("| ")]
        if len(lines) > 2:
            rows = [
                [c.strip().replace("\\", "") for c in line.strip("| ").split(" | ")]
                for line in lines
            ]
            tables.append(pd.DataFrame(rows[2:], columns=rows[0]))
    return tables


def assert_words_not_codes(at: AppTest) -> int:
    """No `None`, `nan`, microsecond time or snake_case code in a heading or cell."""
    tables = shown_tables(at)
    for table in tables:
        for heading in table.columns:
            assert not SNAKE_CASE.match(str(heading)), heading
        for value in table.astype(str).to_numpy().ravel():
            assert not RAW_VALUES.search(value), (value, list(table.columns))
            assert not SNAKE_CASE.match(value), (value, list(table.columns))
    return len(tables)


def test_pages_show_words_not_codes(demo_configured):
    at = log_in("lead")
    for key in ("open-agreement", "open-realism", "open-authoring-groups", "open-assignments"):
        at.session_state[key] = True
    at.run()
    assert not at.exception
    assert assert_words_not_codes(at) >= 8  # agreement, realism, three groups, gate, queue
    reasons = " ".join(m.value for m in at.markdown if "Why a lead decides" in m.value)
    assert "wrong ground truth" in reasons
    times = [v for t in shown_tables(at) if "Reserved until" in t for v in t["Reserved until"]]
    assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", v) for v in times)
    for page in ("tasks", "rounds", "completeness", "ledger", "realism"):
        assert assert_words_not_codes(open_page(at, page)) >= 1, page
    assert_words_not_codes(open_page(at, "exports"))  # none yet in the demo
    admin = log_in("admin")
    for page in ("users", "imports"):
        assert assert_words_not_codes(open_page(admin, page)) >= 1, page


def _first_waiting_task_version() -> int:
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.dashboard.service import dashboard

    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        board = dashboard(session=session, actor=lead, bootstrap=0)
        return int(board.disagreements["task_version_id"].iloc[0])


def _tasks(**where: str) -> int:
    """How many tasks of the demo copy have these column values (the demo's shape changes)."""
    from itsmreview.catalog.models import Task
    from itsmreview.db import session_scope
    from sqlmodel import func, select

    statement = select(func.count()).select_from(Task)
    for column, value in where.items():
        statement = statement.where(getattr(Task, column) == value)
    with session_scope() as session:
        return session.exec(statement).one()


def _waiting_task_versions() -> list[int]:
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.dashboard.service import dashboard

    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        board = dashboard(session=session, actor=lead, bootstrap=0)
        return [int(v) for v in board.disagreements["task_version_id"]]


def test_dashboard_shows_agreement_and_a_lead_adjudicates(demo_configured):
    at = log_in("lead")
    assert any(h.value.startswith("Agreement in") for h in at.subheader)
    assert len(at.get("plotly_chart")) >= 3  # alpha, bias heatmap, progress
    waiting = int(next(m.value for m in at.metric if m.label == "Adjudication"))
    assert waiting >= 1
    at.text_area(key="adjudicate-none-reason").input("Checked the vendor contract.")
    decision = next(r for r in at.radio if r.label == "Decision")
    task = next(b for b in at.selectbox if b.label == "Task")
    assert decision.value is None and task.value is None  # nothing is decided for the lead
    at.button(key="FormSubmitter:adjudicate-none-Record decision").click().run()
    assert [e.value for e in at.error] == [
        "Choose the task and your decision; nothing was recorded."
    ]
    chosen = _first_waiting_task_version()
    at.selectbox(key="adjudicate-task").set_value(chosen).run()
    # the chosen task's form starts blank: nothing typed before is carried over
    assert at.text_area(key=f"adjudicate-{chosen}-reason").value == ""
    at.radio(key=f"adjudicate-{chosen}-decision").set_value("accept")
    at.text_area(key=f"adjudicate-{chosen}-reason").input("Checked the vendor contract.")
    at.button(key=f"FormSubmitter:adjudicate-{chosen}-Record decision").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [n.startswith("Recorded: task is now") for n in toasts(at)] == [True]
    left = [int(m.value) for m in at.metric if m.label == "Adjudication"]
    assert left == ([waiting - 1] if waiting > 1 else [])


def _adjudications() -> list[tuple[int, str, str]]:
    """(task version, decision, reason) of every adjudication ledger entry, oldest first."""
    from itsmreview.db import session_scope
    from itsmreview.ledger.models import LedgerEntry
    from itsmreview.review.models import Adjudication
    from sqlmodel import select

    with session_scope() as session:
        entries = session.exec(
            select(LedgerEntry)
            .where(LedgerEntry.artifact_type == "adjudication")
            .order_by(LedgerEntry.seq)
        ).all()
        return [
            (
                e.payload["task_version_id"],
                e.payload["decision"],
                session.get(Adjudication, int(e.artifact_id)).reason,
            )
            for e in entries
        ]


def test_the_adjudication_queue_is_searched_and_paged_on_the_dashboard(demo_configured):
    """The lead finds a waiting task by its id; the task picker offers only the tasks of the
    page shown; a search that finds nothing says so, and the page number stays in range."""
    at = log_in("lead")
    waiting = _waiting_task_versions()
    assert len(waiting) >= 2
    assert any("task(s) wait for a lead" in c.value for c in at.caption)
    picker = next(b for b in at.selectbox if b.label == "Task")
    assert len(picker.options) == len(waiting)  # a demo round's queue fits one page
    from itsmreview.db import session_scope
    from itsmreview.review.repair.queries import adjudication_queue_page

    with session_scope() as session:
        wanted = adjudication_queue_page(session=session, round_id=1, offset=1, limit=1)
    external_id = wanted["external_id"].iloc[0]
    at.text_input(key="queue-search").input(external_id.upper()).run()
    assert not at.exception
    picker = next(b for b in at.selectbox if b.label == "Task")
    assert len(picker.options) == 1 and external_id in picker.options[0]
    from itsmreview.ui.text import literal

    assert any(literal(external_id) in m.value for m in at.markdown)  # the table, as text
    at.text_input(key="queue-search").input("no waiting task is called this").run()
    assert not at.exception
    assert any(c.value == "No waiting task matches the search." for c in at.caption)
    assert at.number_input(key="queue-page").value == 1


def test_the_task_to_adjudicate_shows_its_ratings_inline(demo_configured):
    """The lead reads what each expert said (verdict, flags in words, comment, scores) beside
    the decision, without going to the Tasks page."""
    from itsmreview.db import session_scope
    from itsmreview.review.models import Rating, RatingStatus
    from sqlmodel import select

    at = log_in("lead")
    first = _first_waiting_task_version()
    at.selectbox(key="adjudicate-task").set_value(first).run()
    assert not at.exception
    with session_scope() as session:
        rated = session.exec(
            select(Rating).where(
                Rating.task_version_id == first,
                Rating.round_id == 1,
                Rating.is_current,
                Rating.status == RatingStatus.submitted,
                Rating.rater_kind == "human",
            )
        ).all()
        comments = [r.comment for r in rated if r.comment]
    assert any(c.value == f"The task's {len(rated)} current rating(s):" for c in at.caption)
    table = next(m.value for m in at.markdown if m.value.startswith("| Expert | Verdict"))
    assert len(table.splitlines()) == 2 + len(rated)  # header, rule, a row per rating
    assert all(" ".join(c.split())[:20] in table.replace("\\", "") for c in comments)
    assert "_" not in table.split("\n")[0]  # headers in words


def test_the_next_adjudication_never_inherits_the_last_reason(demo_configured):
    at = log_in("lead")
    assert len(_waiting_task_versions()) >= 2  # the demo leaves two for a lead to decide
    earlier = _adjudications()  # the demo's consensus round decided some on closing
    first = _first_waiting_task_version()
    at.selectbox(key="adjudicate-task").set_value(first).run()
    at.radio(key=f"adjudicate-{first}-decision").set_value("revise")
    at.text_area(key=f"adjudicate-{first}-reason").input("The verifier misses the SLA clock.")
    at.button(key=f"FormSubmitter:adjudicate-{first}-Record decision").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    # recorded: the form is blank again, no task chosen, no decision, no reason
    assert at.selectbox(key="adjudicate-task").value is None
    assert at.radio(key="adjudicate-none-decision").value is None
    assert at.text_area(key="adjudicate-none-reason").value == ""
    second = next(v for v in _waiting_task_versions() if v != first)
    at.selectbox(key="adjudicate-task").set_value(second).run()
    assert at.radio(key=f"adjudicate-{second}-decision").value is None
    assert at.text_area(key=f"adjudicate-{second}-reason").value == ""
    # pressing Record now records nothing under the second task (no decision, no reason)
    at.button(key=f"FormSubmitter:adjudicate-{second}-Record decision").click().run()
    assert [e.value for e in at.error] == [
        "Choose the task and your decision; nothing was recorded."
    ]
    assert _adjudications() == [*earlier, (first, "revise", "The verifier misses the SLA clock.")]


def test_task_browser_filters_and_shows_a_task(demo_configured):
    at = open_page(log_in("lead"), "tasks")
    assert titles(at) == ["Tasks"]
    total = _tasks()
    assert at.caption[0].value.startswith(f"{total} of {total} tasks")
    at.multiselect[0].set_value(["Incident manager"]).run()
    managed = _tasks(persona="Incident manager")
    assert at.caption[0].value.startswith(f"{managed} of {total} tasks")
    at.multiselect[0].set_value([]).run()
    at.selectbox[0].select_index(1).run()
    shown = int(at.caption[0].value.split()[0])
    assert 1 <= shown < total, "the source-variant filter keeps the tasks declaring it"
    assert at.header[0].value  # the first matching task is shown in full
    provenance = [e for e in at.expander if e.label.startswith("Provenance (")]
    assert provenance and not provenance[0].label.startswith("Provenance (0 ")


def test_admin_previews_and_imports_a_tau2_file(demo_configured, real_file):
    path = real_file("tasks", "tau2_telecom_tasks_small.json")
    at = open_page(log_in("admin"), "imports")
    at.text_input[-3].input(str(path)).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("would create **20**" in m.value for m in at.markdown)
    at.button(key=next(b.key for b in at.button if b.label == "Confirm import")).click().run()
    assert any("Imported 20 new task(s)" in s.value for s in at.success)


def test_with_workers_an_admins_task_import_runs_in_a_worker(
    demo_configured, real_file, monkeypatch
):
    """ITSMREVIEW_JOBS=worker: confirming a previewed task file queues its import; the page says
    it waits for a worker, imports nothing itself, and announces the count once a worker ran it."""
    from itsmreview.jobs.service import run_next
    from itsmreview.settings import get_settings
    from itsmreview.ui.text import literal

    monkeypatch.setenv("ITSMREVIEW_JOBS", "worker")
    get_settings.cache_clear()
    path = real_file("tasks", "tau2_telecom_tasks_small.json")
    at = open_page(log_in("admin"), "imports")
    at.text_input[-3].input(str(path)).run()
    assert any("would create **20**" in m.value for m in at.markdown)
    at.button(key=next(b.key for b in at.button if b.label == "Confirm import")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("waiting for a worker" in p.text for p in at.get("progress"))
    assert any("would create **20**" in m.value for m in at.markdown)  # not imported by the page
    assert run_next(kinds=["task_import"]) is not None  # a worker takes it
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert literal("Imported 20 new task(s), 0 new version(s).") in toasts(at)
    assert any("would create **0**" in m.value for m in at.markdown)


def test_long_transcripts_are_paged_and_tool_results_sit_in_their_call():
    def app():
        from itsmreview.ui.transcript import render_transcript

        messages = []
        for i in range(150):
            messages.append(
                {
                    "role": "agent",
                    "actor": "Agent",
                    "content": f"step {i}",
                    "tool_calls": [{"id": f"c{i}", "name": "lookup", "arguments": {"n": i}}],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"r{i}"})
        messages.append({"role": "user", "content": "<b>not html</b> :smile: $$x$$"})
        render_transcript(messages, page_size=60)

    at = AppTest.from_function(app, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    assert at.number_input[0].label.startswith("Turns page (1-6, 301 turns)")
    assert len(at.chat_message) == 30  # 30 agent turns; their 30 results sit in the calls
    at.number_input[0].set_value(6).run()
    last = at.chat_message[-1]
    assert [t.value for t in last.text] == ["<b>not html</b> :smile: $$x$$"]  # as written


def test_answers_are_kept_as_a_draft_and_survive_a_new_session(demo_configured):
    at = log_in("expert1")
    task_label = at.selectbox[0].value
    at.radio[0].set_value(2)
    at.button(key=next(b.key for b in at.button if b.label == "Keep draft")).click().run()
    assert not at.exception
    assert any("Draft kept" in c.value for c in at.caption)
    again = log_in("expert1")  # a new browser session
    assert again.selectbox[0].value == task_label
    assert again.radio[0].value == 2


def test_an_expert_takes_the_next_task(demo_configured):
    at = log_in("expert4")
    before = len(at.selectbox[0].options)
    at.button(key=next(b.key for b in at.button if b.label == "Take the next task")).click().run()
    assert not at.exception and not at.error
    assert len(at.selectbox[0].options) in (before, before + 1)


def test_lead_sees_rating_history_in_the_task_browser(demo_configured):
    at = open_page(log_in("lead"), "tasks")
    labels = [e.label for e in at.expander]
    assert any(label.startswith("Ratings and their history (") for label in labels)


def test_completeness_for_experts_and_leads(demo_configured):
    at = open_page(log_in("expert2"), "completeness")
    assert titles(at) == ["Persona completeness"]
    assert at.selectbox[0].value == "L2 resolver"  # their expertise first
    assert len(at.checkbox) >= 5
    at.checkbox[0].check()
    at.button(key=next(b.key for b in at.button if b.label == "Submit judgement")).click().run()
    assert any("judgement is recorded" in s.value for s in at.success)
    lead = open_page(log_in("lead"), "completeness")
    assert titles(lead) == ["Persona completeness"]
    assert len(lead.dataframe) >= 1 and not lead.exception


def test_single_sign_on_button_and_identity_mapping(demo_configured):
    from itsmreview.accounts.service import create_user
    from itsmreview.db import session_scope

    with session_scope() as session:
        create_user(
            session=session,
            username="sso-expert",
            role="expert",
            password="long-enough-1",
            email="eva@example.org",
        )
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.secrets["auth"] = {
        "redirect_uri": "http://localhost:8501/oauth2callback",
        "cookie_secret": "x" * 32,
        "client_id": "c",
        "client_secret": "s",
        "server_metadata_url": "https://idp.invalid/.well-known/openid",
    }
    at.run()
    assert any(b.label == "Log in with single sign-on" for b in at.button)
    # the identity provider redirects back: a fresh page load with the identity cookie
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.secrets["auth"] = {
        "redirect_uri": "http://localhost:8501/oauth2callback",
        "cookie_secret": "x" * 32,
    }
    at.user = {"is_logged_in": True, "email": "eva@example.org"}
    at.run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [] and titles(at) == ["My queue"]
    stranger = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    stranger.secrets["auth"] = at.secrets["auth"]
    stranger.user = {"is_logged_in": True, "email": "nobody@example.org"}
    stranger.run()
    refused = literal("no itsmreview account for nobody@example.org")
    assert any(refused in e.value for e in stranger.error)


def test_admin_imports_a_csv_log_with_their_own_columns(demo_configured, tmp_path):
    from itsmreview.coverage.synthetic import generate_log

    frame = generate_log(40, seed=9)
    times = pd.to_datetime(frame["Change Date+Time"], utc=True)
    # the column mixes two forms, as BPI 2014's tables do: read with two formats
    stamps = times.dt.strftime("%d/%m/%Y %H:%M").where(
        frame.index % 2 == 0, times.dt.strftime("%d-%m-%Y %H:%M:%S")
    )
    mine = pd.DataFrame(
        {
            "Ticket": frame["SR Number"],
            "Step": frame["Activity"],
            "When": stamps,
            "Team": frame["Involved ST"].where(frame.index % 7 != 0, "?"),
        }
    )
    path = tmp_path / "tickets.csv"
    mine.to_csv(path, sep=";", index=False)

    def widget(kind, label):
        return next(w for w in getattr(at, kind) if w.label == label)

    at = open_page(log_in("admin"), "imports")
    at.text_input(key="log-path").input(str(path)).run()
    assert widget("selectbox", "Preset").value == "(my own columns)"  # a CSV: its columns
    assert widget("selectbox", "Separator").value == ";"  # guessed from the header
    assert not at.error, [e.value for e in at.error]
    widget("selectbox", "Separator").set_value(",").run()
    assert any("column(s) found" in e.value for e in at.error)  # a wrong choice is explained
    widget("selectbox", "Separator").set_value(";").run()
    assert not at.error, [e.value for e in at.error]
    # three different columns are proposed (the first free ones when names say nothing)
    assert [widget("selectbox", x).value for x in ("Case id", "Activity", "Timestamp")] == [
        "Ticket",
        "Step",
        "When",
    ]
    widget("text_input", "Timestamp format").input("%d/%m/%Y %H:%M | %d-%m-%Y %H:%M:%S")
    widget("multiselect", "Role attributes (optional)").set_value(["Team"])
    widget("text_input", "Missing-value tokens (optional, comma-separated)").input("?").run()
    at.button(key=next(b.key for b in at.button if b.label == "Import log")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    [notice] = toasts(at)
    assert notice.startswith(literal("tickets v1: 40 cases"))
    logs = at.dataframe[0].value
    assert "tickets" in set(logs["Name"])  # the table lists the new log at once
    from itsmreview.coverage.models import EventLog, LogRoleValue
    from itsmreview.db import session_scope
    from sqlmodel import select

    with session_scope() as session:
        log = session.exec(select(EventLog).where(EventLog.name == "tickets")).one()
        teams = session.exec(select(LogRoleValue).where(LogRoleValue.log_id == log.id)).all()
    assert log.mapping["timestamp_format"] == ["%d/%m/%Y %H:%M", "%d-%m-%Y %H:%M:%S"]
    assert log.mapping["sep"] == ";"
    assert teams and "?" not in {t.value for t in teams}  # the token counts as missing


def test_a_lead_picks_the_round_on_the_dashboard(demo_configured):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.catalog.models import TaskVersion
    from itsmreview.db import session_scope
    from itsmreview.review.gate.queries.reads import list_rounds
    from itsmreview.review.models import Rubric
    from itsmreview.review.rounds.queries import round_size
    from itsmreview.review.rounds.service import create_round
    from sqlmodel import select

    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        versions = session.exec(select(TaskVersion.id).limit(3)).all()
        rubric = session.exec(select(Rubric)).first()
        create_round(
            session=session, actor=lead, name="Round 2", rubric=rubric, task_version_ids=versions
        )
    at = log_in("lead")
    assert [h.value for h in at.subheader][0] == "Agreement in Round 2"  # the newest
    assert sum(int(m.value) for m in at.metric) == 3  # the status tiles count its tasks
    round_box = next(b for b in at.selectbox if b.label == "Round")
    round_box.set_value("Demo round 1").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [h.value for h in at.subheader][0] == "Agreement in Demo round 1"
    with session_scope() as session:
        demo = next(r for r in list_rounds(session=session) if r.name == "Demo round 1")
        in_demo = round_size(session=session, round_id=demo.id)
    assert sum(int(m.value) for m in at.metric) == in_demo != 3


def test_an_expert_in_two_rounds_rates_on_in_the_round_they_chose(demo_configured):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.catalog.models import TaskVersion
    from itsmreview.db import session_scope
    from itsmreview.review.models import Assignment, Rubric
    from itsmreview.review.rounds.service import create_round
    from sqlmodel import select

    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        versions = session.exec(select(TaskVersion.id).limit(3)).all()
        rubric = session.exec(select(Rubric)).first()
        second = create_round(
            session=session, actor=lead, name="Round 2", rubric=rubric, task_version_ids=versions
        ).id
    at = log_in("expert1")
    round_box = next(b for b in at.selectbox if b.label == "Round")
    # open rounds first; the demo's finished consensus round last, for the expert's record
    assert round_box.options == [
        "Round 2",
        "Demo round 1",
        "Pilot round (released)",
        "Demo consensus round",
    ]
    assert round_box.value == "Demo round 1"  # where the expert's open work is
    for radio in at.radio:
        radio.set_value(_top_score(radio))
    at.button(key=next(b.key for b in at.button if b.label == "Submit rating")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    [notice] = toasts(at)
    at.run()
    with session_scope() as session:
        expert = user_by_username(session=session, username="expert1")
        in_second = session.exec(
            select(Assignment).where(
                Assignment.expert_id == expert.id, Assignment.round_id == second
            )
        ).all()
    assert in_second == []  # the next task came from the round just rated
    task = next(box for box in at.selectbox if box.label == "Task")
    title = task.options[task.index].split(" · ", 1)[1].rsplit(" (", 1)[0]
    assert notice == f"Rating submitted. Next: {literal(title)}."  # the task that opens
    next(b for b in at.selectbox if b.label == "Round").set_value("Round 2").run()
    assert any("Nothing is assigned to you yet" in i.value for i in at.info)
    at.button(key=next(b.key for b in at.button if b.label == "Take the next task")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    task = next(box for box in at.selectbox if box.label == "Task")
    assert len(task.options) == 1 and task.options[0].startswith("To rate")


def test_a_lead_changes_the_approval_gate_on_the_dashboard(demo_configured):
    at = log_in("lead")
    approved = int(next(m.value for m in at.metric if m.label == "Approved"))
    next(n for n in at.number_input if n.label == "Human ratings a task needs").set_value(1)
    alpha = next(n for n in at.number_input if n.label.startswith("Round alpha"))
    alpha.set_value(-1.0)
    median = next(n for n in at.number_input if n.label.startswith("Median each"))
    median.set_value(1.0)
    at.button(key="FormSubmitter:gate-Apply to every task of the round").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    [notice] = toasts(at)
    assert notice.startswith("Gate applied:")
    at.run()
    assert int(next(m.value for m in at.metric if m.label == "Approved")) > approved


def _as_admin(service, **arguments):
    from itsmreview.accounts.models import Role, User
    from itsmreview.db import session_scope

    admin = User(id=None, username="ops", display_name="ops", role=Role.admin, password_hash="")
    with session_scope() as session:
        return service(session=session, actor=admin, **arguments)


@pytest.mark.parametrize("change", ["deactivate", "set-role"])
def test_an_open_session_ends_when_the_account_changes(demo_configured, change):
    from itsmreview.accounts.service import set_active, set_role

    at = log_in("expert1")
    assert at.selectbox  # the queue
    if change == "deactivate":
        _as_admin(set_active, username="expert1", active=False)
    else:
        _as_admin(set_role, username="expert1", role="lead")
    at.run()
    assert not at.exception
    assert "itsmreview_user" not in at.session_state
    expected = "no longer active" if change == "deactivate" else "session has ended"
    shown = [e.value for e in at.error] + [w.value for w in at.warning]
    assert any(expected in text for text in shown), shown
    # nothing of the queue is shown any more (the login form's hidden preload aside)
    assert not [s for s in at.selectbox if not (s.key or "").startswith(PRELOAD)]


def test_the_users_page_deactivates_a_user(demo_configured):
    at = open_page(log_in("admin"), "users")
    user_box = next(s for s in at.selectbox if s.label == "User")
    user_box.set_value("expert2").run()
    at.button(key="toggle-active").click().run()
    assert not at.exception and not at.error
    assert toasts(at) == [literal("expert2 deactivated; their sessions ended.")]
    again = log_in("expert2", "itsm-demo")
    assert [e.value for e in again.error] == ["unknown username or wrong password"]


def test_the_users_page_lists_a_new_user_at_once_and_edits_a_profile(demo_configured):
    """No model role on offer; a user just added is in the table and the lists without a
    reload, their password shown once; a profile change shows in the table and the ledger."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.ledger.models import LedgerEntry
    from sqlmodel import select

    at = open_page(log_in("admin"), "users")
    role_box = next(s for s in at.selectbox if s.label == "Role")
    assert role_box.options == ["expert", "lead", "admin"]
    form_inputs = [t for t in at.text_input if t.label in ("Username", "Display name")]
    form_inputs[0].input("maja")
    form_inputs[1].input("Maja Berg")
    at.button(key="FormSubmitter:add-user-Add user").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(s.value.startswith("Added maja. Password (shown once): `") for s in at.success)
    assert "maja" in set(at.dataframe[0].value["Username"])
    user_box = next(s for s in at.selectbox if s.label == "User")
    assert "maja" in user_box.options
    user_box.set_value("maja").run()
    at.text_input(key="profile-name-maja").input("Maja Berg-Lind")
    at.text_input(key="profile-expertise-maja").input("L2 resolver, , L2 resolver, Change manager")
    at.button(key="FormSubmitter:profile-maja-Save profile").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert toasts(at) == [literal("Profile of maja saved.")]
    row = at.dataframe[0].value.set_index("Username").loc["maja"]
    assert (row["Name"], row["Expertise"]) == ("Maja Berg-Lind", "L2 resolver, Change manager")
    with session_scope() as session:
        maja = user_by_username(session=session, username="maja")
        [entry] = session.exec(
            select(LedgerEntry).where(
                LedgerEntry.artifact_id == "maja", LedgerEntry.action == "set-profile"
            )
        ).all()
        assert entry.payload["display_name"] == {"from": "Maja Berg", "to": "Maja Berg-Lind"}
        assert maja.expertise == ["L2 resolver", "Change manager"]


def test_a_lead_exports_the_demos_approved_set_from_the_page(
    demo_configured, tmp_path, monkeypatch
):
    from itsmreview import settings as settings_module
    from itsmreview.exports.bundle import verify_folder
    from itsmreview.settings import get_settings

    monkeypatch.setenv("ITSMREVIEW_DATA_DIR", str(tmp_path))  # the demo's data folder is shared
    settings_module.get_settings.cache_clear()
    at = open_page(log_in("lead"), "exports")
    approved = _tasks(status="approved")
    assert approved >= 5  # the demo's rounds approve tasks of both logs
    assert [m.value for m in at.metric][:1] == [str(approved)]
    at.text_input[0].set_value("demo-set")
    at.button(key="FormSubmitter:export-Export").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(f"Exported {approved} task(s)" in s.value for s in at.success)
    folder = get_settings().data_dir / "exports" / "demo-set"
    assert verify_folder(folder).ok
    assert (folder.parent / "demo-set.zip").is_file()
    history = at.dataframe[-1].value
    assert list(history["Name"]) == ["demo-set", "rabobank-pilot"]  # newest first; the demo's


def test_with_workers_a_leads_export_runs_in_a_worker(demo_configured, tmp_path, monkeypatch):
    from itsmreview import settings as settings_module
    from itsmreview.exports.bundle import verify_folder
    from itsmreview.jobs.service import run_next
    from itsmreview.settings import get_settings

    monkeypatch.setenv("ITSMREVIEW_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ITSMREVIEW_JOBS", "worker")
    settings_module.get_settings.cache_clear()
    at = open_page(log_in("lead"), "exports")
    at.text_input[0].set_value("worker-set")
    at.button(key="FormSubmitter:export-Export").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("waiting for a worker" in p.text for p in at.get("progress"))
    folder = get_settings().data_dir / "exports" / "worker-set"
    assert not folder.exists()  # the page wrote nothing itself
    assert run_next(kinds=["export"]) is not None
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(f"Exported {_tasks(status='approved')} task(s)" in s.value for s in at.success)
    assert verify_folder(folder).ok
    from itsmreview.storage import get_storage

    assert get_storage().exists("exports/worker-set.zip")  # for a replica on another host
    assert at.get("download_button")  # offered from the storage


def test_the_exports_page_refuses_a_name_that_leaves_its_folder(demo_configured, monkeypatch):
    from datetime import timedelta

    from itsmreview import db

    at = open_page(log_in("lead"), "exports")
    at.text_input[0].set_value("../../escape")
    later = db.utcnow() + timedelta(seconds=2)  # the click comes in another second
    monkeypatch.setattr(db, "utcnow", lambda: later)
    at.button(key="FormSubmitter:export-Export").click().run()
    assert not at.exception
    assert any("leaves its folder" in e.value for e in at.error), (
        [e.value for e in at.error],
        [w.value for w in at.warning],
        [b.disabled for b in at.button],
    )


def test_the_ledger_page_of_a_large_ledger_renders_while_its_summary_is_computed(
    demo_configured, monkeypatch
):
    from itsmreview.summaries.service import wait_for_background
    from itsmreview.ui import cache

    monkeypatch.setattr(cache, "INLINE_LEDGER_ENTRIES", 0)
    at = open_page(log_in("lead"), "ledger")
    assert not at.exception
    assert any("provenance summary is being computed" in i.value for i in at.info)
    wait_for_background()
    at.run()
    assert not at.exception and not at.info
    assert any(h.value == "Task fields by source" for h in at.subheader)


def _record_form(at: AppTest) -> dict:
    """The ledger's "Record a source" form, opened: its widgets by label."""
    if "open-record-source" not in at.session_state or not at.session_state["open-record-source"]:
        at.session_state["open-record-source"] = True  # what opening the section does
        at.run()
    generation = at.session_state["record-form"]
    return {
        w.label: w
        for w in [*at.text_input, *at.selectbox, *at.number_input]
        if (w.key or "").startswith("record-") and w.key.endswith(f"-{generation}")
    }


def test_a_lead_records_a_world_source_and_verifies_the_ledger(demo_configured):
    at = open_page(log_in("lead"), "ledger")
    assert not at.exception
    head = at.code[0].value
    assert ":" in head and len(head.split(":")[1]) == 64
    _record_form(at)["Artifact kind"].set_value("world").run()
    form = _record_form(at)
    form["Name"].set_value("acme-org")
    form["Field"].set_value("org_structure")
    form["Reference"].set_value("ServiceNow CMDB data model")
    form["URL"].set_value("https://example.org/cmdb")
    at.button(key="FormSubmitter:record-source-Record").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(t.startswith("Recorded as ledger entry") for t in toasts(at))
    entries = at.dataframe[-1].value
    assert entries.iloc[0]["Artifact"] == "world" and entries.iloc[0]["Actor"] == "lead"
    next(t for t in at.text_input if t.label == "Expected head (optional)").set_value(head)
    at.button(key=next(b.key for b in at.button if b.label == "Verify")).click().run()
    assert any("Chain intact" in s.value for s in at.success), [e.value for e in at.error]


def test_a_refused_source_keeps_the_form_the_task_is_picked_and_the_head_moves(demo_configured):
    at = open_page(log_in("lead"), "ledger")
    head = at.code[0].value
    form = _record_form(at)
    assert form["Artifact kind"].value == "task"
    task = form["Task"]  # picked from the catalogue's tasks, not typed
    assert task.value is None and len(task.options) == _tasks()
    chosen = task.options[3]
    task.set_value(chosen.split(" · ")[0])
    form["Task version"].set_value(1)
    form["Field"].set_value("verifier")
    form["Came from"].set_value("external")
    form["Reference"].set_value("tau2-bench env_assertions")
    form["URL"].set_value("htp://example.org/tau2")  # a typo
    form["Note"].set_value("the checks of the end state")
    at.button(key="FormSubmitter:record-source-Record").click().run()
    assert [e.value for e in at.error] == [
        literal("URL 'htp://example.org/tau2' is not an http(s) address")
    ]
    form = _record_form(at)  # every field as typed, the typo to correct
    assert {label: w.value for label, w in form.items()} == {
        "Artifact kind": "task",
        "Task": chosen.split(" · ")[0],
        "Task version": 1,
        "Field": "verifier",
        "Came from": "external",
        "Reference": "tau2-bench env_assertions",
        "URL": "htp://example.org/tau2",
        "DOI": "",
        "Version": "",
        "Note": "the checks of the end state",
    }
    assert at.code[0].value == head
    form["URL"].set_value("https://example.org/tau2")
    at.button(key="FormSubmitter:record-source-Record").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    seq = int(head.split(":")[0]) + 1
    assert toasts(at) == [f"Recorded as ledger entry {seq}."]
    assert at.code[0].value.startswith(f"{seq}:")  # the head shown is the new one
    entries = at.dataframe[-1].value
    assert entries.iloc[0]["#"] == seq
    form = _record_form(at)  # a new form, empty
    assert form["Task"].value is None and form["Field"].value == ""


def test_the_ledger_entries_page_through_and_a_new_filter_starts_at_its_first_page(
    demo_configured,
):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.ledger.evidence.service import Reference, record_source
    from itsmreview.ledger.models import LedgerEntry
    from sqlmodel import func, select

    with session_scope() as session:  # enough world sources for three pages of 200
        lead = user_by_username(session=session, username="lead")
        for n in range(450):
            record_source(
                session=session,
                actor=lead,
                about=f"world:org-{n}",
                field_name="org_structure",
                kind="external",
                reference=Reference("ServiceNow CMDB data model"),
            )
    with session_scope() as session:
        total = session.exec(select(func.count()).select_from(LedgerEntry)).one()
        newest = session.exec(select(func.max(LedgerEntry.seq))).one()
        worlds = session.exec(
            select(func.count()).where(LedgerEntry.artifact_type == "world")
        ).one()
    at = open_page(log_in("lead"), "ledger")
    pages = next(n for n in at.number_input if n.label.startswith("Page (of"))
    assert f"{total:,} entries" in pages.label
    assert at.dataframe[-1].value.iloc[0]["#"] == newest
    pages.set_value(2).run()
    assert not at.exception
    assert at.dataframe[-1].value.iloc[0]["#"] == newest - 200
    next(s for s in at.selectbox if s.label == "Artifact").set_value("world").run()
    assert not at.exception
    pages = next(n for n in at.number_input if n.label.startswith("Page (of"))
    assert pages.value == 1 and f"{worlds:,} entries" in pages.label
    shown = at.dataframe[-1].value
    assert set(shown["Artifact"]) == {"world"} and shown.iloc[0]["#"] == newest


def test_a_reload_finds_the_login_again_and_a_logout_ends_it_everywhere(
    demo_configured, monkeypatch
):
    from itsmreview.ui import auth

    at = log_in("expert1")
    token = at.session_state[auth.TOKEN_KEY]
    monkeypatch.setattr(auth, "_sent_cookie", lambda: token)  # the browser sends its cookie
    reloaded = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    reloaded.run()
    assert not reloaded.exception and titles(reloaded) == ["My queue"]
    # logging out in the first tab (the browser test clicks the button) ends the login
    from itsmreview.accounts.service import end_session
    from itsmreview.db import write_transaction

    write_transaction(lambda session: end_session(session=session, token=token))
    again = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    again.run()
    assert titles(again) == ["itsmreview"]  # the cookie's login has ended
    reloaded.run()  # the other tab, on its next rerun
    assert "My queue" not in titles(reloaded) and auth.USER_KEY not in reloaded.session_state
    shown = [e.value for e in reloaded.error] + [w.value for w in reloaded.warning]
    assert any("session has ended" in text for text in shown), shown


def test_a_link_opened_before_logging_in_asks_for_the_password_and_opens(demo_configured):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page("views/queue.py").run()
    assert not at.exception and not at.title  # nothing of the queue before a login
    assert [i.value for i in at.info] == ["Log in to open this page."]
    at.text_input(key="login_username").input("expert1")
    at.text_input(key="login_password").input("itsm-demo")
    at.button(key="FormSubmitter:login-Log in").click().run()
    assert not at.exception, at.exception
    assert titles(at) == ["My queue"]


def test_without_a_key_the_model_page_says_how_and_sends_nothing(demo_configured, monkeypatch):
    from itsmreview.review.assist import client as model_client

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(model_client, "http_client_factory", lambda: pytest.fail("a request"))
    at = open_page(log_in("lead"), "model_review")
    assert titles(at) == ["Model review"]
    assert any("ANTHROPIC\\_API\\_KEY" in i.value for i in at.info)
    start = next(b for b in at.button if b.label.startswith("Start the model review"))
    assert start.disabled
    assert next(b for b in at.button if b.label == "Draft hints").disabled
    assert int(next(m.value for m in at.metric if m.label == "Tasks to rate").replace(",", "")) > 0
    assert "None yet." in [c.value for c in at.caption]


def test_a_lead_runs_the_model_review_and_reads_it_beside_the_experts(demo_configured, monkeypatch):
    import json as json_module
    import time

    from anthropic_replay import ReplayAPI, message, tool_use
    from itsmreview.db import session_scope
    from itsmreview.review.assist import client as model_client
    from itsmreview.review.assist.models import ModelRun
    from sqlmodel import select

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "anthropic"
    rating = json_module.loads((fixtures / "rating.response.json").read_text())

    def respond(body):
        if body["tools"][0]["name"] == "record_hint":
            hint = {
                "title": "Hand-over at night",
                "scenario": "s",
                "personas": ["L1 service desk agent"],
                "teams": ["Desk"],
                "timing_and_friction": "t",
                "task_idea": "i",
                "checks": ["c"],
            }
            return message([tool_use("record_hint", hint)])
        return rating

    api = ReplayAPI(respond)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setattr(model_client, "http_client_factory", api.client)
    at = open_page(log_in("lead"), "model_review")
    at.number_input(key="model-limit").set_value(6).run()
    start = next(b for b in at.button if b.label.startswith("Start the model review"))
    assert start.label == "Start the model review of 6 task(s)" and not start.disabled
    start.click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with session_scope() as session:
            run = session.exec(select(ModelRun)).one()
        if run.status != "running":
            break
        time.sleep(0.2)
    assert (run.status, run.rated) == ("finished", 6)
    at.run()
    texts = [p.proto.text for p in at.get("progress")]
    assert any("finished: 6 rated, 0 failed of 6" in t for t in texts), texts
    at.button(key="hints-draft").click().run()
    assert not at.exception and not at.error
    labels = [e.label for e in at.expander]
    assert any(literal("Hand-over at night") in label for label in labels), labels
    assert len(at.get("download_button")) == 2
    dashboard = open_page(at, "dashboard")
    assert "Humans and model raters" in [h.value for h in dashboard.subheader]
    assert dashboard.get("plotly_chart")


def _expert_holding(external_id: str) -> str:
    from itsmreview.accounts.models import User
    from itsmreview.catalog.models import Task, TaskVersion
    from itsmreview.db import session_scope
    from itsmreview.review.models import Assignment, ReviewRound
    from sqlmodel import select

    with session_scope() as session:  # in the round experts work in, not the finished one
        return session.exec(
            select(User.username)
            .join(Assignment, Assignment.expert_id == User.id)
            .join(ReviewRound, ReviewRound.id == Assignment.round_id)
            .where(ReviewRound.name == "Demo round 1")
            .join(TaskVersion, TaskVersion.id == Assignment.task_version_id)
            .join(Task, Task.id == TaskVersion.task_id)
            .where(Task.external_id == external_id)
            .order_by(User.username)
        ).first()


def test_experts_judge_anothers_finding_on_the_rating_page_and_the_panel_settles_it(
    demo_configured,
):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.ratings.findings import list_findings

    task = "demo-l1-03-vpn-wait-user"  # its finding is open, with one vote (expert2's)

    def judge(username: str, stands: bool, reason: str = "") -> AppTest:
        at = log_in(username)
        at.query_params["task"] = task
        open_page(at, "queue")
        panel = next(e for e in at.expander if e.label.startswith("Findings to judge"))
        assert panel.label == "Findings to judge (1)"
        assert any("Missing fallbacks" in m.value for m in at.markdown)
        if reason:
            next(t for t in at.text_input if str(t.key).endswith("-why")).input(reason)
        label = "It stands" if stands else "It does not stand"
        at.button(key=next(b.key for b in at.button if b.label == label)).click().run()
        assert not at.exception
        return at

    def finding() -> dict:
        with session_scope() as session:
            lead = user_by_username(session=session, username="lead")
            [found] = list_findings(session=session, actor=lead, external_id=task)
        return found

    at = judge("expert1", False)  # against needs a reason: nothing recorded
    assert [e.value for e in at.error] == [
        literal("say why you judge that the finding does not stand")
    ]
    assert finding()["votes"] == {"for": 1, "against": 0}
    at = judge("expert1", True)
    assert not at.error and toasts(at) == ["Vote recorded."]
    assert not any(e.label.startswith("Findings to judge") for e in at.expander)  # voted
    at = judge("expert3", True)
    assert toasts(at) == ["Vote recorded. The panel has confirmed the finding."]
    settled = finding()
    assert settled["state"] == "confirmed" and settled["votes"] == {"for": 3, "against": 0}


def test_an_expert_reads_the_target_state_diff_while_rating(demo_configured):
    task = "demo-l1-01-password-reset"
    at = log_in(_expert_holding(task))
    at.query_params["task"] = task
    open_page(at, "queue")
    chosen = next(box for box in at.selectbox if box.label == "Task")
    assert "Reset a locked" in chosen.options[chosen.index]
    markdown = "\n".join(m.value for m in at.markdown)
    assert "**Expected end state**" in markdown
    # the diff: the account's lock goes from true to false, and a new incident is added
    assert "directory\\_user U\\-1042 | \\~ changed | locked | true | false" in markdown
    assert "incident \\(new record\\) | \\+ added | category |  | Access" in markdown
    assert "🔒 **Must stay unchanged**" in markdown
    assert "manager\\, department\\, groups" in markdown
    assert "verify\\_identity" in markdown  # the expected actions
    labels = [r.label for r in at.radio]
    assert "Task completeness" in labels and "Free of spoilers" in labels
    proposal = next(e for e in at.expander if e.label.startswith("Another acceptable"))
    assert proposal
    text = next(t for t in at.text_area if str(t.key).startswith("proposal-"))
    text.input("Resetting over the self-service portal.")
    at.button(key=next(b.key for b in at.button if b.label == "Propose")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert toasts(at) == ["Proposal sent to the leads."]
    at.run()
    assert any(e.label.endswith("(1 proposed)") for e in at.expander)
    lead = log_in("lead")
    lead.session_state["open-proposals"] = True
    lead.run()
    assert any("self\\-service portal" in m.value for m in lead.markdown)
    lead.button(key=next(b.key for b in lead.button if b.label == "Accept…")).click().run()
    # what accepting does, told before it is done: nothing is made yet
    assert not lead.exception and _newest_status(task)[2] == 1
    [told] = [w.value for w in lead.warning if w.value.startswith("Accepting makes")]
    assert told.startswith(f"Accepting makes version 2 of {literal(task)}: version 1 with this")
    assert "Version 2 takes the place of version 1 in review in Demo round 1: experts " in told
    lead.button(key=next(b.key for b in lead.button if b.label == "Cancel")).click().run()
    assert not [w for w in lead.warning if w.value.startswith("Accepting makes")]
    lead.button(key=next(b.key for b in lead.button if b.label == "Accept…")).click().run()
    confirm = next(b for b in lead.button if b.label == "Accept: make version 2")
    lead.button(key=confirm.key).click().run()
    assert not lead.exception and not lead.error, [e.value for e in lead.error]
    assert toasts(lead) == [f"Accepted: {literal(task)} v2, in review in Demo round 1."]
    # the task was under review: its new version carries the review on, never a draft
    assert _newest_status(task) == ("in_review", "in_review", 2)


def _newest_status(external_id: str) -> tuple[str, str, int]:
    """(newest version's status, task's status, how many versions are in a round)."""
    from itsmreview.catalog.models import Task, TaskVersion
    from itsmreview.db import session_scope
    from itsmreview.review.models import RoundTask
    from sqlmodel import select

    with session_scope() as session:
        task = session.exec(select(Task).where(Task.external_id == external_id)).one()
        versions = session.exec(
            select(TaskVersion).where(TaskVersion.task_id == task.id).order_by(TaskVersion.version)
        ).all()
        in_rounds = session.exec(
            select(RoundTask.task_version_id).where(
                RoundTask.task_version_id.in_([v.id for v in versions])
            )
        ).all()
        return versions[-1].status, task.status, len(set(in_rounds))


def _ratings_of(username: str) -> int:
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.models import Rating
    from sqlalchemy import func
    from sqlmodel import select

    with session_scope() as session:
        user = user_by_username(session=session, username=username)
        return session.exec(
            select(func.count()).select_from(Rating).where(Rating.expert_id == user.id)
        ).one()


@pytest.mark.parametrize("change", ["deactivate", "set-role"])
def test_a_submit_from_a_tab_drawn_before_the_account_changed_writes_nothing(
    demo_configured, change
):
    from itsmreview.accounts.service import set_active, set_role

    at = open_page(log_in("expert1"), "queue")
    for radio in at.radio:
        radio.set_value(_top_score(radio))
    before = _ratings_of("expert1")
    if change == "deactivate":
        _as_admin(set_active, username="expert1", active=False)
    else:
        _as_admin(set_role, username="expert1", role="lead")
    # (AppTest runs the whole script for a fragment's button, so the page's own check of the
    # login answers first here; a browser runs the fragment alone: tests/e2e covers that)
    at.button(key=next(b.key for b in at.button if b.label == "Submit rating")).click().run()
    assert not at.exception, at.exception
    assert _ratings_of("expert1") == before
    shown = [w.value for w in at.warning] + [e.value for e in at.error]
    assert any("no longer active" in t or "session has ended" in t for t in shown), shown
    assert "itsmreview_user" not in at.session_state


def test_the_lead_reads_authoring_figures_and_filters_tasks_by_difficulty(demo_configured):
    at = log_in("lead")
    assert "Benchmark authoring" in [s.value for s in at.subheader]
    assert not at.tabs  # drawn when their section is opened
    at.session_state["open-authoring-groups"] = True
    at.run()
    assert [t.label for t in at.tabs][:3] == ["Difficulty", "Simulator backbone", "User type"]
    difficulty = at.dataframe[
        [i for i, d in enumerate(at.dataframe) if "Difficulty" in d.value.columns][0]
    ].value
    assert list(difficulty["Difficulty"]) == ["easy", "medium", "hard"]
    assert "Mean audit score" not in difficulty.columns  # not an audit round
    from itsmreview.demo.taskset import load_specs

    assert difficulty["Tasks"].sum() == len(load_specs())  # the tasks of the Dashboard's round
    assert any(c.proto.spec for c in at.get("plotly_chart"))
    at = open_page(at, "tasks")
    choose = next(m for m in at.multiselect if m.label == "Difficulty")
    choose.set_value(["hard"]).run()
    shown = int(at.caption[0].value.split()[0])
    assert 0 < shown < _tasks()
    assert set(at.dataframe[0].value["Difficulty"]) == {"hard"}


def test_an_audit_round_asks_pass_warn_fail_blocked(demo_configured):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.catalog.queries import latest_version_ids
    from itsmreview.db import session_scope
    from itsmreview.review.rounds.service import create_round
    from itsmreview.review.rubrics.service import ensure_rubric, load_rubric

    with session_scope() as session:
        create_round(
            session=session,
            actor=user_by_username(session=session, username="lead"),
            name="Audit",
            rubric=ensure_rubric(load_rubric("audit-100"), session=session),
            task_version_ids=latest_version_ids(session=session, external_ids=None)[:2],
            k=1,
        )
    at = open_page(log_in("expert5"), "queue")
    if any(b.label == "Round" for b in at.selectbox):
        next(b for b in at.selectbox if b.label == "Round").set_value("Audit").run()
    at.button(key=next(b.key for b in at.button if b.label == "Take the next task")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    criteria = [r for r in at.radio if r.label == "Task completeness"]
    assert criteria and criteria[0].options == ["Pass", "Warn", "Fail", "Blocked"]
    for radio in at.radio:
        radio.set_value(radio.options[0])  # Pass, accept, the lowest confidence
    at.button(key=next(b.key for b in at.button if b.label == "Submit rating")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    lead = log_in("lead")
    lead.selectbox(key="round").set_value("Audit").run()
    assert not lead.exception, lead.exception
    assert "**The 100-point audit**" in [m.value for m in lead.markdown]
    assert next(m.value for m in lead.metric if m.label == "Tasks scored") == "1"
    decide = next(s for s in lead.selectbox if s.label == "Decide by")
    assert decide.value == "audit-100"
    next(n for n in lead.number_input if n.label.startswith("Audit score")).set_value(90.0)
    lead.button(key="FormSubmitter:gate-Apply to every task of the round").click().run()
    assert not lead.exception and not lead.error, [e.value for e in lead.error]
    assert toasts(lead)[0].startswith("Gate applied:")


def test_with_workers_an_admins_log_import_runs_in_a_worker(demo_configured, tmp_path, monkeypatch):
    """ITSMREVIEW_JOBS=worker: the Imports page stores the file and queues its import; the page
    says it waits for a worker, then shows the imported log once a worker ran it."""
    from itsmreview.coverage.synthetic import generate_log, write_csv
    from itsmreview.jobs.service import run_next
    from itsmreview.settings import get_settings

    monkeypatch.setenv("ITSMREVIEW_JOBS", "worker")
    get_settings.cache_clear()
    path = write_csv(generate_log(30, seed=11), tmp_path / "queued.csv")
    at = open_page(log_in("admin"), "imports")
    at.text_input(key="log-path").input(str(path)).run()
    next(w for w in at.selectbox if w.label == "Preset").set_value("bpi2013").run()
    at.button(key=next(b.key for b in at.button if b.label == "Import log")).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("waiting for a worker" in p.text for p in at.get("progress"))
    assert "queued" not in set(at.dataframe[0].value["Name"])  # not imported by the page
    assert run_next(kinds=["log_import"]) is not None  # a worker takes it
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "queued" in set(at.dataframe[0].value["Name"])


def _ledger_of_round(name: str) -> list[tuple[str, dict]]:
    from itsmreview.db import session_scope
    from itsmreview.ledger.models import LedgerEntry
    from sqlmodel import select

    with session_scope() as session:
        return [
            (e.action, e.payload)
            for e in session.exec(
                select(LedgerEntry)
                .where(LedgerEntry.artifact_type == "review_round", LedgerEntry.artifact_id == name)
                .order_by(LedgerEntry.seq)
            )
        ]


def test_a_lead_opens_a_round_over_a_filter_from_the_rounds_page(demo_configured):
    from itsmreview.catalog.task_list import matching_tasks, task_filters
    from itsmreview.db import session_scope
    from itsmreview.review.rounds.queries import member_usernames, round_by_name, round_size

    at = open_page(log_in("lead"), "rounds")
    assert titles(at) == ["Review rounds"]
    listed = shown_tables(at)[0]  # as read: times to the minute, a dash where there is none
    assert "Demo round 1" in set(listed["Round"])
    closed = dict(zip(listed["Round"], listed["Closed (UTC)"], strict=True))
    assert closed["Demo round 1"] == "-"  # not closed: a dash, not None
    assert closed["Demo consensus round"][:2] == "20"  # the demo's finished Delphi round
    form = at.session_state["rounds-form"]
    status = at.multiselect(key=f"rounds-status-{form}")
    persona = at.multiselect(key=f"rounds-persona-{form}")
    status.set_value([]).run()  # the demo's tasks are all in a round already
    chosen = persona.options[0]
    at.multiselect(key=f"rounds-persona-{form}").set_value([chosen]).run()
    with session_scope() as session:
        count, _, _ = matching_tasks(session=session, filters=task_filters(personas=[chosen]))
    assert count > 0
    assert any(f"**{count} task(s)** match" in m.value for m in at.markdown)
    at.text_input(key=f"rounds-name-{form}").input("Pilot: " + chosen).run()
    at.multiselect(key=f"rounds-members-{form}").set_value(["expert1", "expert2"]).run()
    at.number_input(key=f"rounds-dimension_min-{form}").set_value(3.5).run()
    [button] = [b for b in at.button if b.label.startswith("Open round over")]
    assert button.label == f"Open round over {count} task(s)"
    button.click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert toasts(at) == [f"Round {literal('Pilot: ' + chosen)} opened over {count} task(s)."]
    with session_scope() as session:
        opened = round_by_name(session=session, name="Pilot: " + chosen)
        assert round_size(session=session, round_id=opened.id) == count
        assert member_usernames(session=session, round_id=opened.id) == ["expert1", "expert2"]
        assert opened.approval["dimension_min"] == 3.5
    actions = _ledger_of_round("Pilot: " + chosen)
    assert [a for a, _ in actions] == ["create", "members", "gate"]
    assert actions[0][1]["tasks"] == count
    assert actions[0][1]["selection"] == {"filters": {"personas": [chosen]}}
    # the form starts afresh, and the new round is the one to manage
    assert at.session_state["rounds-form"] == form + 1
    assert at.session_state["rounds-chosen"] == "Pilot: " + chosen


def test_a_round_name_in_use_is_refused_and_the_form_kept(demo_configured):
    at = open_page(log_in("lead"), "rounds")
    form = at.session_state["rounds-form"]
    at.multiselect(key=f"rounds-status-{form}").set_value([]).run()
    at.text_input(key=f"rounds-name-{form}").input("Demo round 1").run()
    next(b for b in at.button if b.label.startswith("Open round over")).click().run()
    assert [e.value for e in at.error] == [literal("a round named 'Demo round 1' exists already")]
    assert at.session_state["rounds-form"] == form  # nothing lost: the choices stay
    assert at.text_input(key=f"rounds-name-{form}").value == "Demo round 1"


def test_a_lead_admits_experts_reassigns_releases_and_closes_on_the_rounds_page(
    demo_configured,
):
    from itsmreview.db import session_scope
    from itsmreview.review.models import Assignment, AssignmentStatus
    from itsmreview.review.rounds.queries import member_usernames, round_by_name

    at = open_page(log_in("lead"), "rounds")
    at.selectbox(key="rounds-chosen").set_value("Demo round 1").run()
    at.multiselect(key="rounds-members-Demo round 1").set_value(["expert1", "expert2"]).run()
    next(b for b in at.button if b.label == "Save experts").click().run()
    assert not at.error, [e.value for e in at.error]
    assert toasts(at) == ["2 expert(s) admitted to Demo round 1."]
    at.run()
    picker = at.selectbox(key="rounds-assignment")
    assignment_id = picker.value  # the first open assignment, "#id · expert · task"
    assert picker.options[0].startswith(f"#{assignment_id} · ")
    holder = picker.options[0].split(" · ")[1]
    target = next(o for o in at.selectbox(key="rounds-reassign-to").options if o != holder)
    at.selectbox(key="rounds-reassign-to").set_value(target).run()
    next(b for b in at.button if b.label == "Reassign").click().run()
    assert not at.error, [e.value for e in at.error]
    assert toasts(at) == [f"Assignment {assignment_id} handed to {target}."]
    at.run()
    released = at.selectbox(key="rounds-assignment").value
    next(b for b in at.button if b.label == "Release").click().run()
    assert toasts(at) == [f"Assignment {released} released."]
    at.run()
    close = next(b for b in at.button if b.label == "Close round")
    assert close.disabled  # not before the lead says so
    at.checkbox(key="rounds-close-sure-Demo round 1").check().run()
    next(b for b in at.button if b.label == "Close round").click().run()
    assert toasts(at) == ["Round Demo round 1 closed."]
    at.run()
    assert any(c.value == "Demo round 1 is closed." for c in at.caption)
    with session_scope() as session:
        demo = round_by_name(session=session, name="Demo round 1")
        assert demo.status == "closed"
        assert member_usernames(session=session, round_id=demo.id) == ["expert1", "expert2"]
        assert session.get(Assignment, released).status == AssignmentStatus.released
        assert session.get(Assignment, assignment_id).status == AssignmentStatus.released
    actions = [a for a, _ in _ledger_of_round("Demo round 1")]
    assert actions[-4:] == ["members", "reassign", "release", "close"]


def test_a_lead_opening_an_admin_page_is_told_the_role(demo_configured):
    at = open_page(log_in("lead"), "users")
    assert [e.value for e in at.error] == ["This page needs the admin role."]


def test_a_lead_imports_by_upload_only_and_an_admin_by_path_too(demo_configured):
    on_server = "... or a path on the server"
    at = open_page(log_in("lead"), "imports")
    assert titles(at) == ["Imports"] and not at.error
    assert not [t for t in at.text_input if t.label.startswith(on_server)]
    at = open_page(log_in("admin"), "imports")
    assert len([t for t in at.text_input if t.label.startswith(on_server)]) == 2


def _expert1_takes_a_new_task(task_id: str, title: str, instruction: str, round_name: str):
    """A task without a source variant in a round of its own for expert1, who opens the queue
    on that round and takes it; returns the page."""
    from itsmreview.catalog.native import parse_bundle
    from itsmreview.catalog.service import import_tasks
    from itsmreview.db import session_scope

    task = {
        "id": task_id,
        "title": title,
        "persona": "L1 service desk agent",
        "track": "single-agent",
        "instruction": instruction,
    }
    with session_scope() as session:
        import_tasks(parse_bundle([task], "t"), session=session)
    return _expert1_takes(task_id, round_name)


def _expert1_takes(task_id: str, round_name: str) -> AppTest:
    """The imported task `task_id` in a round of its own for expert1, who opens the queue on
    that round and takes it; returns the page."""
    from demo_rounds import open_round_of_its_own

    open_round_of_its_own(round_name, task_id)
    at = open_page(log_in("expert1"), "queue")
    at.selectbox(key="queue-round").set_value(round_name).run()
    next(b for b in at.button if b.label == "Take the next task").click().run()
    assert not at.exception, at.exception
    return at


def test_a_dimension_that_does_not_apply_is_shown_as_such_and_left_empty(demo_configured):
    """A task without a source variant: fidelity is not asked, and the rating submits."""
    from itsmreview.db import session_scope
    from itsmreview.review.models import Rating, ReviewRound
    from itsmreview.review.rubrics.service import load_rubric
    from itsmreview.review.scorevector import unpack
    from sqlmodel import select

    at = _expert1_takes_a_new_task(
        "no-variant", "A task from practice alone", "Close the duplicate incident.", "Practice only"
    )
    fidelity = "Fidelity to the source log variant"
    assert fidelity not in [r.label for r in at.radio]
    assert any(
        c.value.startswith("Does not apply: the task declares no source variant")
        for c in at.caption
    )
    for radio in at.radio:
        radio.set_value(_top_score(radio))
    at.button(key=next(b.key for b in at.button if b.label == "Submit rating")).click().run()
    assert not at.error, [e.value for e in at.error]
    with session_scope() as session:
        [rating] = session.exec(
            select(Rating)
            .join(ReviewRound, ReviewRound.id == Rating.round_id)
            .where(Rating.status == "submitted", ReviewRound.name == "Practice only")
        ).all()
        keys = [d.key for d in load_rubric().dimensions]
        vector = unpack([rating.score_vector], len(keys))[0]
        assert np.isnan(vector[keys.index("log_fidelity")])
        assert not np.isnan(vector[keys.index("scenario_realism")])


def test_an_optional_item_marked_not_applicable_asks_a_reason_and_submits(demo_configured):
    """The colleague item does not apply: its Not applicable choice asks why; a submit
    without the reason is refused and keeps the answers; the draft and the rating keep the
    mark, the item's score stays empty."""
    from itsmreview.db import session_scope
    from itsmreview.review.models import Rating, ReviewRound
    from itsmreview.review.ratings.queries import scores_of
    from sqlmodel import select

    at = _expert1_takes_a_new_task(
        "user-only", "A task with the user alone", "Reset the user's password.", "No colleague"
    )
    colleague = "Simulated colleague realism (optional)"
    scale = {r.label: r for r in at.radio}
    assert scale[colleague].options[-1] == "Not applicable"
    assert scale["Scenario realism"].options[-1] != "Not applicable", "a required item"
    for radio in at.radio:
        radio.set_value(_top_score(radio))
    next(r for r in at.radio if r.label == colleague).set_value("Not applicable")

    def press(label):
        at.button(key=next(b.key for b in at.button if b.label == label)).click().run()

    press("Submit rating")
    [refused] = [e.value for e in at.error]
    assert "Simulated colleague realism" in refused and "without a reason" in refused
    assert next(r for r in at.radio if r.label == colleague).value == "n/a", "input kept"
    why = "Simulated colleague realism: why it does not apply to this task"
    [reason] = [t for t in at.text_input if t.label == why]
    reason.input("only the user takes part")
    press("Keep draft")
    assert not at.error, [e.value for e in at.error]

    def ratings(status):
        with session_scope() as session:
            rows = session.exec(
                select(Rating)
                .join(ReviewRound, ReviewRound.id == Rating.round_id)
                .where(Rating.status == status, ReviewRound.name == "No colleague")
            ).all()
            return [(r, scores_of(session=session, rating_id=r.id)) for r in rows]

    [(draft, _)] = ratings("draft")
    assert draft.not_applicable == {"simulated_colleague_realism": "only the user takes part"}
    press("Submit rating")
    assert not at.error, [e.value for e in at.error]
    [(rating, scores)] = ratings("submitted")
    assert rating.not_applicable == {"simulated_colleague_realism": "only the user takes part"}
    assert scores["simulated_colleague_realism"] is None
    assert scores["simulated_user_realism"] == 5


def test_the_simulator_realism_page_sets_the_demo_simulator_against_its_log(demo_configured):
    at = open_page(log_in("lead"), "realism")
    assert titles(at) == ["Simulator realism"]
    assert at.selectbox(key="realism-sim").value == "hand-written demo · demo-itsm v1"
    table = at.dataframe[0].value
    rows = dict(zip(table["Metric"], table["Verdict"], strict=True))
    # the demo's conversations make far fewer status events than a real case records
    assert rows["Case length (events)"] == "beyond"
    assert rows["Reopen rate"] == "n/a"
    assert at.subheader[0].value.endswith("figures beyond the floor")
    # the mapped sequence of a transcript, with the rule that made each event
    events = at.dataframe[1].value
    assert list(events.columns) == ["Turn", "Activity", "Team", "Rule"]
    assert set(events["Rule"]) <= {"status change", "handover"}
    at.radio(key="realism-distribution").set_value("Directly-follows pairs").run()
    assert not at.exception


def test_the_simulator_realism_page_sets_a_simulator_against_a_role_of_the_log(demo_configured):
    from itsmreview.db import session_scope
    from itsmreview.realism.service import simulator_report

    at = open_page(log_in("lead"), "realism")
    box = at.selectbox(key="realism-role")
    assert box.value == "Every real case"
    [choice] = [o for o in box.options if o.startswith("ST Level = L3 (")]
    box.set_value(choice).run()
    assert not at.exception and not at.error
    assert literal("cases in which ST Level = L3 takes part") in at.caption[0].value
    with session_scope() as session:
        expected = simulator_report(
            session=session, simulator="hand-written demo", role=("ST Level", "L3")
        )
    table = at.dataframe[0].value.set_index("Metric")
    length = expected["metrics"]["case_length"]
    assert table.loc["Case length (events)", "Real"] == f"{length['real']['value']:.2f}"
    assert literal(f"of the {expected['real_scope']['role_cases']:,} cases") in at.caption[0].value


def test_the_simulator_realism_page_says_how_to_map_when_nothing_is_mapped(demo_configured):
    from itsmreview.db import session_scope
    from itsmreview.realism.models import MappedTranscript
    from sqlmodel import delete

    with session_scope() as session:
        session.exec(delete(MappedTranscript))
    at = open_page(log_in("lead"), "realism")
    assert "itsmreview realism map --spec demo-itsm" in at.info[0].value
    at = open_page(log_in("expert1"), "realism")
    assert [e.value for e in at.error] == ["This page needs the lead role."]


def test_an_expert_answers_the_demo_blind_test_one_fragment_at_a_time(demo_configured):
    at = open_page(log_in("expert3"), "blind_test")
    assert titles(at) == ["Blind test"]
    total = int(at.get("progress")[0].proto.text.split(" of ")[1].split()[0])
    assert at.get("progress")[0].proto.text == f"0 of {total} answered"
    shown = at.table[0].value
    assert list(shown.columns) == ["Status", "Team"]
    assert all(team == "-" or team.startswith("Team ") for team in shown["Team"])
    # no source, no reference anywhere on the page
    page = " ".join(str(m.value) for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "simulated" not in shown.to_string() and "demo-" not in page
    at.button[0].click().run()  # no choice made
    assert [e.value for e in at.error] == ["Choose real or simulated first."]
    at.radio[0].set_value("simulated")
    at.button[0].click().run()
    assert not at.exception
    assert [e.value for e in at.error] == []
    assert at.get("progress")[0].proto.text == f"1 of {total} answered"
    assert at.subheader[0].value == "Fragment 2"


def test_the_lead_sees_the_blind_test_and_opens_another(demo_configured):
    at = open_page(log_in("lead"), "realism")
    tests = at.dataframe[-1].value
    assert list(tests["Test"]) == ["Demo blind test"]
    assert tests["Experts"].iloc[0] == 2 and tests["d'"].iloc[0] != "-"
    at.text_input[0].set_value("Second blind test")
    at.number_input[0].set_value(8)
    at.button(key="FormSubmitter:realism-blind-new-Open a blind test").click().run()
    assert not at.exception
    assert literal("Second blind test is open") in " ".join(toasts(at))
    assert list(at.dataframe[-1].value["Test"]) == ["Demo blind test", "Second blind test"]


def test_an_expert_confirms_a_model_label_on_the_turn_labels_page(demo_configured):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.catalog.models import Transcript
    from itsmreview.db import session_scope
    from itsmreview.realism.models import TurnLabel
    from itsmreview.realism.service import propose_label
    from sqlmodel import select

    at = open_page(log_in("expert2"), "turn_labels")
    assert "No label waits for a decision" in at.info[0].value
    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        transcript = session.exec(select(Transcript).order_by(Transcript.id)).first()
        unit = {"transcript_id": transcript.id, "turn": 1, "call": None, "log": "demo-vinst"}
        propose_label(
            session=session,
            actor=lead,
            spec="demo-itsm",
            unit=unit,
            label="Accepted-In Progress",
            reason="the caller reports a fault",
            model="claude-test",
            prompt_sha256="0" * 64,
        )
    at = open_page(log_in("expert2"), "turn_labels")
    assert any("Accepted\\-In Progress" in m.value for m in at.markdown)
    at.button(key=f"label-confirm-{1}").click().run()
    assert not at.exception
    assert "Confirmed: it counts now" in toasts(at)
    with session_scope() as session:
        stored = session.exec(select(TurnLabel)).one()
        assert stored.state == "confirmed" and stored.decided_by_id is not None
    assert "No label waits for a decision" in at.info[0].value


def test_an_expert_reports_a_finding_from_the_rating_page(demo_configured):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.ratings.findings import list_findings

    at = open_page(log_in("expert5"), "queue")
    text = next(t for t in at.text_area if str(t.key).startswith("finding-"))
    form = str(text.key).removesuffix("-text")
    where = at.multiselect(key=f"{form}-where")
    assert "the task's instruction" in where.options
    at.selectbox(key=f"{form}-kind").set_value("missing_fallbacks")
    at.radio(key=f"{form}-severity").set_value("major")
    where.set_value(["the task's instruction"])
    text.set_value("Nothing says what to do when the caller stops answering.")
    at.button(key=f"FormSubmitter:{form}-Report the finding").click().run()
    assert not at.exception and [e.value for e in at.error] == []
    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        mine = [f for f in list_findings(session=session, actor=lead) if f["author"] == "expert5"]
    assert [(f["category"], f["severity"], f["anchors"]) for f in mine] == [
        ("missing_fallbacks", "major", [{"kind": "task_field", "field": "instruction"}])
    ]


def test_the_blind_test_page_without_an_open_test_says_who_opens_one(demo_configured):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.realism.blind_tests import close_blind_test

    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        close_blind_test(session=session, actor=lead, name="Demo blind test")
    at = open_page(log_in("expert4"), "blind_test")
    assert "No blind test is open" in at.info[0].value
    at = open_page(log_in("lead"), "realism")
    tests = at.dataframe[-1].value
    assert list(tests["State"]) == ["closed"]


def test_an_expert_revises_in_a_delphi_phase_on_the_consensus_page(demo_configured):
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.db import session_scope
    from itsmreview.review.consensus.service import advance_phase, revision_trail, start_delphi

    at = open_page(log_in("expert1"), "consensus")
    assert "No Delphi round waits for your revision" in at.info[0].value  # the demo's is done
    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        start_delphi(session=session, actor=lead, round_name="Demo round 1", iqr_max=0.0)
        advance_phase(session=session, actor=lead, round_name="Demo round 1")
    at = open_page(log_in("expert1"), "consensus")
    assert titles(at) == ["Consensus"]
    panel = at.dataframe[0].value
    assert list(panel.columns) == ["Item", "Yours", "Panel median", "Middle half", "Answers"]
    assert "expert" not in " ".join(m.value for m in at.markdown)  # pseudonyms only
    first = panel["Item"].iloc[0]
    number = next(n for n in at.number_input if str(n.key).endswith(f"-{first}"))
    number.set_value(number.value + 1)
    at.button[0].click().run()  # a change without its reason
    assert any("say why you changed" in e.value for e in at.error)
    number = next(n for n in at.number_input if str(n.key).endswith(f"-{first}"))
    number.set_value(number.value + 1)
    reason = next(t for t in at.text_input if str(t.key).endswith(f"-{first}-why"))
    reason.set_value("The log shows longer waits.")
    at.button[0].click().run()
    assert not at.exception and toasts(at) == ["1 answer(s) changed"]
    with session_scope() as session:
        trail = revision_trail(session=session, actor=lead, round_name="Demo round 1")
    moved = [r for r in trail if r["changed"]]
    assert [(r["item"], r["reason"]) for r in moved] == [(first, "The log shows longer waits.")]


def _take_the_eogym_task(real_file) -> AppTest:
    """The real EnterpriseOps-Gym task (a policy prompt of 1,464 words), imported through the
    product's importer into a round of its own, open on expert1's rating page."""
    from itsmreview.catalog.importing import import_path
    from itsmreview.db import session_scope

    with session_scope() as session:
        import_path(real_file("tasks", "enterpriseops_gym_itsm_task.json"), session=session)
    return _expert1_takes("enterpriseops_gym_itsm_task", "Long tasks")


def _panes(at: AppTest):
    """The evidence and the rubric: the two columns whose first child is a pane of a fixed
    height."""
    panes = [
        c
        for c in at.columns
        if c.children and getattr(c.children[0].proto, "height_config", None)
        if c.children[0].proto.height_config.pixel_height > 0
    ]
    assert len(panes) == 2, [str(c) for c in at.columns]
    return panes


@pytest.mark.realdata
def test_the_evidence_and_the_rubric_are_side_by_side(demo_configured, real_file):
    at = _take_the_eogym_task(real_file)
    evidence, rubric = _panes(at)
    assert evidence.proto.weight > rubric.proto.weight  # the evidence is the wider
    assert not evidence.radio and rubric.radio  # every rubric item is in its own pane
    assert rubric.radio[0].label == "Scenario realism"
    assert [b.label for b in rubric.button if b.label.startswith("Submit")] == ["Submit rating"]
    opened = {e.label: e.proto.expanded for e in evidence.expander}
    assert opened["Instruction (65 words)"] is True  # short: open
    assert opened["Environment (1,464 words, 247 lines)"] is False  # the policy prompt: closed
    assert opened["Expected end state, ground truth and verifier (4 changed fields)"] is True
    [verifier] = [e for e in evidence.expander if e.label.startswith("Verifier (")]
    assert verifier.label == "Verifier (53 words, 7 lines)" and verifier.text  # queries as written
    titles = [e.label.split(" (")[0] for e in evidence.expander]
    # the diff sits with the ground truth and the verifier, before the variant
    assert titles.index("Expected end state, ground truth and verifier") < titles.index(
        "Source log variant"
    )


@pytest.mark.realdata
def test_the_policy_prompt_is_drawn_as_markdown_or_shown_raw(demo_configured, real_file):
    at = _take_the_eogym_task(real_file)
    evidence, _ = _panes(at)
    [policy] = [e for e in evidence.expander if e.label.startswith("Environment (")]
    [drawn] = [m.value for m in policy.markdown]
    assert "| **Manager** (`manager`) |" in drawn  # bold and its table, drawn
    assert "\n\n| **Manager**" not in drawn  # its rows one table, not a table each
    assert not policy.text
    at.toggle(key="raw-text").set_value(True).run()
    evidence, _ = _panes(at)
    [policy] = [e for e in evidence.expander if e.label.startswith("Environment (")]
    assert not policy.markdown and "| :--- | :--- |" in policy.text[0].value  # as written


def test_long_sections_are_collapsed_with_their_length(demo_configured):
    at = open_page(log_in("expert1"), "queue")
    evidence, _ = _panes(at)
    [transcript] = [e for e in evidence.expander if e.label.startswith("Transcript: ")]
    assert re.search(r"\(\d+ turns\)$", transcript.label) and transcript.proto.expanded
    [instruction] = [e for e in evidence.expander if e.label.startswith("Instruction (")]
    assert re.fullmatch(r"Instruction \(\d+ words\)", instruction.label)
    assert instruction.proto.expanded  # short: open


def test_changed_rows_of_the_diff_show_their_before_value():
    """A changed field shows its value before; one the task does not give says so (the
    EnterpriseOps-Gym verifier checks the end state only), and numbers stay as written."""

    def app():
        from itsmreview.ui.verifier import state_panel

        state_panel(
            {
                "changes": [
                    {
                        "entity": "incident",
                        "key": "INC0012",
                        "change": "changed",
                        "before": {"priority": 3},
                        "after": {"priority": 2, "state": "Resolved"},
                    }
                ]
            },
            None,
        )

    at = AppTest.from_function(app, default_timeout=TIMEOUT).run()
    [table] = [m.value for m in at.markdown if m.value.startswith("| Record")]
    assert "| priority | 3 | 2 |" in table  # not 3.0
    assert f"| state | {literal('(not stated)')} | Resolved |" in table  # not NaN, not empty
    assert any(c.value.startswith("(not stated): the task gives") for c in at.caption)


@pytest.mark.realdata
def test_the_real_diff_says_which_values_before_the_task_does_not_give(demo_configured, real_file):
    at = _take_the_eogym_task(real_file)
    evidence, _ = _panes(at)
    [table] = [m.value for m in evidence.markdown if m.value.startswith("| Record")]
    assert f"| impact | {literal('(not stated)')} | high |" in table
    assert any(c.value.startswith("(not stated): the task gives") for c in evidence.caption)
