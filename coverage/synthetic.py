"""A deterministic synthetic ITSM incident log shaped like BPI Challenge 2013 (Volvo IT VINST).

Same columns as the BPI 2013 incidents CSV (so the `bpi2013` preset reads it), the same
statuses and sub-statuses, support teams at levels L1/L2/L3 with escalation and
ping-pong between teams, wait-user loops, repeated "In Progress" updates and
lognormal durations that depend on the activity, the team level and the impact.

>>> a = generate_log(cases=50, seed=7)
>>> b = generate_log(cases=50, seed=7)
>>> a.equals(b), a["SR Number"].nunique()
(True, 50)
>>> sorted(a["ST Level"].unique())[0]
'L1'
"""

import gzip
import io
import math
import random
from collections.abc import Callable
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np
import pandas as pd

COLUMNS = [
    "SR Number",
    "Change Date+Time",
    "Status",
    "Sub Status",
    "Activity",
    "Involved ST Function Div",
    "Involved Org line 3",
    "Involved ST",
    "ST Level",
    "SR Latest Impact",
    "Product",
    "Country",
    "Owner Country",
    "Resource",
]

IMPACTS = ("Low", "Medium", "High", "Major")
IMPACT_WEIGHTS = (0.30, 0.55, 0.13, 0.02)
IMPACT_SPEED = {"Low": 1.4, "Medium": 1.0, "High": 0.5, "Major": 0.25}
COUNTRIES = {
    "se": ("Sweden", ("Anna", "Erik", "Lars", "Karin", "Johan", "Maria", "Nils", "Sara")),
    "nl": ("Netherlands", ("Pieter", "Anke", "Joost", "Femke", "Bas", "Lotte")),
    "fr": ("France", ("Frederic", "Anne Claire", "Julien", "Camille", "Nicolas")),
    "be": ("Belgium", ("Wim", "Els", "Koen", "Sofie")),
    "pl": ("Poland", ("Piotr", "Agnieszka", "Tomasz", "Katarzyna", "Marek")),
    "br": ("Brazil", ("Joao", "Ana", "Paulo", "Mariana")),
    "in": ("India", ("Rahul", "Priya", "Arjun", "Divya", "Vikram", "Neha", "Suresh")),
    "us": ("USA", ("John", "Emily", "Michael", "Sarah")),
}
COUNTRY_WEIGHTS = (0.34, 0.08, 0.1, 0.12, 0.1, 0.06, 0.04, 0.16)
# (team, level, org line, function division, staffed from)
TEAMS = (
    ("SD Nordics", "L1", "Org line C", "SD_1", ("se",)),
    ("SD Benelux", "L1", "Org line C", "SD_2", ("nl", "be")),
    ("SD Europe South", "L1", "Org line C", "SD_3", ("fr", "pl")),
    ("SD Americas", "L1", "Org line C", "SD_4", ("us", "br")),
    ("Desktop Support", "L2", "Org line A2", "A2_1", ("se", "pl")),
    ("Network Operations", "L2", "Org line A2", "A2_2", ("se", "in")),
    ("SAP Application Support", "L2", "Org line B", "B_1", ("in", "be")),
    ("Identity & Access", "L2", "Org line A2", "A2_3", ("nl", "in")),
    ("Server Platforms", "L3", "Org line A2", "A2_4", ("se", "in")),
    ("SAP Basis", "L3", "Org line B", "B_2", ("in",)),
    ("Network Engineering", "L3", "Org line A2", "A2_5", ("se", "fr")),
    ("Database Administration", "L3", "Org line V7n", "V7_1", ("in", "pl")),
)
L1_BY_COUNTRY = {"se": 0, "nl": 1, "be": 1, "fr": 2, "pl": 2, "us": 3, "br": 3, "in": 0}
HOUR = 3600.0
# median seconds of the state an activity opens, before level and impact factors
MEDIAN_SECONDS = {
    "Accepted-In Progress": 2.5 * HOUR,
    "Accepted-Assigned": 1.5 * HOUR,
    "Accepted-Wait - User": 22 * HOUR,
    "Accepted-Wait - Vendor": 70 * HOUR,
    "Accepted-Wait - Implementation": 110 * HOUR,
    "Queued-Awaiting Assignment": 3 * HOUR,
    "Completed-Resolved": 60 * HOUR,
    "Completed-In Call": 0.2 * HOUR,
    "Completed-Cancelled": 2 * HOUR,
    "Completed-Closed": 0.0,
}
LEVEL_SLOWNESS = {"L1": 0.6, "L2": 1.4, "L3": 2.2}
OUTCOMES = (
    "resolve",
    "in_call",
    "escalate",
    "transfer",
    "Accepted-Wait - User",
    "Accepted-Wait - Vendor",
    "Accepted-Wait - Implementation",
    "cancel",
)
# weights of OUTCOMES after an "In Progress" spell, by team level
LEVEL_OUTCOME_WEIGHTS = {
    "L1": (0.42, 0.07, 0.26, 0.05, 0.14, 0.02, 0.01, 0.01),
    "L2": (0.50, 0.0, 0.15, 0.08, 0.12, 0.07, 0.05, 0.01),
    "L3": (0.62, 0.0, 0.0, 0.08, 0.10, 0.10, 0.08, 0.01),
}
START = pd.Timestamp("2011-01-03T00:00:00", tz="UTC")
SPAN_SECONDS = 2 * 365 * 24 * HOUR
MAX_EVENTS_PER_CASE = 60


