"""Materialised figures: computed once per state of their data, inline for small data and in
the background for large, never mixing up states."""

import json

import pytest
from itsmreview.accounts.queries import user_by_username
from itsmreview.demo.loader import load_demo
from itsmreview.review.dashboard import service as dashboard_module
from itsmreview.review.dashboard.service import dashboard, item_from_record, item_record
from itsmreview.review.gate.item_agreement import round_agreement
from itsmreview.summaries.service import computation, materialised, wait_for_background
from sqlmodel import select

CALLS: list[str] = []
VALUES: dict[str, str] = {}


@computation("test-counted")
def _counted(_session, key):
    CALLS.append(key)
    return {"n": len(CALLS)}


@computation("test-value")
def _value(_session, key):
    return {"value": VALUES[key]}


def test_inline_figures_are_computed_once_per_fingerprint(session):
    CALLS.clear()

    def read(fingerprint):
        return materialised(
            session=session, kind="test-counted", key="a", fingerprint=fingerprint, inline=True
        )

    assert read("1").payload == {"n": 1}
    assert read("1").payload == {"n": 1} and len(CALLS) == 1
    assert read("2").payload == {"n": 2} and read("2").current


def test_background_figures_show_the_stored_ones_until_the_new_ones_are_in(session):
    def read(fingerprint, value):
        VALUES["b"] = value
        return materialised(
            session=session, kind="test-value", key="b", fingerprint=fingerprint, inline=False
        )

    first = read("1", "one")
    assert first.payload is None and first.refreshing and first.computed_at is None
    wait_for_background()
    session.expire_all()
    assert read("1", "one").payload == {"value": "one"} and read("1", "one").current
    stale = read("2", "two")
    assert stale.payload == {"value": "one"} and not stale.current and stale.refreshing
    wait_for_background()
    session.expire_all()
    assert read("2", "two").payload == {"value": "two"}


def test_an_unregistered_kind_is_refused_with_the_known_ones(session):
    with pytest.raises(LookupError, match="no computation of summaries named 'nope'.*round-status"):
        materialised(session=session, kind="nope", key="a", fingerprint="1", inline=True)


def test_a_lead_figure_needs_the_lead_who_asks(session):
    from itsmreview.ledger.evidence.service import summary_for

    with pytest.raises(ValueError, match="pass actor"):
        materialised(
            session=session, kind=summary_for.summary_kind, key="{}", fingerprint="1", inline=True
        )


@pytest.fixture
def demo(session, tmp_path):
    load_demo(session=session, data_dir=tmp_path, cases=300)
    session.commit()
    return user_by_username(session=session, username="lead")


def test_a_large_rounds_dashboard_agreement_comes_from_the_background(session, demo, monkeypatch):
    """Above the inline limit the first view has no agreement yet (and says so on the page);
    once the background computation is in, the figures equal a direct computation."""
    monkeypatch.setattr(dashboard_module, "INLINE_TASKS", 0)
    first = dashboard(session=session, actor=demo, bootstrap=200)
    assert first.agreement == [] and first.agreement_computed_at is None
    assert first.agreement_frame().empty
    wait_for_background()
    session.expire_all()
    board = dashboard(session=session, actor=demo, bootstrap=200)
    _, direct = round_agreement(session=session, actor=demo, bootstrap=200)
    assert board.agreement_current and board.agreement_computed_at is not None
    assert [item_record(a) for a in board.agreement] == [item_record(a) for a in direct]
    assert any(a.alpha.value is not None for a in board.agreement)


def test_agreement_records_round_trip(session, demo):
    _, items = round_agreement(session=session, actor=demo, bootstrap=50)
    assert [item_record(item_from_record(item_record(a))) for a in items] == [
        item_record(a) for a in items
    ]


def test_a_large_catalogs_coverage_comes_from_the_background(session, demo, monkeypatch):
    from itsmreview.coverage import overview
    from itsmreview.coverage.report import coverage_report

    monkeypatch.setattr(overview, "INLINE_TASKS", 0)
    first = overview.log_overview(session=session, actor=demo, name="demo-vinst")
    assert first.report is None and not first.variants["covered"].any()
    wait_for_background()
    session.expire_all()
    view = overview.log_overview(session=session, actor=demo, name="demo-vinst")
    direct, unresolved = coverage_report(session=session, log_name="demo-vinst")
    assert view.current and view.report.to_record() == direct.to_record()
    assert view.unresolved_case_ids == unresolved
    assert view.variants["covered"].sum() == direct.covered_variants


@pytest.fixture
def in_workers(configured, monkeypatch):
    """Background work goes to `itsmreview worker` (ITSMREVIEW_JOBS=worker)."""
    from itsmreview.settings import get_settings

    monkeypatch.setenv("ITSMREVIEW_JOBS", "worker")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _summary_jobs():
    from itsmreview.db import session_scope
    from itsmreview.jobs.models import Job

    with session_scope() as session:
        jobs = [j for j in session.exec(select(Job)).all() if j.kind == "summary"]
        for job in jobs:
            session.expunge(job)
        return jobs


def _run_worker_jobs() -> int:
    from itsmreview.jobs.service import run_next
    from itsmreview.worker import load_summary_computations

    load_summary_computations()
    done = 0
    while run_next(worker="test-worker", kinds=["summary"]) is not None:
        done += 1
    return done


