import pytest
from itsmreview.review.rubrics import load_rubric


def test_default_rubric_has_the_benchmark_dimensions():
    rubric = load_rubric()
    keys = [d.key for d in rubric.dimensions]
    assert keys == [
        "scenario_realism",
        "persona_fit",
        "instruction_clarity",
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
