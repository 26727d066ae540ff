"""A deterministic synthetic ITSM log shaped like BPI Challenge 2014 (Rabobank ICT service
management): four linked tables in the public files' layout, so the `bpi2014` preset reads
them as it reads the real ones.

- `Detail_Incident_Activity.csv`: the events of each incident (Open, Assignment, updates,
  Reassignment between assignment groups, Caused By CI, Closed), `IncidentActivity_Number`,
  the `Assignment Group` (242 teams, a few carrying most of the work), `Interaction ID`;
- `Detail_Incident.csv`: one row per incident: CI, impact, urgency, priority, category,
  `# Reassignments` (as many as its Reassignment events), open/resolved/close times, `Handle
  Time (Hours)`, closure code, its related interactions and change;
- `Detail_Interaction.csv`: service-desk contacts, most linked to an incident (`Related
  Incident`), the rest resolved at first call;
- `Detail_Change.csv`: changes; an incident names the change that caused it (`Related
  Change`).

Files are `;`-separated and Latin-1, with decimal commas (`3,8744`) and `#N/B` where the
source has no value. Times are day first, written as each public table writes them:
activities `07-01-2013 08:17:17`, incidents `05/02/2012 13:32:57`, interactions
`9-9-2011 9:23` (no leading zeros, no seconds), changes `05/02/2012 13:32` (slashes, no
seconds), so the demo, the tests and the benchmark meet every form the preset reads.

>>> tables = generate_bpi2014(incidents=40, seed=5)
>>> sorted(tables), len(tables["incidents"])
(['activities', 'changes', 'incidents', 'interactions'], 40)
>>> again = generate_bpi2014(incidents=40, seed=5)
>>> all(tables[k].equals(again[k]) for k in tables)
True
"""

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from itsmreview.coverage.linked import BPI2014_NAMES

FILES = BPI2014_NAMES  # the public files' names, as the bpi2014 preset finds them
# each public table writes its times its own way, all day first
STAMP = "%d-%m-%Y %H:%M:%S"  # activities: 07-01-2013 08:17:17
INCIDENT_STAMP = "%d/%m/%Y %H:%M:%S"  # incidents: 05/02/2012 13:32:57
MISSING = "#N/B"
# sizes of the public files, for a full-size set
FULL = {"incidents": 46_607, "activities": 466_737, "interactions": 147_004, "changes": 30_275}
GROUPS = 242

INCIDENT_COLUMNS = [
    "CI Name (aff)",
    "CI Type (aff)",
    "CI Subtype (aff)",
    "Service Component WBS (aff)",
    "Incident ID",
    "Status",
    "Impact",
    "Urgency",
    "Priority",
    "Category",
    "KM number",
    "Alert Status",
    "# Reassignments",
    "Open Time",
    "Reopen Time",
    "Resolved Time",
    "Close Time",
    "Handle Time (Hours)",
    "Closure Code",
    "# Related Interactions",
    "Related Interaction",
    "# Related Incidents",
    "# Related Changes",
    "Related Change",
    "CI Name (CBy)",
    "CI Type (CBy)",
    "CI Subtype (CBy)",
    "ServiceComp WBS (CBy)",
]
ACTIVITY_COLUMNS = [
    "Incident ID",
    "DateStamp",
    "IncidentActivity_Number",
    "IncidentActivity_Type",
    "Assignment Group",
    "KM number",
    "Interaction ID",
]
INTERACTION_COLUMNS = [
    "CI Name (aff)",
    "CI Type (aff)",
    "CI Subtype (aff)",
    "Service Comp WBS (aff)",
    "Interaction ID",
    "Status",
    "Impact",
    "Urgency",
    "Priority",
    "Category",
    "KM number",
    "Open Time (First Touch)",
    "Close Time",
    "Closure Code",
    "First Call Resolution",
    "Handle Time (secs)",
    "Related Incident",
]
CHANGE_COLUMNS = [
    "CI Name (aff)",
    "CI Type (aff)",
    "CI Subtype (aff)",
    "Service Component WBS (aff)",
    "Change ID",
    "Change Type",
    "Risk Assessment",
    "Emergency Change",
    "CAB-approval needed",
    "Planned Start",
    "Planned End",
    "Scheduled Downtime Start",
    "Scheduled Downtime End",
    "Actual Start",
    "Actual End",
    "Requested End Date",
    "Change record Open Time",
    "Change record Close Time",
    "Originated from",
    "# Related Interactions",
    "# Related Incidents",
]