def _team_members(rng: random.Random) -> list[list[str]]:
    members = []
    for _name, _level, _org, _div, countries in TEAMS:
        pool = [f"{c}-{first}" for c in countries for first in COUNTRIES[c][1]]
        rng.shuffle(pool)
        members.append(sorted(pool[: rng.randint(4, min(9, len(pool)))]))
    return members


class _Case:
    """Walks one incident through the VINST states, appending events to shared column lists."""

    def __init__(self, gen: "_Generator", number: str, t0: float) -> None:
        self.g, self.number, self.t = gen, number, t0
        rng = gen.rng
        self.impact = rng.choices(IMPACTS, IMPACT_WEIGHTS)[0]
        self.country = rng.choices(tuple(COUNTRIES), COUNTRY_WEIGHTS)[0]
        self.product = f"PROD{int(rng.paretovariate(1.1) * 10) % 700:03d}"
        self.team = L1_BY_COUNTRY[self.country]
        self.previous_team: int | None = None
        self.resource, self.resource_team = "", -1
        self.n = 0

    def emit(self, activity: str) -> None:
        g = self.g
        name, level, org, div, _ = TEAMS[self.team]
        status, sub = activity.split("-", 1)
        g.cols["SR Number"].append(self.number)
        g.seconds.append(self.t)
        g.cols["Status"].append(status)
        g.cols["Sub Status"].append(sub)
        g.cols["Activity"].append(activity)
        g.cols["Involved ST Function Div"].append(div)
        g.cols["Involved Org line 3"].append(org)
        g.cols["Involved ST"].append(name)
        g.cols["ST Level"].append(level)
        g.cols["SR Latest Impact"].append(self.impact)
        g.cols["Product"].append(self.product)
        g.cols["Country"].append(self.country)
        g.cols["Owner Country"].append(COUNTRIES[self.country][0])
        if self.resource_team != self.team or g.rng.random() < 0.1:
            self.resource = g.rng.choice(g.members[self.team])
            self.resource_team = self.team
        g.cols["Resource"].append(self.resource)
        self.n += 1
        median = MEDIAN_SECONDS[activity] * LEVEL_SLOWNESS[level] * IMPACT_SPEED[self.impact]
        if median:
            self.t += median * math.exp(g.rng.gauss(0.0, 0.9))
        else:
            self.t += 1.0

    def other_team(self, level: str) -> int:
        choices = [i for i, team in enumerate(TEAMS) if team[1] == level and i != self.team]
        return self.g.rng.choice(choices)

    def hand_over(self, team: int) -> None:
        self.previous_team, self.team = self.team, team
        self.emit("Queued-Awaiting Assignment")
        if self.g.rng.random() < 0.25:
            self.emit("Accepted-Assigned")

    def run(self) -> None:
        rng = self.g.rng
        if rng.random() < 0.22:
            self.emit("Queued-Awaiting Assignment")
        if rng.random() < 0.02:
            self.emit("Completed-Cancelled")
            self.emit("Completed-Closed")
            return
        while self.n < MAX_EVENTS_PER_CASE - 6:
            level = TEAMS[self.team][1]
            self.emit("Accepted-In Progress")
            while rng.random() < 0.35:
                self.emit("Accepted-In Progress")
            outcome = rng.choices(OUTCOMES, self.g.outcome_weights[(level, self.impact)])[0]
            if outcome == "in_call":
                self.emit("Completed-In Call")
                self.emit("Completed-Closed")
                return
            if outcome == "escalate":
                self.hand_over(self.other_team({"L1": "L2", "L2": "L3"}[level]))
            elif outcome == "transfer":
                if self.previous_team is not None and rng.random() < 0.6:
                    self.hand_over(self.previous_team)  # ping-pong back to the team before
                else:
                    self.hand_over(self.other_team(level))
            elif outcome.startswith("Accepted-"):
                self.emit(outcome)
            elif outcome == "cancel":
                self.emit("Completed-Cancelled")
                self.emit("Completed-Closed")
                return
            else:
                self.emit("Completed-Resolved")
                v = rng.random()
                if v < 0.05:
                    continue  # the user reopens the incident
                if v < 0.93:
                    self.emit("Completed-Closed")
                return
        self.emit("Completed-Resolved")
        self.emit("Completed-Closed")


