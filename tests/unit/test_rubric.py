import pytest
from itsmreview.review.rubrics.service import load_rubric


def test_default_rubric_has_the_benchmark_dimensions():
    rubric = load_rubric()
    keys = [d.key for d in rubric.dimensions]
    assert keys == [
        "scenario_realism",
        "task_completeness",
        "persona_fit",
        "instruction_clarity",
        "spoiler_free",
        "ground_truth_correctness",
        "verifier_alignment",
        "simulated_user_realism",
        "simulated_colleague_realism",
        "log_fidelity",
    ]
    assert all(d.level == "ordinal" and d.scale == (1, 5) for d in rubric.dimensions)
    assert rubric.verdicts == ["accept", "revise", "reject"]
    assert {f.key for f in rubric.flags if f.blocking} == {
        "wrong_ground_truth",
        "unsafe_or_private_data",
        "duplicate",
    }


def test_invalid_rubric_names_file_and_field(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\ntitle: R\ndimensions:\n  - {key: a, label: A, scale: [5, 1]}\n")
    with pytest.raises(ValueError, match=r"r.yaml: dimensions.0: Value error, scale \[5, 1\]"):
        load_rubric(path)


def test_editing_changes_the_content_hash():
    rubric = load_rubric()
    edited = rubric.model_copy(update={"title": "Changed"})
    assert rubric.content_hash() != edited.content_hash()


def test_the_audit_preset_scores_five_criteria_to_one_hundred():
    rubric = load_rubric("audit-100")
    assert [d.key for d in rubric.dimensions] == [
        "scenario_realism",
        "task_completeness",
        "instruction_clarity",
        "ground_truth_correctness",
        "evaluator_rubric_alignment",
    ]
    assert sum(rubric.scoring.weights.values()) == 100
    assert rubric.scoring.threshold == 80
    assert [rubric.choice_label("task_completeness", v) for v in range(4)] == [
        "Blocked",
        "Fail",
        "Warn",
        "Pass",
    ]


def test_scoring_must_add_up_and_cover_the_scale(tmp_path):
    path = tmp_path / "r.yaml"
    base = "name: r\ntitle: R\ndimensions:\n  - {key: a, label: A, level: nominal, scale: [0, 3]}\n"
    path.write_text(base + "scoring: {weights: {a: 90}, credit: {0: 0, 1: 0, 2: 0.5, 3: 1}}\n")
    with pytest.raises(ValueError, match="weights add up to 90, not 100"):
        load_rubric(path)
    path.write_text(base + "scoring: {weights: {a: 100}, credit: {0: 0, 3: 1}}\n")
    with pytest.raises(ValueError, match=r"credit lacks the value\(s\) \[1, 2\] of a"):
        load_rubric(path)
    path.write_text(base + "scoring: {weights: {b: 100}, credit: {0: 0}}\n")
    with pytest.raises(ValueError, match=r"scoring.weights name no dimension: \['b'\]"):
        load_rubric(path)


def test_a_rubric_without_scoring_keeps_the_hash_it_had_before_scoring_existed():
    import hashlib

    from itsmreview.ledger.chain import canonical_json

    rubric = load_rubric()
    legacy = rubric.model_dump(mode="json")
    del legacy["scoring"]
    for dimension in legacy["dimensions"]:
        if dimension["applies_when"] == "always":  # nor applies_when, when it says always
            del dimension["applies_when"]
    assert rubric.content_hash() == hashlib.sha256(canonical_json(legacy).encode()).hexdigest()


def test_a_rubric_whose_dimensions_always_apply_keeps_its_stored_hash():
    """audit-100 is unchanged by applies_when: its hash as stored before it existed."""
    assert load_rubric("audit-100").content_hash() == (
        "c8d9e281a525fc562c8d53b03bebb7ccc49626238773344f1364cbf09d21207f"
    )