CI_TYPES = {  # type: (share, name prefix, subtypes)
    "application": (0.42, "SAP", ("Server Based Application", "Web Based Application")),
    "subapplication": (0.20, "SUB", ("Client Based Application", "Web Based Application")),
    "computer": (0.15, "WBA", ("Desktop", "Laptop", "Thin Client")),
    "software": (0.06, "SWA", ("SAP", "Standard Application")),
    "storage": (0.04, "DTA", ("SAN", "NAS")),
    "displaydevice": (0.04, "DSP", ("Monitor", "Beamer")),
    "hardware": (0.04, "HWA", ("Printer", "Scanner")),
    "officeelectronics": (0.03, "OFF", ("Printer", "Fax")),
    "networkcomponents": (0.01, "NET", ("Router", "Switch")),
    "database": (0.01, "DBS", ("Oracle", "SQL Server")),
}
CLOSURE_CODES = {
    "Other": 0.30,
    "Software": 0.24,
    "No error - works as designed": 0.12,
    "User error": 0.10,
    "Unknown": 0.07,
    "Hardware": 0.05,
    "Operator error": 0.04,
    "Referred": 0.03,
    "Inquiry": 0.03,
    "Data": 0.02,
}
UPDATES = {
    "Operator Update": 0.34,
    "Status Change": 0.20,
    "Update from customer": 0.14,
    "Communication with customer": 0.10,
    "Update": 0.09,
    "Pending vendor": 0.05,
    "Mail to Customer": 0.04,
    "Description Update": 0.02,
    "Analysis/Research": 0.02,
}
CATEGORIES = {"incident": 0.93, "request for information": 0.055, "complaint": 0.015}
IMPACT = [0.01, 0.05, 0.16, 0.54, 0.24]  # impact / urgency 1 (highest) .. 5
CHANGE_TYPES = {
    "Change Component": 0.55,
    "Release Type": 0.20,
    "Master Change": 0.12,
    "Master Change Roll-out": 0.08,
    "Standard Change Type": 0.05,
}
RISKS = {"Minor Change": 0.72, "Business Change": 0.20, "Major Business Change": 0.08}
START = datetime(2012, 11, 1, 7, 0, 0)
SPAN_DAYS = 150


def _pick(rng: np.random.Generator, weights: dict, size: int) -> np.ndarray:
    keys = list(weights)
    p = np.array([weights[k] for k in keys], dtype=float)
    return np.array(keys, dtype=object)[rng.choice(len(keys), size=size, p=p / p.sum())]


def _stamp(moments) -> list[str]:
    return [m.strftime(STAMP) for m in moments]


def _short(moment: datetime) -> str:
    """Interactions: no leading zeros, no seconds (9-9-2011 9:23)."""
    return f"{moment.day}-{moment.month}-{moment.year} {moment.hour}:{moment.minute:02d}"


def _slash_minutes(moment: datetime) -> str:
    """Changes: slashes, no seconds (05/02/2012 13:32)."""
    return moment.strftime("%d/%m/%Y %H:%M")


def _decimal_comma(values: np.ndarray, places: int = 4) -> list[str]:
    return [f"{v:.{places}f}".replace(".", ",") for v in values]


def _group_weights(rng: np.random.Generator) -> np.ndarray:
    """Zipf-like work of 242 groups: the service desk and a few resolver teams carry most."""
    ranks = np.arange(1, GROUPS + 1)
    weights = 1.0 / ranks**1.1
    return weights / weights.sum()


