"""The demo task set: hand-written ITSM task specs tied to variants of the synthetic demo log."""

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import yaml
from itsmreview.catalog.native import NativeTask, parse_bundle

SPECS = Path(__file__).parent / "tasks.yaml"
BPI2014_SPECS = Path(__file__).parent / "rabobank.yaml"  # tied to the BPI 2014 demo tables
QUEUED = "Queued-Awaiting Assignment"


def _handovers(seq: list[str]) -> int:
    return sum(1 for i, a in enumerate(seq) if a == QUEUED and i > 0)


def _reopened(seq: list[str]) -> bool:
    if "Completed-Resolved" not in seq:
        return False
    return "Accepted-In Progress" in seq[seq.index("Completed-Resolved") :]


PATTERNS: dict[str, Callable[[list[str]], bool]] = {
    "first_call": lambda s: "Completed-In Call" in s,
    "direct_resolve": lambda s: (
        "Completed-Resolved" in s
        and QUEUED not in s
        and not any(a.startswith("Accepted-Wait") for a in s)
        and not _reopened(s)
    ),
    "wait_user": lambda s: "Accepted-Wait - User" in s,
    "escalated": lambda s: _handovers(s) >= 1,
    "multi_handover": lambda s: _handovers(s) >= 2,
    "vendor": lambda s: "Accepted-Wait - Vendor" in s,
    "implementation": lambda s: "Accepted-Wait - Implementation" in s,
    "cancelled": lambda s: "Completed-Cancelled" in s,
    "reopened": _reopened,
    # BPI 2014's activities (the synthetic `rabobank-demo` tables)
    "rb_quick_close": lambda s: len(s) <= 4 and s[-1] == "Closed" and "Reassignment" not in s,
    "rb_caused_by_ci": lambda s: "Caused By CI" in s and "Reassignment" not in s,
    "rb_customer_update": lambda s: "Update from customer" in s and "Reassignment" not in s,
    "rb_reassigned": lambda s: "Reassignment" in s,
    "rb_communication": lambda s: "Communication with customer" in s,
    "rb_vendor": lambda s: "Pending vendor" in s,
    "rb_analysis": lambda s: "Analysis/Research" in s,
    "rb_mail": lambda s: "Mail to Customer" in s,
}