@pytest.fixture
def demo_lead(in_workers, tmp_path):
    """The demo loaded into the configured database, and its lead (detached)."""
    from itsmreview.db import session_scope

    with session_scope() as session:
        load_demo(session=session, data_dir=tmp_path, cases=300)
    with session_scope() as session:
        lead = user_by_username(session=session, username="lead")
        session.expunge(lead)
    return lead


def test_with_workers_the_dashboards_figures_are_a_workers_jobs(demo_lead, monkeypatch):
    """No thread of the web process computes them: each view queues one job per summary (not
    one per view); a worker computes them as it would inline, and the next view reads them."""
    from itsmreview.db import session_scope
    from itsmreview.summaries.models import QueuedAdjudication, Summary

    monkeypatch.setattr(dashboard_module, "INLINE_TASKS", 0)
    lead = demo_lead
    with session_scope() as session:  # as for a round decided before the queue was kept
        for row in session.exec(select(Summary)).all():
            session.delete(row)
        for row in session.exec(select(QueuedAdjudication)).all():
            session.delete(row)
    with session_scope() as session:
        first = dashboard(session=session, actor=session.merge(lead), bootstrap=200)
        dashboard(session=session, actor=session.merge(lead), bootstrap=200)
    assert first.agreement == [] and first.queue is None and not first.task_status
    queued = _summary_jobs()
    kinds = sorted(job.payload["kind"] for job in queued)
    assert kinds == ["adjudication-queue", "progress", "round-agreement", "round-status"]
    assert all(job.status == "queued" for job in queued)
    wait_for_background()  # nothing runs here: a thread would have stored the figures
    assert _run_worker_jobs() == 4
    with session_scope() as session:
        board = dashboard(session=session, actor=session.merge(lead), bootstrap=200)
        _, direct = round_agreement(session=session, actor=session.merge(lead), bootstrap=200)
        statuses = dashboard_module.queries.round_status_counts(
            session=session, round_id=dashboard_module.find_round(session, None).id
        )
    assert board.agreement_current and board.queue is not None
    assert [item_record(a) for a in board.agreement] == [item_record(a) for a in direct]
    assert board.task_status == statuses and sum(statuses.values()) > 0
    assert board.status_computed_at is None and not board.progress.empty
    assert len(_summary_jobs()) == 4  # all current: the view queued nothing more


def test_a_workers_lead_figures_run_as_the_lead_while_their_session_lasts(demo_lead, monkeypatch):
    """A lead's figure queued from a page is computed by the worker as that lead; if the lead
    was deactivated meanwhile, the job fails and nothing is stored."""
    from itsmreview.accounts.service import set_active
    from itsmreview.db import session_scope
    from itsmreview.ledger.evidence.service import summary_for
    from itsmreview.summaries.models import Summary
    from itsmreview.ui import cache

    monkeypatch.setattr(cache, "INLINE_LEDGER_ENTRIES", 0)
    lead = demo_lead
    shown = cache.in_background(summary_for)(lead)
    assert shown.value is None
    assert _run_worker_jobs() == 1
    computed = cache.in_background(summary_for)(lead)
    with session_scope() as session:
        direct = summary_for(session=session, actor=session.merge(lead))
    assert computed.current and computed.value == json.loads(json.dumps(direct, default=str))

    with session_scope() as session:  # deactivating appends to the ledger: figures are stale
        admin = user_by_username(session=session, username="admin")
        set_active(session=session, actor=admin, username="lead", active=False)
    stale = cache.in_background(summary_for)(lead)
    assert not stale.current
    stored_before = _stored(Summary, summary_for.summary_kind)
    _run_worker_jobs()
    job = max(_summary_jobs(), key=lambda j: j.id)
    assert job.status == "failed" and "no longer active" in (job.error or "")
    assert _stored(Summary, summary_for.summary_kind) == stored_before


def _stored(model, kind):
    from itsmreview.db import session_scope

    with session_scope() as session:
        return [
            (s.fingerprint, s.payload) for s in session.exec(select(model)).all() if s.kind == kind
        ]


PAGES_REGISTER = """
import ast, importlib, json, pathlib, sys
import itsmreview.views, itsmreview.ui
from itsmreview.summaries.service import registered_kinds
modules = set()
for package in (itsmreview.views, itsmreview.ui):
    for path in pathlib.Path(package.__path__[0]).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("itsmreview."):
                if not node.module.startswith(("itsmreview.views", "itsmreview.ui")):
                    modules.add(node.module)
for module in sorted(modules):
    importlib.import_module(module)
print(json.dumps({"modules": len(modules), "kinds": sorted(registered_kinds())}))
"""
WORKER_REGISTERS = """
import json
from itsmreview.worker import load_summary_computations
print(json.dumps({"kinds": sorted(load_summary_computations())}))
"""


def test_the_pages_register_no_figures_a_worker_would_not_know():
    """Every summary the pages' modules register (so every one a page can ask for) is
    registered by the modules a worker imports (each in a fresh process: a registry only
    grows)."""
    import subprocess
    import sys

    def registered_by(script):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    pages, worker = registered_by(PAGES_REGISTER), registered_by(WORKER_REGISTERS)
    assert pages["modules"] > 20
    missing = set(pages["kinds"]) - set(worker["kinds"])
    assert not missing, f"add the modules of {sorted(missing)} to worker.SUMMARY_MODULES"
    assert {"progress", "round-status", "round-agreement", "adjudication-queue", "coverage"} <= set(
        worker["kinds"]
    )