def generate_bpi2014(
    incidents: int = 2_000, seed: int = 2014, *, full_size: bool = False
) -> dict[str, pd.DataFrame]:
    """The four tables as text frames, keyed activities, incidents, interactions, changes.
    `full_size`: the public files' row counts (46,607 incidents and about 690,000 rows)."""
    if full_size:
        incidents = FULL["incidents"]
    if incidents < 1:
        raise ValueError(f"incidents must be at least 1, got {incidents}")
    rng = np.random.default_rng(seed)
    groups = [f"TEAM{i:04d}" for i in range(1, GROUPS + 1)]
    group_p = _group_weights(rng)
    n_changes = max(1, round(incidents * FULL["changes"] / FULL["incidents"]))
    change_ids = [f"C{i:08d}" for i in range(1, n_changes + 1)]

    types = list(CI_TYPES)
    ci_type = np.array(types, dtype=object)[
        rng.choice(len(types), incidents, p=[CI_TYPES[t][0] for t in types])
    ]
    impact = rng.choice(5, incidents, p=IMPACT) + 1
    urgency = np.clip(impact + rng.choice([-1, 0, 0, 0, 1], incidents), 1, 5)
    priority = np.clip(np.ceil((impact + urgency) / 2).astype(int), 1, 5)
    opened = [
        START + timedelta(seconds=int(s)) for s in rng.integers(0, SPAN_DAYS * 86400, incidents)
    ]
    rows, incident_rows, interaction_rows = [], [], []
    interaction_no, activity_no = 1, 3_600_000
    linked_interactions = 1 + rng.poisson(1.4, incidents)
    related_change = rng.random(incidents) < 0.09
    for i in range(incidents):
        incident_id = f"IM{i + 1:07d}"
        ci_name = f"{CI_TYPES[ci_type[i]][1]}{int(rng.integers(1, 900)):06d}"
        km = f"KM{int(rng.integers(1, 2500)):07d}"
        my_interactions = [f"SD{interaction_no + k:07d}" for k in range(linked_interactions[i])]
        interaction_no += len(my_interactions)
        trace, reassignments = _work(rng, groups, group_p)
        moments = _event_times(rng, opened[i], trace, level=6 - priority[i])
        for (kind, group), stamp in zip(trace, _stamp(moments), strict=True):
            activity_no += int(rng.integers(1, 40))
            opening = my_interactions[0] if kind == "Open" else MISSING
            rows.append((incident_id, stamp, f"001A{activity_no:07d}", kind, group, km, opening))
        incident_rows.append(
            _incident_row(
                rng,
                (incident_id, ci_name, ci_type[i], km),
                (impact[i], urgency[i], priority[i]),
                reassignments,
                moments,
                my_interactions,
                change_ids if related_change[i] else None,
            )
        )
        for k, interaction_id in enumerate(my_interactions):
            touched = opened[i] - timedelta(minutes=float(rng.integers(1, 30))) * (k == 0)
            touched += timedelta(hours=float(rng.integers(0, 48))) * (k > 0)
            interaction_rows.append(
                _interaction(
                    rng, interaction_id, touched, ci_name, ci_type[i], impact[i], incident_id, km
                )
            )
    standalone = round(incidents * FULL["interactions"] / FULL["incidents"]) - len(interaction_rows)
    interaction_rows += _first_call_interactions(rng, max(0, standalone), interaction_no)
    return {
        "activities": pd.DataFrame(rows, columns=ACTIVITY_COLUMNS),
        "incidents": pd.DataFrame(incident_rows, columns=INCIDENT_COLUMNS),
        "interactions": pd.DataFrame(interaction_rows, columns=INTERACTION_COLUMNS),
        "changes": _changes(rng, change_ids),
    }


