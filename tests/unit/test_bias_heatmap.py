"""The Dashboard's bias heatmap where some rater shares no task with another on a dimension
(rater bias undefined): it used to crash with "bad operand type for abs(): 'NoneType'"."""

import math

from itsmreview.review.dashboard.service import Dashboard
from itsmreview.review.gate.agreement import Alpha
from itsmreview.review.gate.item_agreement import ItemAgreement
from itsmreview.ui.charts import bias_heatmap


def _item(label: str, bias: dict) -> ItemAgreement:
    return ItemAgreement(label, label, Alpha(0.7, "ordinal", 10, 30), None, {}, bias, {})


def test_undefined_bias_is_drawn_as_a_gap():
    board = Dashboard(
        progress=None,
        task_status={},
        rounds=[],
        agreement=[
            _item("realism", {"e1": 0.4, "e2": None, "e3": -0.9}),
            _item("clarity", {"e1": None, "e2": None, "e3": None}),
        ],
    )
    frame = board.bias_frame()
    assert math.isnan(frame.loc["e2", "realism"]) and frame.loc["e3", "realism"] == -0.9
    figure = bias_heatmap(frame)
    assert figure.data[0].zmax == 0.9 and figure.data[0].zmin == -0.9
    only_gaps = bias_heatmap(frame[["clarity"]])
    assert only_gaps.data[0].zmax == 0.5  # nothing defined: the default range
