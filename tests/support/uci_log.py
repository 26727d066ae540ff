"""A small log in the layout of the UCI "Incident management process enriched event log"
(ServiceNow audit rows, Amaral et al. 2018): one row per update of an incident, all 36 columns
of the public file, times day first with the month unpadded (`29/2/2016 01:16`), `?` where
the source has no value, and the counters ServiceNow keeps on every row: `reassignment_count` (the
assignment group changed) and `reopen_count` (Resolved back to Active), as of that update.

As in the public file, not every update is a row: with `lost` > 0 a share of updates is left
out while the counters still count them, so the log's counter and the count over its rows
disagree on some cases, as they do in the real log.
"""

import csv
import random
from datetime import datetime, timedelta
from pathlib import Path

COLUMNS = [
    "number",
    "incident_state",
    "active",
    "reassignment_count",
    "reopen_count",
    "sys_mod_count",
    "made_sla",
    "caller_id",
    "opened_by",
    "opened_at",
    "sys_created_by",
    "sys_created_at",
    "sys_updated_by",
    "sys_updated_at",
    "contact_type",
    "location",
    "category",
    "subcategory",
    "u_symptom",
    "cmdb_ci",
    "impact",
    "urgency",
    "priority",
    "assignment_group",
    "assigned_to",
    "knowledge",
    "u_priority_confirmation",
    "notify",
    "problem_id",
    "rfc",
    "vendor",
    "caused_by",
    "closed_code",
    "resolved_by",
    "resolved_at",
    "closed_at",
]


def _stamp(moment: datetime) -> str:
    return f"{moment.day}/{moment.month}/{moment.year} {moment.hour:02d}:{moment.minute:02d}"


def generate_uci(incidents: int = 200, *, seed: int = 7, lost: float = 0.0) -> list[dict]:
    """The rows of `incidents` incidents, in the public file's order (by number, then time)."""
    rng = random.Random(seed)
    groups = [f"Group {n}" for n in range(1, 30)]
    rows = []
    for number in range(1, incidents + 1):
        at = datetime(2016, 2, 29, 1, 16) + timedelta(hours=rng.randrange(24 * 90))
        opened = at
        group = rng.choice(groups) if rng.random() < 0.8 else None
        counters = {"reassignment_count": 0, "reopen_count": 0}
        updates = []

        def update(state: str) -> None:
            updates.append((state, group, dict(counters)))  # noqa: B023 (read at once)

        update("New")
        reopened = False
        while True:
            roll = rng.random()
            if roll < 0.25 and group is not None:
                group = rng.choice([g for g in groups if g != group])
                counters["reassignment_count"] += 1
                update("Active")
            elif roll < 0.35:
                update("Awaiting User Info")
            elif roll < 0.45:
                group = group or rng.choice(groups)  # a first assignment is no reassignment
                update("Active")
            else:
                update("Resolved")
                if not reopened and rng.random() < 0.2:
                    reopened = True
                    counters["reopen_count"] += 1
                    update("Active")
                    continue
                update("Closed")
                break
        for index, (state, held, kept) in enumerate(updates):
            at += timedelta(minutes=rng.randrange(5, 600))
            if 0 < index < len(updates) - 1 and rng.random() < lost:
                continue  # an update the export does not hold; its counters still count
            resolved = state in ("Resolved", "Closed")
            rows.append(
                {
                    "number": f"INC{number:07d}",
                    "incident_state": state,
                    "active": "false" if state == "Closed" else "true",
                    "reassignment_count": str(kept["reassignment_count"]),
                    "reopen_count": str(kept["reopen_count"]),
                    "sys_mod_count": str(index),
                    "made_sla": "true",
                    "caller_id": f"Caller {rng.randrange(1, 5000)}",
                    "opened_by": f"Opened by {rng.randrange(1, 400)}",
                    "opened_at": _stamp(opened),
                    "sys_created_by": "?",
                    "sys_created_at": "?",
                    "sys_updated_by": f"Updated by {rng.randrange(1, 800)}",
                    "sys_updated_at": _stamp(at),
                    "contact_type": rng.choice(["Phone", "Phone", "Self service", "Email"]),
                    "location": f"Location {rng.randrange(1, 200)}",
                    "category": f"Category {rng.randrange(1, 60)}",
                    "subcategory": f"Subcategory {rng.randrange(1, 250)}",
                    "u_symptom": f"Symptom {rng.randrange(1, 500)}",
                    "cmdb_ci": "?",
                    "impact": "2 - Medium",
                    "urgency": "2 - Medium",
                    "priority": rng.choice(["3 - Moderate", "3 - Moderate", "2 - High"]),
                    "assignment_group": held or "?",
                    "assigned_to": f"Resolver {rng.randrange(1, 230)}" if held else "?",
                    "knowledge": "true",
                    "u_priority_confirmation": "false",
                    "notify": "Do Not Notify",
                    "problem_id": "?",
                    "rfc": "?",
                    "vendor": "?",
                    "caused_by": "?",
                    "closed_code": f"code {rng.randrange(1, 17)}" if resolved else "?",
                    "resolved_by": f"Resolved by {rng.randrange(1, 220)}" if resolved else "?",
                    "resolved_at": _stamp(at) if resolved else "?",
                    "closed_at": _stamp(at + timedelta(days=5)),
                }
            )
    return rows


def write_uci(rows: list[dict], path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path
