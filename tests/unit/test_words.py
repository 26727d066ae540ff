"""The one formatter of pages and the CLI: words for codes, "-" for missing, fixed decimals,
times to the minute; and the tables built on it."""

from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import Path

import itsmreview
import numpy as np
import pandas as pd
import pytest
import yaml
from itsmreview.ui.tables import markdown_table, readable
from itsmreview.ui.words import LABELS, MISSING, cell, is_missing, prose, words


@pytest.mark.parametrize("missing", [None, float("nan"), np.nan, pd.NA, pd.NaT, np.float64("nan")])
def test_every_kind_of_missing_value_is_a_dash(missing):
    assert is_missing(missing)
    assert cell(missing) == MISSING == "-"


@pytest.mark.parametrize("present", [0, 0.0, "", [], False, "None"])
def test_a_present_value_is_never_taken_for_missing(present):
    assert not is_missing(present)


def test_codes_become_words():
    assert cell("needs_revision") == "Needs revision"
    assert cell("wrong_ground_truth") == "Wrong ground truth"
    assert cell("unrealistic_actor") == "Unrealistic simulated actor"
    assert words("submitted_at") == "Submitted"
    assert words("captured_by") == "Experts who capture it"
    assert words("alpha_with_models") == "Alpha with model raters"
    assert words("a_code_nobody_listed") == "A code nobody listed"
    assert words("Gwet's AC2") == "Gwet's AC2"  # words stay as they are


def test_names_people_chose_are_never_taken_for_codes():
    assert cell("lead", "role") == "Lead"
    assert cell("lead", "username") == "lead"
    assert cell("Draft of a change", "title") == "Draft of a change"


def test_codes_inside_running_text_become_words():
    assert prose("blocking flag: wrong_ground_truth; median 2.0 below 3") == (
        "blocking flag: wrong ground truth; median 2.0 below 3"
    )
    assert prose("see demo_task_id") == "see demo_task_id"  # not a code we know


def test_times_are_to_the_minute_and_dates_stay_dates():
    moment = datetime(2026, 12, 4, 15, 4, 59, 663275, tzinfo=UTC)
    assert cell(moment) == "2026-12-04 15:04"
    assert cell(pd.Timestamp(moment)) == "2026-12-04 15:04"
    assert cell(date(2026, 12, 4)) == "2026-12-04"


def test_decimals_are_fixed_by_kind():
    assert cell(0.82) == "0.820"  # an alpha: three places everywhere
    assert cell(np.float64(-0.125)) == "-0.125"
    assert cell(1.0, "alpha") == "1.000"
    assert cell(3.4, "mean") == "3.40"
    assert cell(0.7333, "captured") == "73.3%"
    assert cell(np.int64(14)) == "14" and cell(True) == "yes" and cell(np.bool_(False)) == "no"


class _Status(StrEnum):
    approved = "approved"


def test_every_code_of_the_models_and_presets_has_words():
    from itsmreview.accounts.models import Role
    from itsmreview.catalog.models import SourceKind, TaskStatus, Track
    from itsmreview.catalog.state import DIFFICULTIES, USER_TYPES
    from itsmreview.jobs.models import JobStatus
    from itsmreview.review.assist.models import ModelRunStatus, RequestOutcome
    from itsmreview.review.models import (
        AssignmentStatus,
        CheckStatus,
        ProposalStatus,
        RatingStatus,
        RoundStatus,
        Verdict,
    )
    from itsmreview.review.ratings.findings import ANCHOR_KINDS, SEVERITIES, TAXONOMY

    enums = [Role, SourceKind, TaskStatus, Track, JobStatus, ModelRunStatus, RequestOutcome]
    enums += [AssignmentStatus, CheckStatus, ProposalStatus, RatingStatus, RoundStatus, Verdict]
    codes = {member.value for enum in enums for member in enum}
    codes |= set(DIFFICULTIES) | set(USER_TYPES) | set(ANCHOR_KINDS) | set(SEVERITIES)
    codes |= set(TAXONOMY)
    rubrics = Path(itsmreview.review.__file__).parent / "rubrics"
    for preset in rubrics.glob("*.yaml"):
        codes |= {flag["key"] for flag in yaml.safe_load(preset.read_text()).get("flags", [])}
    assert sorted(codes - set(LABELS)) == []
    assert {c: LABELS[c] for c in TAXONOMY} == {c: label for c, (label, _) in TAXONOMY.items()}
    assert cell(_Status.approved) == "Approved"  # a StrEnum member is its code


def _display(styler) -> pd.DataFrame:
    """What a reader sees of a styled table: every cell's display text."""
    shown = styler._translate(False, False)
    header = [c["display_value"] for c in shown["head"][0][1:]]
    rows = [[c["display_value"] for c in row[1:]] for row in shown["body"]]
    return pd.DataFrame(rows, columns=header)


def test_readable_tables_show_words_dashes_minutes_and_fixed_decimals():
    frame = pd.DataFrame(
        {
            "status": ["needs_revision", None],
            "alpha": [0.82, np.nan],
            "ci_low": [-0.125, 1.0],
            "rated_version": [2.0, np.nan],  # a count that became a float
            "submitted_at": [pd.Timestamp("2026-12-04 15:04:31.663275", tz="UTC"), pd.NaT],
            "captured_by": [1, 0],
        }
    )
    shown = _display(readable(frame, {"alpha": "Alpha"}))
    assert list(shown.columns) == [
        "Status",
        "Alpha",
        "95% low",
        "Rated version",
        "Submitted",
        "Experts who capture it",
    ]
    assert shown.iloc[0].tolist() == [
        "Needs revision",
        "0.820",
        "-0.125",
        "2",
        "2026-12-04 15:04",
        "1",
    ]
    assert shown.iloc[1].tolist() == ["-", "-", "1.000", "-", "-", "0"]
    assert readable(frame).data["Alpha"].dtype == float  # still numbers: sorting works


def test_markdown_tables_use_the_same_words():
    table = markdown_table(pd.DataFrame({"field": ["ground_truth"], "by": ["admin"], "x": [None]}))
    assert table.splitlines()[2] == "| Ground truth | admin | - |"
