"""The PROV-JSON writer: records written as text must be the compact, key-sorted JSON of
their content, and names quoted as PROV-N needs, whatever the entries hold."""

import io
import json
from datetime import UTC, datetime
from types import SimpleNamespace
from urllib.parse import quote

from itsmreview.ledger.prov import ProvWriter, prov_document


def _entry(seq, artifact_type, artifact_id, action, **fields):
    return SimpleNamespace(
        seq=seq,
        created_at=datetime(2026, 12, 4, 10, 0, seq, tzinfo=UTC),
        artifact_type=artifact_type,
        artifact_id=artifact_id,
        action=action,
        source_kind=fields.get("source_kind", "system"),
        field=fields.get("field"),
        reference=fields.get("reference", ""),
        actor_id=fields.get("actor_id"),
        entry_hash=f"{seq:064x}",
        prev_hash=f"{seq - 1:064x}",
        payload=fields.get("payload"),
    )


ENTRIES = [
    _entry(1, "task", "T-1@v1", "import", source_kind="logs", actor_id=1),
    _entry(
        2,
        "task",
        "T-1@v1",
        "declare-provenance",
        source_kind="logs",
        field="goal",
        reference='BPI 2013 "incidents", variant #3\nline two',
        actor_id=1,
    ),
    _entry(3, "task", "a task/with spaces & ünïcode", "import", actor_id=2),
    _entry(
        4,
        "rating",
        "17",
        "submit",
        source_kind="expert",
        actor_id=2,
        payload={
            "content_sha256": "ab" * 32,
            "scores": {"z": 1.5, "a": None},
            "note": 'ünïcode "quoted"\n',
            "flags": ["b", "a"],
        },
    ),
    _entry(5, "rating", "17", "status", actor_id=None),
    _entry(
        6,
        "task",
        "T-1@v1",
        "declare-provenance",
        source_kind="external",
        field="user goal/why",
        reference="",
        actor_id=9,
    ),  # 9 has no name: no agent
]
AGENTS = {1: "lead", 2: "expert 2 (ü)"}


def _document_text() -> str:
    buffer = io.StringIO()
    with ProvWriter(AGENTS) as writer:
        for entry in ENTRIES:
            writer.add_entry(entry)
        writer.add_derivation("task/T-1@v1", "event_log/bpi 2013@1")
        writer.write(buffer)
    return buffer.getvalue()


def test_each_record_is_its_compact_key_sorted_json():
    text = _document_text()
    document = json.loads(text)
    for section, records in document.items():
        if section == "prefix":
            continue
        for body in records.values():
            assert list(body) == sorted(body), (section, body)
    # the same content, dumped compactly with the bodies' own key order, is the same bytes
    again = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    prefix = json.dumps({"itsm": document["prefix"]["itsm"]})
    assert (
        text
        == again.replace(json.dumps(document["prefix"], separators=(",", ":")), prefix, 1) + "\n"
    )


def test_names_are_quoted_and_every_relation_names_known_records():
    document = json.loads(_document_text())
    odd = "itsm:task/" + quote("a task/with spaces & ünïcode", safe="@.-_")
    assert odd in document["entity"] and "%20" in odd and "/" not in odd.split("task/", 1)[1]
    assert "itsm:agent/" + quote("expert 2 (ü)", safe="@.-_") in document["agent"]
    activity = document["activity"]["itsm:ledger/2"]
    assert activity["itsm:reference"] == ENTRIES[1].reference  # quotes and newline survive
    assert activity["itsm:field"] == "goal" and activity["prov:startTime"].startswith("2026-12-04")
    assert "itsm:reference" not in document["activity"]["itsm:ledger/1"]
    field = "itsm:task/T-1@v1." + quote("user goal/why", safe="")
    assert document["entity"][field] == {"prov:type": "itsm:field"}
    named = set(document["entity"]) | set(document["agent"]) | set(document["activity"])
    relations = [
        r
        for s in (
            "wasGeneratedBy",
            "used",
            "wasAssociatedWith",
            "wasAttributedTo",
            "wasDerivedFrom",
        )
        for r in document[s].values()
    ]
    assert relations and all(set(r.values()) <= named for r in relations)
    generated = document["wasGeneratedBy"].values()
    assert {"prov:activity": "itsm:ledger/4", "prov:entity": "itsm:rating/17"} in generated
    assert {"prov:activity": "itsm:ledger/5", "prov:entity": "itsm:rating/17"} in (
        document["used"].values()
    )
    assert not any(r.get("prov:agent", "").endswith("/9") for r in relations)


def test_prov_document_is_the_written_document():
    derivations = [("task/T-1@v1", "event_log/bpi 2013@1")]
    assert prov_document(ENTRIES, agent_names=AGENTS, derivations=derivations) == json.loads(
        _document_text()
    )


def test_the_exports_ledger_lines_are_its_records_as_jsonl_writes_them():
    from itsmreview.exports.bundle import jsonl
    from itsmreview.exports.evidence import ledger_line
    from itsmreview.ledger.service import entry_record

    odd = _entry(7, "task", "T-2@v1", "import", actor_id=1, payload={"n": [1, {"b": 2, "a": 1}]})
    odd.seq = "7"  # not the stored type: the general way
    for entry in [*ENTRIES, odd]:
        expected = jsonl([entry_record(entry, AGENTS.get(entry.actor_id))])
        assert ledger_line(entry, AGENTS) == expected
