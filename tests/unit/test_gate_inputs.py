"""The gate's per-task view of a round's ratings, built from the round's tables."""

import pandas as pd
from itsmreview.review.gate.approval import TaskRatings
from itsmreview.review.gate.round_data import RoundData
from itsmreview.review.gate.service import _task_ratings
from itsmreview.review.rubrics.service import load_rubric

nan = float("nan")


def test_task_ratings_keep_humans_skip_unscored_and_empty_verdicts():
    ratings = pd.DataFrame(
        {
            "rating_id": [1, 2, 3, 4],
            "task_version_id": [10, 10, 11, 10],
            "expert_id": [1, 2, 1, 99],
            "rater_kind": ["human", "human", "human", "model"],
            "verdict": ["accept", None, "reject", "accept"],
            "flags": [["ambiguous_instruction"], None, [], []],
        }
    )
    scores = pd.DataFrame(
        {
            "rating_id": [1, 1, 2, 2, 3, 4],
            "dimension": ["realism", "clarity", "realism", "clarity", "realism", "realism"],
            "value": [4.0, 5.0, 2.0, nan, 3.0, 1.0],
        }
    )
    got = _task_ratings(RoundData(None, load_rubric(), ratings, scores))
    assert got == {
        10: TaskRatings(
            scores={"realism": [4.0, 2.0], "clarity": [5.0]},
            verdicts=["accept"],
            flags=[["ambiguous_instruction"], []],
        ),
        11: TaskRatings(scores={"realism": [3.0]}, verdicts=["reject"], flags=[[]]),
    }