class _Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.members = _team_members(self.rng)
        self.outcome_weights = {}
        for level, weights in LEVEL_OUTCOME_WEIGHTS.items():
            for impact in IMPACTS:
                urgent = 1.4 if impact in ("High", "Major") else 1.0
                self.outcome_weights[(level, impact)] = tuple(
                    w * urgent if o == "escalate" else w
                    for o, w in zip(OUTCOMES, weights, strict=True)
                )
        self.cols: dict[str, list] = {c: [] for c in COLUMNS if c != "Change Date+Time"}
        self.seconds: list[float] = []


def generate_log(
    cases: int | None = None,
    *,
    events: int | None = None,
    seed: int = 2013,
    progress: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """A synthetic incident log with `cases` cases, or the first cases reaching `events` events.

    Returns a dataframe with the BPI 2013 CSV columns; "Change Date+Time" is ISO 8601 text
    with a +01:00 offset, as in the real file. Equal arguments give an equal log.
    """
    if (cases is None) == (events is None):
        raise ValueError("give exactly one of cases or events")
    if (cases or events or 0) < 1:
        raise ValueError("cases and events must be at least 1")
    g = _Generator(seed)
    case_starts = g.rng.random
    i = 0
    while (cases is not None and i < cases) or (events is not None and len(g.seconds) < events):
        number = f"1-{364285768 + i * 7:09d}"
        _Case(g, number, case_starts() * SPAN_SECONDS).run()
        i += 1
        if progress and i % 10000 == 0:
            progress(len(g.seconds))
    if events is not None:
        keep = events
        for name in g.cols:
            del g.cols[name][keep:]
        del g.seconds[keep:]
    stamps = (
        START + pd.to_timedelta(np.floor(np.asarray(g.seconds)), unit="s") + pd.Timedelta(hours=1)
    )
    frame = pd.DataFrame(g.cols)
    frame.insert(1, "Change Date+Time", stamps.strftime("%Y-%m-%dT%H:%M:%S+01:00"))
    return frame[COLUMNS]


def write_csv(frame: pd.DataFrame, path: Path | str) -> Path:
    """Write the log as the BPI 2013 CSV does: UTF-8 with BOM, comma-separated; .gz compresses."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    compression = {"method": "gzip", "mtime": 0} if path.name.endswith(".gz") else None
    frame.to_csv(path, index=False, encoding="utf-8-sig", compression=compression)
    return path


def write_xes(frame: pd.DataFrame, path: Path | str) -> Path:
    """Write the log as XES 1849-2016 (one trace per case); .gz compresses. Streams, so
    millions of events fit in little memory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def opener(target: Path, mode: str, encoding: str):
        if target.name.endswith(".gz"):
            raw = gzip.GzipFile(filename=str(target), mode="wb", mtime=0)
            return io.TextIOWrapper(raw, encoding=encoding)
        return open(target, mode, encoding=encoding)

    extra = [
        c for c in COLUMNS if c not in ("SR Number", "Activity", "Change Date+Time", "Resource")
    ]
    keys = [c.lower().replace(" ", "_").replace("+", "") for c in extra]
    with opener(path, "wt", encoding="utf-8") as out:
        out.write(
            '<?xml version="1.0" encoding="utf-8" ?>\n'
            '<log xes.version="1849-2016" xmlns="http://www.xes-standard.org/">\n'
            '\t<extension name="Concept" prefix="concept" '
            'uri="http://www.xes-standard.org/concept.xesext" />\n'
            '\t<extension name="Time" prefix="time" '
            'uri="http://www.xes-standard.org/time.xesext" />\n'
            '\t<extension name="Organizational" prefix="org" '
            'uri="http://www.xes-standard.org/org.xesext" />\n'
        )
        current = None
        columns = [
            frame[c].to_numpy() for c in ("SR Number", "Activity", "Change Date+Time", "Resource")
        ]
        extra_columns = [frame[c].to_numpy() for c in extra]
        for i in range(len(frame)):
            case, activity, stamp, resource = (col[i] for col in columns)
            if case != current:
                if current is not None:
                    out.write("\t</trace>\n")
                out.write(f'\t<trace>\n\t\t<string key="concept:name" value={quoteattr(case)} />\n')
                current = case
            out.write(
                f'\t\t<event>\n\t\t\t<string key="concept:name" value={quoteattr(activity)} />\n'
                f'\t\t\t<date key="time:timestamp" value="{stamp}" />\n'
                f'\t\t\t<string key="org:resource" value={quoteattr(resource)} />\n'
            )
            for key, col in zip(keys, extra_columns, strict=True):
                out.write(f'\t\t\t<string key="{key}" value={quoteattr(str(col[i]))} />\n')
            out.write("\t\t</event>\n")
        if current is not None:
            out.write("\t</trace>\n")
        out.write("</log>\n")
    return path
