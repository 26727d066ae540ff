"""The lead's task list: filtered, counted and paged in the database."""

from itsmreview.accounts.service import create_user
from itsmreview.catalog.native import parse_bundle
from itsmreview.catalog.service import import_tasks
from itsmreview.catalog.task_list import declared_variants, filter_choices, task_table
from itsmreview.sequences import sequence_key

SEQUENCES = [["Accepted", "Completed"], ["Accepted", "Queued", "Completed"]]


def _task(i: int, **changes) -> dict:
    task = {
        "id": f"t{i:03d}",
        "title": f"Reset {'50%' if i == 7 else 'the'} password {i}",
        "persona": ["L1", "L2"][i % 2],
        "track": "single-agent",
        "instruction": "x",
        "source": {"log": "bpi", "variants": [SEQUENCES[i % 3 == 0]]},
    }
    return {**task, **changes}


def _catalog(session):
    lead, _ = create_user(session=session, username="lead", role="lead", password="lead-pass")
    import_tasks(parse_bundle([_task(i) for i in range(1, 121)], "t"), session=session)
    session.commit()
    return lead


def test_pages_cover_every_task_once_in_persona_then_id_order(session):
    lead = _catalog(session)
    seen = []
    for offset in range(0, 130, 50):
        listing = task_table(session=session, actor=lead, offset=offset, limit=50)
        assert listing.total == listing.matching == 120
        seen += listing.rows["id"].tolist()
    expected = sorted((["L1", "L2"][i % 2], f"t{i:03d}") for i in range(1, 121))
    assert seen == [task_id for _, task_id in expected]
    assert set(listing.rows["decision"]) == {"unreviewed"}
    assert set(listing.rows["log"]) == {"bpi"}


def test_filters_count_in_the_database(session):
    lead = _catalog(session)
    l2 = task_table(session=session, actor=lead, personas=["L2"], limit=10)
    assert l2.matching == 60 and len(l2.rows) == 10 and set(l2.rows["persona"]) == {"L2"}
    percent = task_table(session=session, actor=lead, text="50%")
    assert percent.rows["id"].tolist() == ["t007"]  # % is matched as written, not a wildcard
    assert task_table(session=session, actor=lead, text="T01").matching == 10  # t010-t019
    assert task_table(session=session, actor=lead, text="_").matching == 0
    assert filter_choices(session=session, actor=lead) == {
        "persona": ["L1", "L2"],
        "track": ["single-agent"],
        "status": ["draft"],
        "difficulty": [],
        "user_type": [],
        "simulator_backbone": [],
    }


def test_the_variant_filter_reads_the_newest_version_only(session):
    lead = _catalog(session)
    queued = sequence_key(SEQUENCES[1])
    assert declared_variants(session=session, actor=lead) == {
        sequence_key(SEQUENCES[0]): "Accepted → Completed",
        queued: "Accepted → Queued → Completed",
    }
    assert task_table(session=session, actor=lead, variant_key=queued).matching == 40
    # t003 declared the queued variant; its version 2 no longer does
    import_tasks(
        parse_bundle([_task(3, source={"log": "bpi", "variants": [SEQUENCES[0]]})], "t"),
        session=session,
    )
    session.commit()
    listing = task_table(session=session, actor=lead, variant_key=queued, limit=200)
    assert listing.matching == 39 and "t003" not in listing.rows["id"].tolist()
    row = task_table(session=session, actor=lead, text="t003").rows.iloc[0]
    assert row["version"] == 2 and row["decision"] == "unreviewed"