def _work(
    rng: np.random.Generator, groups: list[str], group_p: np.ndarray
) -> tuple[list[tuple[str, str]], int]:
    """An incident's work as (activity, assignment group) pairs: opened at the service desk,
    assigned, updated, reassigned (sometimes back: ping-pong), closed; and how many times it
    was reassigned."""
    desk = groups[int(rng.choice(3, p=[0.6, 0.25, 0.15]))]
    first = groups[int(rng.choice(GROUPS, p=group_p))]
    reassignments = int(min(rng.geometric(0.55) - 1, 12))
    held, trace = [first], [("Open", desk), ("Assignment", first)]
    for _ in range(reassignments):
        if len(held) > 1 and rng.random() < 0.3:
            target = held[-2]  # back to the group it came from: ping-pong
        else:
            target = groups[int(rng.choice(GROUPS, p=group_p))]
            while target == held[-1]:
                target = groups[int(rng.choice(GROUPS, p=group_p))]
        held.append(target)
        for update in _pick(rng, UPDATES, int(rng.integers(0, 3))):
            trace.append((update, held[-2]))
        trace.append(("Reassignment", target))
    for update in _pick(rng, UPDATES, int(rng.poisson(4.8))):
        trace.append((update, held[-1]))
    if rng.random() < 0.62:
        trace.append(("Caused By CI", held[-1]))
    trace.append(("Closed", held[-1]))
    return trace, reassignments


def _event_times(
    rng: np.random.Generator, opened: datetime, trace: list[tuple[str, str]], *, level: int
) -> list[datetime]:
    """When each event of `trace` happened: minutes to hours apart (longer at a higher
    `level`, 1 to 5), waits before a reassignment three times as long."""
    waits = rng.lognormal(mean=np.log(25 * level), sigma=1.3, size=len(trace) - 1)
    waits *= np.array([3.0 if kind == "Reassignment" else 1.0 for kind, _ in trace[1:]])
    moments = [opened]
    for minutes in waits:
        moments.append(moments[-1] + timedelta(minutes=float(minutes)))
    return moments


def _incident_row(
    rng: np.random.Generator,
    names: tuple[str, str, str, str],
    levels: tuple[int, int, int],
    reassignments: int,
    moments: list[datetime],
    interactions: list[str],
    change_ids: list[str] | None,
) -> tuple:
    """An incident's row of Detail_Incident.csv. `names`: incident id, CI name, CI type and
    KM number; `levels`: impact, urgency and priority; `change_ids`: the changes one of
    which caused it, or None."""
    incident_id, ci_name, ci_type, km = names
    impact, urgency, priority = levels
    subtypes = CI_TYPES[ci_type][2]
    resolved, closed = moments[-1], moments[-1] + timedelta(minutes=float(rng.integers(1, 90)))
    handle = float(rng.lognormal(mean=np.log(2.5 * (6 - priority)), sigma=1.0))
    change = change_ids[int(rng.integers(0, len(change_ids)))] if change_ids else MISSING
    return (
        ci_name,
        ci_type,
        subtypes[int(rng.integers(0, len(subtypes)))],
        f"WBS{int(rng.integers(1, 300)):06d}",
        incident_id,
        "Closed",
        str(impact),
        str(urgency),
        str(priority),
        _pick(rng, CATEGORIES, 1)[0],
        km,
        "Closed",
        str(reassignments),
        moments[0].strftime(INCIDENT_STAMP),
        "",
        resolved.strftime(INCIDENT_STAMP),
        closed.strftime(INCIDENT_STAMP),
        _decimal_comma(np.array([handle]))[0],
        _pick(rng, CLOSURE_CODES, 1)[0],
        str(len(interactions)),
        interactions[0] if len(interactions) == 1 else "#MULTIVALUE",
        "" if rng.random() < 0.95 else "1",
        "1" if change_ids else "",
        change,
        ci_name,
        ci_type,
        subtypes[0],
        f"WBS{int(rng.integers(1, 300)):06d}",
    )


