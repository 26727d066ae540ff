"""Words, not codes: how every page and the CLI write a value in a table or a line.

One formatter for both: `-` where a value is missing (None, NaN, NaT), fixed decimals (alpha
and its interval to 3 places everywhere, means to 2), times to the minute, and words for the
codes of statuses, categories, roles and columns. It imports neither Streamlit nor pandas, so
the CLI stays light (`tests/db/test_cli.py` checks what a light command imports).
"""

import re
from datetime import date, datetime
from numbers import Integral, Real

MISSING = "-"
DECIMALS = 3  # alpha, its interval, Gwet's AC2: three places on every page
MINUTE = "%Y-%m-%d %H:%M"  # times as people read them: no seconds, no microseconds

# columns whose numbers are means on a rating scale or a score, not agreement coefficients
DECIMALS_OF = {"mean": 2, "realism": 2, "audit_score": 1, "score": 1}
# columns of shares (0-1), shown as percentages
PERCENT = frozenset({"share", "captured", "weight", "share_admitted"})
# columns whose floats are fractions even where every value happens to be whole (alpha 1.0)
FRACTIONS = frozenset(
    {
        "alpha",
        "ci_low",
        "ci_high",
        "gwet",
        "mean",
        "realism",
        "audit_score",
        "alpha_with_models",
        *(
            f"{s}{e}"
            for s in ("humans", "with_models", "model_vs_consensus")
            for e in ("", "_low", "_high")
        ),
        *PERCENT,
    }
)

# columns of names people or authors chose (a user called "lead", a task called "draft"):
# written as they are, never taken for a code
VERBATIM = frozenset(
    {"by", "actor", "author", "expert", "username", "name", "task", "title", "external_id", "id"}
)

# code -> words: statuses, categories, roles and column names as they come from the database
LABELS: dict[str, str] = {
    # task statuses
    "draft": "Draft",
    "in_review": "In review",
    "pending": "Pending",
    "approved": "Approved",
    "needs_revision": "Needs revision",
    "rejected": "Rejected",
    "adjudication": "Adjudication",
    # tracks
    "single-agent": "Single agent",
    "simulated-actors": "Simulated actors",
    "multi-agent-team": "Multi-agent team",
    # where a field came from
    "logs": "Logs",
    "external": "External",
    "expert": "Expert",
    # rounds, assignments, ratings, verdicts, proposals, jobs, model runs
    "open": "Open",
    "closed": "Closed",
    "reserved": "Reserved",
    "submitted": "Submitted",
    "released": "Released",
    "accept": "Accept",
    "revise": "Revise",
    "reject": "Reject",
    "proposed": "Proposed",
    "accepted": "Accepted",
    "dismissed": "Dismissed",
    "queued": "Queued",
    "running": "Running",
    "done": "Done",
    "failed": "Failed",
    "cancelled": "Cancelled",
    "finished": "Finished",
    "rated": "Rated",
    "refused": "Refused",
    "cut_off": "Cut off",
    "malformed": "Malformed",
    "error": "Error",
    # machine checks
    "pass": "Pass",
    "warn": "Warn",
    "fail": "Fail",
    # roles
    "lead": "Lead",
    "admin": "Admin",
    "model": "Model",
    # difficulty and simulated user types
    "easy": "Easy",
    "medium": "Medium",
    "hard": "Hard",
    "rookie": "Rookie",
    "entangled_requests": "Entangled requests",
    "mismatched_expectations": "Mismatched expectations",
    "edge_case": "Edge case",
    # levels of agreement and of variants
    "ordinal": "Ordinal",
    "nominal": "Nominal",
    "interval": "Interval",
    "raw": "Raw",
    "collapsed": "Collapsed",
    # realism verdicts
    "inside": "Inside",
    "outside": "Outside",
    # finding categories (review.ratings.findings.TAXONOMY), severities and anchors
    "incorrect_expected_actions": "Incorrect expected actions",
    "ambiguous_user_instructions": "Ambiguous user instructions",
    "impossible_constraints": "Impossible constraints",
    "missing_fallbacks": "Missing fallbacks",
    "policy_loopholes": "Policy loopholes",
    "ambiguous_design": "Ambiguous design",
    "environment_conflicts": "Environment conflicts",
    "incorrect_ground_truth": "Incorrect ground truth",
    "hidden_dependencies": "Hidden dependencies",
    "specification_gaps": "Specification gaps",
    "limited_grading": "Limited grading",
    "unrealistic_actor": "Unrealistic simulated actor",
    "wrong_routing": "Wrong routing",
    "missing_log_evidence": "Missing log evidence",
    "major": "Major",
    "minor": "Minor",
    "transcript_turn": "Transcript turn",
    "variant_step": "Variant step",
    "log_case": "Log case",
    "task_field": "Task field",
    "end_state": "End state",
    # rubric flags of the presets
    "ambiguous_instruction": "Ambiguous instruction",
    "wrong_ground_truth": "Wrong ground truth",
    "unsafe_or_private_data": "Unsafe or private data",
    "duplicate": "Duplicate of another task",
    # task fields
    "title": "Title",
    "instruction": "Instruction",
    "environment": "Environment",
    "ground_truth": "Ground truth",
    "verifier": "Verifier",
    "source": "Source",
    "transcripts": "Transcripts",
    # what a ledger entry is about
    "delphi": "Delphi round",
    "event_log": "Event log",
    "export": "Export",
    "finding": "Finding",
    "gap_hint": "Gap hint",
    "rating": "Rating",
    "realism_mapping": "Realism mapping",
    "realism_blind_test": "Blind test",
    "resolution_proposal": "Proposed resolution",
    "review_round": "Review round",
    "task": "Task",
    "team_mapping": "Team mapping",
    "user": "User",
    # columns
    "alpha": "Alpha",
    "alpha_with_models": "Alpha with model raters",
    "ci_low": "95% low",
    "ci_high": "95% high",
    "gwet": "Gwet's AC2",
    "units": "Tasks",
    "undefined": "Undefined because",
    "submitted_at": "Submitted",
    "created_at": "Recorded",
    "imported_at": "Imported",
    "reserved_until": "Reserved until",
    "opened_at": "Opened",
    "closed_at": "Closed",
    "captured_by": "Experts who capture it",
    "changed_after_rating": "Changed after rating",
    "rated_version": "Rated version",
    "external_id": "Task",
    "task_id": "Task",
    "user_type": "User type",
    "simulator_backbone": "Simulator",
    "artifact_type": "Artifact",
    "artifact_id": "Artifact id",
    "source_kind": "Source",
    "display_name": "Name",
    "username": "Username",
    "comparison": "Comparison",
    "dimension": "Dimension",
    "ratings": "Ratings",
    "tasks": "Tasks",
    "experts": "Experts",
    "activities": "Activities",
    "captured": "Captured",
    "persona": "Persona",
    "track": "Track",
    "status": "Status",
    "version": "Version",
    "difficulty": "Difficulty",
    "repairs": "Repairs",
    "reasons": "Why a lead decides",
    "reaches": "Reaches the gate",
    "elsewhere": "Elsewhere",
    "provenance": "Provenance",
    "coverage": "Coverage",
}