def load_specs(path: Path = SPECS) -> list[dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def pick_variant(variants: pd.DataFrame, pattern: str, pick: int) -> pd.Series:
    """The `pick`-th most frequent raw variant matching `pattern`; a small demo log (a few
    hundred cases) may have none, and then the task takes its shortest, most frequent one.

    >>> variants = pd.DataFrame(
    ...     {"rank": [1, 2], "sequence": [["Open", "Assignment", "Reassignment", "Closed"],
    ...                                   ["Open", "Assignment", "Update", "Closed"]]}
    ... )
    >>> list(pick_variant(variants, "rb_reassigned", 0)["sequence"])[2]
    'Reassignment'
    >>> int(pick_variant(variants, "rb_vendor", 0)["rank"])  # none waits for a vendor
    1
    """
    matching = variants[variants["sequence"].map(PATTERNS[pattern])].sort_values("rank")
    if matching.empty:
        lengths = variants["sequence"].map(len)
        matching = variants.assign(length=lengths).sort_values(["length", "rank"])
    return matching.iloc[min(pick, len(matching) - 1)]


class _Clock:
    """A transcript's clock: `at(minutes)` moves it on and says the time."""

    def __init__(self, start: datetime):
        self.now = start

    def at(self, minutes: float = 0.0) -> str:
        self.now = self.now + timedelta(minutes=minutes)
        return self.now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _transcript(spec: dict, start: datetime) -> dict:
    """The demo run of a task spec: the caller's opening and facts, the team's tool calls
    (with a handover and a colleague's answer where the spec has them), the closing."""
    caller = spec["caller"]
    user = f"{caller['name']} ({caller['dept']})"
    team = spec.get("team") or ["Agent"]
    at = _Clock(start).at
    messages = [
        {"role": "system", "actor": "Environment", "time": at(), "content": spec["environment"]},
        {"role": "user", "actor": user, "time": at(1), "content": spec["opening"]},
        {
            "role": "agent",
            "actor": team[0],
            "time": at(1),
            "content": "Thanks, I'm on it. Can you give me the details I need to look this up?",
        },
        {"role": "user", "actor": user, "time": at(2), "content": spec["facts"]},
    ]
    for index in range(len(spec["tools"])):
        messages += _tool_turns(spec, index, team, at)
    messages.append({"role": "agent", "actor": team[-1], "time": at(2), "content": spec["closing"]})
    messages.append({"role": "user", "actor": user, "time": at(3), "content": spec["user_close"]})
    actors = sorted({m["actor"] for m in messages if m["role"] in ("user", "colleague")})
    return {
        "id": f"{spec['id']}-run-1",
        "title": "Demo run (hand-written by the itsmreview authors)",
        "simulator": {"backbone": "hand-written demo", "temperature": None, "personas": actors},
        "messages": messages,
    }


def _tool_turns(spec: dict, index: int, team: list[str], at: Callable[..., str]) -> list[dict]:
    """The messages of the spec's `index`-th tool: a handover half-way through a team's
    tools, the call and its result, and after the first tool the colleague's answer."""
    tools, colleague = spec["tools"], spec.get("colleague")
    tool = tools[index]
    agent = team[min(index * len(team) // max(len(tools), 1), len(team) - 1)]
    messages = []
    if len(team) > 1 and index == len(tools) // 2 and index > 0:
        messages.append(
            {
                "role": "agent",
                "actor": team[0],
                "time": at(1),
                "content": f"Handing over to {team[1]}: facts gathered, next step is "
                f"{tool['name'].replace('_', ' ')}.",
            }
        )
    call_id = f"call_{index + 1}"
    messages.append(
        {
            "role": "agent",
            "actor": agent,
            "time": at(2),
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "name": tool["name"],
                    "arguments": tool["arguments"],
                    "requested_by": agent,
                }
            ],
        }
    )
    messages.append(
        {
            "role": "tool",
            "actor": tool["name"],
            "time": at(0.2),
            "tool_call_id": call_id,
            "content": yaml.safe_dump(tool["result"], sort_keys=False).strip(),
        }
    )
    if colleague and index == 0:
        messages.append(
            {
                "role": "agent",
                "actor": team[-1],
                "time": at(1),
                "content": f"@{colleague['actor']}: {colleague['ask']}",
            }
        )
        messages.append(
            {
                "role": "colleague",
                "actor": colleague["actor"],
                "time": at(colleague.get("delay_minutes", 15)),
                "content": colleague["reply"],
            }
        )
    return messages


def build_task_set(
    variants: pd.DataFrame, cases: pd.DataFrame, log_name: str, specs: Path = SPECS
) -> list[NativeTask]:
    """The demo tasks of `specs`, each tied to a raw variant of the log with example cases.

    `variants`: raw variants as materialised; `cases`: the materialised cases table.
    """
    starts = cases.set_index("case_id")["started_at"]
    bundle = []
    for spec in load_specs(specs):
        variant = pick_variant(variants, spec["pattern"], spec.get("pick", 0))
        case_ids = list(variant["example_case_ids"])[:3]
        start = pd.Timestamp(starts[case_ids[0]]).to_pydatetime().replace(tzinfo=None)
        rank_ref = f"{log_name} raw variant rank {int(variant['rank'])}"
        bundle.append(
            {
                "id": spec["id"],
                "title": spec["title"],
                "persona": spec["persona"],
                "track": spec["track"],
                "instruction": spec["instruction"],
                "environment": spec["environment"],
                "ground_truth": spec["ground_truth"],
                "verifier": spec["verifier"],
                "tags": spec.get("tags", []),
                "difficulty": next(
                    (
                        t.split(":", 1)[1]
                        for t in spec.get("tags", [])
                        if t.startswith("difficulty:")
                    ),
                    None,
                ),
                "user_type": spec.get("user_type"),
                "state": spec.get("state"),
                "source": {
                    "log": log_name,
                    "variants": [list(variant["sequence"])],
                    "case_ids": case_ids,
                    "roles": spec.get("roles", {}),
                    **({"outcomes": spec["outcomes"]} if spec.get("outcomes") else {}),
                },
                "provenance": [
                    {"field": "source", "source": "logs", "reference": rank_ref},
                    {
                        "field": "instruction",
                        "source": "expert",
                        "reference": f"written by the demo authors from {rank_ref}",
                    },
                    {
                        "field": "environment",
                        "source": "external",
                        "reference": "ITIL 4 incident management practice; ServiceNow-style schema",
                    },
                    {"field": "ground_truth", "source": "expert", "reference": "demo authors"},
                    {"field": "verifier", "source": "expert", "reference": "demo authors"},
                    {
                        "field": "transcripts",
                        "source": "expert",
                        "reference": "hand-written dialogue; waits follow the variant's states",
                    },
                ],
                "transcripts": [_transcript(spec, start)],
            }
        )
    return parse_bundle({"tasks": bundle}, "demo task set")