def _first_call_interactions(rng: np.random.Generator, count: int, first_number: int) -> list:
    """`count` contacts solved at the first call, linked to no incident, numbered from
    `first_number`."""
    types = list(CI_TYPES)
    rows = []
    for k in range(count):
        moment = START + timedelta(seconds=int(rng.integers(0, SPAN_DAYS * 86400)))
        chosen = types[int(rng.choice(len(types), p=[CI_TYPES[t][0] for t in types]))]
        rows.append(
            _interaction(
                rng,
                f"SD{first_number + k:07d}",
                moment,
                f"{CI_TYPES[chosen][1]}{int(rng.integers(1, 900)):06d}",
                chosen,
                int(rng.choice(5, p=IMPACT) + 1),
                MISSING,
                f"KM{int(rng.integers(1, 2500)):07d}",
            )
        )
    return rows


def _interaction(rng, interaction_id, touched, ci_name, ci_type, impact, incident, km) -> tuple:
    first_call = incident == MISSING
    return (
        ci_name,
        ci_type,
        CI_TYPES[ci_type][2][0],
        f"WBS{int(rng.integers(1, 300)):06d}",
        interaction_id,
        "Closed",
        str(impact),
        str(int(np.clip(impact + rng.choice([-1, 0, 1]), 1, 5))),
        str(impact),
        "incident" if not first_call else _pick(rng, CATEGORIES, 1)[0],
        km,
        _short(touched),
        _short(touched + timedelta(minutes=float(rng.integers(2, 60)))),
        _pick(rng, CLOSURE_CODES, 1)[0],
        "Y" if first_call else "N",
        str(int(rng.lognormal(mean=np.log(400), sigma=0.7))),
        incident,
    )


def _changes(rng: np.random.Generator, change_ids: list[str]) -> pd.DataFrame:
    n = len(change_ids)
    types = list(CI_TYPES)
    ci_type = np.array(types, dtype=object)[
        rng.choice(len(types), n, p=[CI_TYPES[t][0] for t in types])
    ]
    opened = [START + timedelta(seconds=int(s)) for s in rng.integers(0, SPAN_DAYS * 86400, n)]
    change_type, risk = _pick(rng, CHANGE_TYPES, n), _pick(rng, RISKS, n)
    emergency = rng.random(n) < 0.03
    rows = []
    for i in range(n):
        start = opened[i] + timedelta(days=float(rng.integers(1, 20)))
        end = start + timedelta(hours=float(rng.integers(1, 72)))
        downtime = rng.random() < 0.15
        rows.append(
            (
                f"{CI_TYPES[ci_type[i]][1]}{int(rng.integers(1, 900)):06d}",
                ci_type[i],
                CI_TYPES[ci_type[i]][2][0],
                f"WBS{int(rng.integers(1, 300)):06d}",
                change_ids[i],
                change_type[i],
                risk[i],
                "Y" if emergency[i] else "N",
                "Y" if risk[i] != "Minor Change" else "N",
                _slash_minutes(start),
                _slash_minutes(end),
                _slash_minutes(start) if downtime else "",
                _slash_minutes(end) if downtime else "",
                _slash_minutes(start),
                _slash_minutes(end + timedelta(minutes=float(rng.integers(-60, 240)))),
                _slash_minutes(end + timedelta(days=2)),
                _slash_minutes(opened[i]),
                _slash_minutes(end + timedelta(days=float(rng.integers(0, 10)))),
                _pick(rng, {"Problem": 0.5, "Incident": 0.3, "Interaction": 0.2}, 1)[0],
                str(int(rng.poisson(0.8))),
                str(int(rng.poisson(0.6))),
            )
        )
    return pd.DataFrame(rows, columns=CHANGE_COLUMNS)


def write_bpi2014(tables: dict[str, pd.DataFrame], folder: Path | str) -> dict[str, Path]:
    """The four tables as the public files: `;`-separated, Latin-1, in `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for key, name in FILES.items():
        path = folder / name
        tables[key].to_csv(path, sep=";", index=False, encoding="latin-1")
        written[key] = path
    return written