_BARE_CODE = re.compile(r"^[a-z][a-z0-9_]*$")  # a column or value code, not yet words
_CODE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")  # snake_case words in running text


def words(code: object) -> str:
    """The words for a code: its label, or the code with spaces for underscores and a capital;
    text that is no code stays as it is.

    >>> words("needs_revision"), words("captured_by"), words("some_new_code"), words("d'")
    ('Needs revision', 'Experts who capture it', 'Some new code', "d'")
    """
    text = str(code)
    if text in LABELS:
        return LABELS[text]
    if not _BARE_CODE.match(text):  # already words ("d'", "Opened (UTC)")
        return text
    spaced = text.replace("_", " ")
    return spaced[:1].upper() + spaced[1:]


def prose(text: str) -> str:
    """Running text with the codes it names as words ("blocking flag: wrong_ground_truth").

    >>> prose("blocking flag: wrong_ground_truth; verdicts conflict")
    'blocking flag: wrong ground truth; verdicts conflict'
    """
    return _CODE.sub(lambda m: words(m.group()).lower() if m.group() in LABELS else m.group(), text)


def is_missing(value: object) -> bool:
    """None, NaN, NaT and pandas' NA; a list or a string is never missing.

    >>> is_missing(None), is_missing(float("nan")), is_missing(0), is_missing("")
    (True, True, False, False)
    """
    if value is None:
        return True
    if isinstance(value, str | list | tuple | dict | set):
        return False
    try:
        return bool(value != value)  # NaN and NaT are the values unequal to themselves
    except (TypeError, ValueError):  # pandas.NA has no truth value; an array has many
        return type(value).__name__ == "NAType"


def moment(value: datetime | date) -> str:
    """A time to the minute, a date as a date.

    >>> moment(datetime(2026, 12, 4, 15, 4, 31, 663275))
    '2026-12-04 15:04'
    """
    if isinstance(value, datetime):
        return value.strftime(MINUTE)
    return value.strftime("%Y-%m-%d")


def number(value: float, decimals: int = DECIMALS, *, percent: bool = False) -> str:
    """A number to fixed decimals; a share as a percentage to one place.

    >>> number(0.8), number(3.4, 2), number(0.0625, percent=True), number(float("nan"))
    ('0.800', '3.40', '6.2%', '-')
    """
    if is_missing(value):
        return MISSING
    if percent:
        return f"{value:.1%}"
    return f"{value:.{decimals}f}"


def cell(value: object, column: str | None = None, *, decimals: int | None = None) -> str:
    """One value as a table cell or a CLI field; `column` (its code) picks decimals and
    percentages.

    >>> [cell(v) for v in (None, float("nan"), True, 7, 0.82, "needs_revision", "VPN")]
    ['-', '-', 'yes', '7', '0.820', 'Needs revision', 'VPN']
    >>> cell(3.41666, "mean"), cell(0.733, "captured"), cell(["rookie", "edge_case"])
    ('3.42', '73.3%', 'Rookie, Edge case')
    >>> cell("lead", "role"), cell("lead", "username")
    ('Lead', 'lead')
    """
    if is_missing(value):
        return MISSING
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):  # numpy.bool_
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        if decimals is None:
            decimals = DECIMALS_OF.get(column or "", DECIMALS)
        return number(float(value), decimals, percent=column in PERCENT)
    if isinstance(value, datetime | date):
        return moment(value)
    if isinstance(value, str):
        if column in VERBATIM:
            return value
        return LABELS[value] if value in LABELS else prose(value)
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(cell(v) for v in value) or MISSING
    return str(value)


def whole(values) -> bool:
    """Whether every present number of a column is whole (counts that became floats where one
    is missing: shown without decimals)."""
    return all(is_missing(v) or float(v).is_integer() for v in values)
