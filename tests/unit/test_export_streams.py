"""The evidence files an export writes a batch at a time are the bytes the whole-set
functions write: agreement.json with its per-task summary, gate.json with each round's
decisions spooled."""

from itsmreview.exports import evidence
from itsmreview.exports.bundle import Staging

PER_ROUND = {
    "Rönd B": [{"item": "realism", "alpha": 0.71, "ci": [0.6, 0.8], "n": 3}],
    "A": [{"item": "clarity", "alpha": None, "ci": None, "n": 0}],
}
SUMMARY = [
    {
        "task": f"t-{i}",
        "version": 1,
        "ratings": 3,
        "median": {"x": 4.0, "y": None},
        "verdicts": {"accept": 2, "revise": 1},
    }
    for i in range(7)
]


def test_agreement_file_streamed_in_batches_is_the_whole_file(tmp_path):
    staging = Staging(tmp_path / "out")
    with evidence.AgreementFile(staging, PER_ROUND) as out:
        out.add(SUMMARY[:3])
        out.add([])
        out.add(SUMMARY[3:])
    written = (staging.root / "evidence/agreement.json").read_text(encoding="utf-8")
    assert written == evidence.agreement_file(PER_ROUND, SUMMARY)["evidence/agreement.json"]


def test_agreement_file_without_tasks(tmp_path):
    staging = Staging(tmp_path / "out")
    with evidence.AgreementFile(staging, {}):
        pass
    written = (staging.root / "evidence/agreement.json").read_text(encoding="utf-8")
    assert written == evidence.agreement_file({}, [])["evidence/agreement.json"]


def test_gate_file_with_spooled_decisions_is_the_whole_file(tmp_path):
    decisions = {
        "Rönd B": [{"task": "t-1", "version": 2, "status": "approved", "reasons": ["α ok"]}] * 4,
        "A": [],
    }
    per_round = {
        name: {
            "settings": {"k_min": 3, "mode": "medians"},
            "agreement": {"reached": True},
            "decisions": [],
        }
        for name in decisions
    }
    spools = {name: evidence.JsonArraySpool() for name in decisions}
    for name, rows in decisions.items():
        spools[name].add(rows[:1])
        spools[name].add(rows[1:])
    target = tmp_path / "gate.json"
    with open(target, "w", encoding="utf-8", newline="\n") as handle:
        evidence.write_gate(handle, per_round, spools)
    for spool in spools.values():
        spool.__exit__(None, None, None)
    whole = {name: {**body, "decisions": decisions[name]} for name, body in per_round.items()}
    assert target.read_text(encoding="utf-8") == evidence.gate_file(whole)["evidence/gate.json"]
