"""Materialised figures: computed once per state of their data, inline for small data and in
the background for large, never mixing up states."""

import pytest
from itsmreview.accounts.queries import user_by_username
from itsmreview.demo.loader import load_demo
from itsmreview.review.dashboard import service as dashboard_module
from itsmreview.review.dashboard.service import dashboard, item_from_record, item_record
from itsmreview.review.gate.item_agreement import round_agreement
from itsmreview.summaries.service import materialised, wait_for_background


def test_inline_figures_are_computed_once_per_fingerprint(session):
    calls = []

    def compute(_):
        calls.append(1)
        return {"n": len(calls)}

    def read(fingerprint):
        return materialised(
            session=session,
            kind="k",
            key="a",
            fingerprint=fingerprint,
            compute=compute,
            inline=True,
        )

    assert read("1").payload == {"n": 1}
    assert read("1").payload == {"n": 1} and len(calls) == 1
    assert read("2").payload == {"n": 2} and read("2").current


def test_background_figures_show_the_stored_ones_until_the_new_ones_are_in(session):
    def figures(value):
        return lambda _: {"value": value}

    def read(fingerprint, value):
        return materialised(
            session=session,
            kind="k",
            key="b",
            fingerprint=fingerprint,
            compute=figures(value),
            inline=False,
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
