"""The dashboard's figures on small data: intervals on every alpha, small groups greyed and
named, ratings on their scale, time in days, nothing drawn where there is nothing."""

import pandas as pd
from itsmreview.ui.charts import (
    DAY_MS,
    GREY,
    MIN_GROUP_TASKS,
    TOO_FEW,
    alpha_chart,
    alpha_over_time_chart,
    group_chart,
    progress_chart,
    realism_chart,
)


def _groups() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "group": ["easy", "medium", "rookie"],
            "tasks": [6, 11, 1],
            "rated": [5, 9, 1],
            "realism": [3.4, 3.33, 3.0],
            "alpha": [0.818, 0.725, 0.0],
            "ci_low": [-0.125, 0.077, 0.0],
            "ci_high": [1.0, 0.9, 0.0],
        }
    )


def test_empty_frames_draw_nothing_so_the_page_writes_a_sentence():
    assert (
        alpha_chart(
            pd.DataFrame({"item": ["a"], "alpha": [None], "ci_low": [None], "ci_high": [None]})
        )
        is None
    )
    assert alpha_over_time_chart(pd.DataFrame(columns=["day", "ratings", "alpha"])) is None
    assert group_chart(_groups().iloc[:0], "realism", "mean", "Difficulty") is None
    empty_split = pd.DataFrame(columns=["group", "dimension", "tasks", "ratings", "mean", "alpha"])
    assert realism_chart(empty_split, "provenance") is None
    assert progress_chart(pd.DataFrame(columns=["round", "expert", "submitted", "open"])) is None


def test_groups_below_the_minimum_are_grey_and_say_so_the_rest_carry_their_interval():
    figure = group_chart(_groups(), "realism", "mean realism", "Difficulty")
    [bars] = figure.data
    assert MIN_GROUP_TASKS == 5
    assert list(bars.text) == [
        "alpha 0.818 (-0.125 to 1.000)",
        "alpha 0.725 (0.077 to 0.900)",
        TOO_FEW,  # one task: never "alpha 0.00 (0.000-0.000)"
    ]
    assert list(bars.marker.color)[2] == GREY and list(bars.marker.color)[0] != GREY
    assert list(figure.layout.xaxis.range) == [1, 5]  # a mean rating is drawn on its scale


def test_mean_ratings_are_drawn_on_the_rating_scale_and_small_groups_greyed():
    split = pd.DataFrame(
        {
            "group": ["from the logs", "elsewhere"],
            "dimension": ["Scenario realism"] * 2,
            "tasks": [2, 18],
            "ratings": [4, 42],
            "mean": [3.5, 3.43],
            "alpha": [0.5, 0.797],
        }
    )
    figure = realism_chart(split, "provenance")
    assert list(figure.layout.xaxis.range) == [1, 5]
    small = next(bar for bar in figure.data if bar.name.startswith("from the logs"))
    assert small.name == f"from the logs ({TOO_FEW})" and small.marker.color == GREY


def test_every_alpha_is_drawn_with_its_interval():
    frame = pd.DataFrame(
        {"item": ["Scenario realism", "Flag"], "alpha": [0.82, None]}
        | {"ci_low": [-0.125, None], "ci_high": [1.0, None]}
    )
    [points] = alpha_chart(frame).data
    assert list(points.x) == [0.82]
    assert list(points.error_x.array) == [1.0 - 0.82]
    assert list(points.error_x.arrayminus) == [0.82 + 0.125]


def test_alpha_over_one_day_is_drawn_on_a_day_axis():
    day = pd.Timestamp("2026-12-04", tz="UTC")
    figure = alpha_over_time_chart(pd.DataFrame({"day": [day], "ratings": [12], "alpha": [0.8]}))
    axis = figure.layout.xaxis
    assert axis.type == "date" and axis.tickformat == "%Y-%m-%d" and axis.dtick == DAY_MS
    low, high = (pd.Timestamp(v) for v in axis.range)
    assert (high - low) == pd.Timedelta(days=1)  # a day's width, not milliseconds
