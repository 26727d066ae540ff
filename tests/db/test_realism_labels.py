"""Model labels for turns no mapping rule matched, on both backends, through the real SDK over
a replayed Messages API: proposed, shown to an expert, counted only when confirmed, kept when
the transcripts are mapped again."""

import json
import re

import pytest
from anthropic_replay import ReplayAPI, message, tool_use
from itsmreview.accounts.service import create_user
from itsmreview.cli import app
from itsmreview.db import session_scope
from itsmreview.errors import Conflict
from itsmreview.realism.service import decide_label, labels_to_confirm, simulator_report
from itsmreview.review.assist import client as model_client
from itsmreview.review.assist.client import NotConfigured
from itsmreview.review.assist.labels import TOOL_NAME, propose_turn_labels
from typer.testing import CliRunner

runner = CliRunner()
QUEUED = "Queued-Awaiting Assignment"


def run(*args):
    return runner.invoke(app, list(args))


def _answer(body: dict) -> dict:
    """'My laptop will not boot' is a ticket queued for a team; anything else no event; a
    turn mentioning 'odd' gets an activity the log does not have."""
    text = body["messages"][0]["content"]
    turn = re.search(r"The turn \(.*?\):\n(.*)", text).group(1)
    activity = QUEUED if "will not boot" in turn else "no event"
    return message([tool_use(TOOL_NAME, {"activity": activity, "reason": f"said: {turn}"})])


@pytest.fixture
def labelled(mapped, monkeypatch, tmp_path):
    """The transcripts mapped again by a spec without its chat rule (user turns unmatched),
    an API key, the SDK pointed at a replayed API, a lead and an expert."""
    spec = tmp_path / "nochat.yaml"
    text = mapped["spec"].read_text()
    spec.write_text(text.split("  - name: chat")[0].replace("spec: desk", "spec: nochat"))
    assert run("realism", "map", "--spec", str(spec)).exit_code == 0
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    from itsmreview.settings import get_settings

    get_settings.cache_clear()
    api = ReplayAPI(_answer)
    monkeypatch.setattr(model_client, "http_client_factory", api.client)
    with session_scope() as session:
        lead = create_user(session=session, username="ll", role="lead", password="pw-12345678")[0]
        expert = create_user(session=session, username="ee", role="expert", password="pw-1234567")[
            0
        ]
    yield {"api": api, "lead": lead, "expert": expert, "spec": spec}
    get_settings.cache_clear()


def test_labels_are_proposed_confirmed_and_then_count(labelled):
    lead, expert = labelled["lead"], labelled["expert"]
    before = None
    with session_scope() as session:
        before = simulator_report(session=session, simulator="never-waits", spec="nochat")
        run_ = propose_turn_labels(session=session, actor=lead, spec="nochat", limit=500)
    # two user turns per transcript, eight transcripts
    assert (run_.proposed, run_.failed) == (16, 0)
    assert run_.no_event == 8
    request = labelled["api"].requests[0]["body"]
    assert request["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    assert QUEUED in request["tools"][0]["input_schema"]["properties"]["activity"]["enum"]
    assert "<turn_material>" in request["messages"][0]["content"]
    with session_scope() as session:
        waiting = labels_to_confirm(session=session, actor=expert)
    assert len(waiting) == 16 and {w["label"] for w in waiting} == {QUEUED, "no event"}
    # nothing counts before an expert confirms
    with session_scope() as session:
        still = simulator_report(session=session, simulator="never-waits", spec="nochat")
    assert still["metrics"]["case_length"] == before["metrics"]["case_length"]
    queued = [w for w in waiting if w["label"] == QUEUED]
    never = [w for w in queued if w["task"].startswith("never-")]
    for one in never:
        with session_scope() as session:
            decide_label(session=session, actor=expert, label_id=one["id"], accept=True)
    with session_scope() as session:
        decide_label(session=session, actor=expert, label_id=waiting[-1]["id"], accept=False)
    with session_scope() as session, pytest.raises(Conflict, match="rejected already"):
        decide_label(session=session, actor=expert, label_id=waiting[-1]["id"], accept=True)
    with session_scope() as session:
        after = simulator_report(session=session, simulator="never-waits", spec="nochat")
    # each never-waits case gains one event, first in its turn order
    assert after["metrics"]["case_length"]["simulated"]["value"] == pytest.approx(
        before["metrics"]["case_length"]["simulated"]["value"] + 1, abs=1e-6
    )
    assert after["unmapped_units"] == before["unmapped_units"] - len(never)
    # mapping again keeps what experts confirmed
    assert run("realism", "map", "--spec", str(labelled["spec"])).exit_code == 0
    with session_scope() as session:
        again = simulator_report(session=session, simulator="never-waits", spec="nochat")
    assert again["metrics"] == after["metrics"]
    listed = json.loads(run("realism", "labels", "--json").stdout)
    assert len(listed) == 16 - len(never) - 1


def test_unusable_answers_are_counted_not_stored(labelled):
    labelled["api"].responder = lambda body: message(
        [tool_use(TOOL_NAME, {"activity": "Made up", "reason": "x"})]
    )
    with session_scope() as session:
        found = propose_turn_labels(session=session, actor=labelled["lead"], spec="nochat", limit=3)
    assert (found.proposed, found.failed) == (0, 3)
    assert "'Made up' is not an activity of the log" in found.errors[0]
    assert json.loads(run("realism", "labels", "--json").stdout) == []


def test_without_a_key_nothing_is_sent_and_the_message_says_how(labelled, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    from itsmreview.settings import get_settings

    get_settings.cache_clear()
    with session_scope() as session, pytest.raises(NotConfigured, match="ANTHROPIC_API_KEY"):
        propose_turn_labels(session=session, actor=labelled["lead"], spec="nochat")
    assert labelled["api"].requests == []
