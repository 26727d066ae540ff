"""Which attribute is a log's assignment group and which activities mean waiting for the user,
a cancellation or a reopening: named per log, by the preset it was imported with.

The names were read from the data (BPI 2013 and the demo's synthetic logs, which reuse the
public logs' vocabularies); docs/realism.md lists where each comes from.

>>> vocabulary_for("bpi2013", ["Involved ST", "ST Level"]).wait_user
('Accepted-Wait - User',)
>>> vocabulary_for(None, ["priority", "assignment_group"]).group
'assignment_group'
>>> vocabulary_for(None, ["priority"]).group is None
True
"""

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Vocabulary:
    """A log's names: `group` is a role attribute (without `role:`); the others activities."""

    group: str | None = None
    wait_user: tuple[str, ...] = ()
    cancel: tuple[str, ...] = ()
    reopen: tuple[str, ...] = ()
    close: tuple[str, ...] = ()  # activities that close a case (resolve or close it)
    # statuses whose leaving for an open one reopens the case, where no activity says so
    reopen_from: tuple[str, ...] = ()
    source: str = "none"

    def as_dict(self) -> dict:
        return {
            "group_attribute": self.group,
            "wait_user": list(self.wait_user),
            "cancel": list(self.cancel),
            "reopen": list(self.reopen),
            "close": list(self.close),
            "reopen_from": list(self.reopen_from),
            "source": self.source,
        }


PRESET_VOCABULARIES = {
    # Volvo IT VINST: Activity is "Status-Sub Status"; the support team is "Involved ST"
    "bpi2013": Vocabulary(
        group="Involved ST",
        wait_user=("Accepted-Wait - User",),
        cancel=("Completed-Cancelled",),
        close=("Completed-Resolved", "Completed-Closed"),
    ),
    # Rabobank: IncidentActivity_Type; no activity says the case waits for its user
    "bpi2014": Vocabulary(group="Assignment Group", reopen=("Reopen",), close=("Closed",)),
    # ServiceNow (UCI): incident_state; a reopened incident goes from Resolved back to Active
    # (its `reopen_count` counts these)
    "uci-incidents": Vocabulary(
        group="assignment_group",
        wait_user=("Awaiting User Info",),
        close=("Resolved", "Closed"),
        reopen_from=("Resolved",),
    ),
    # Helpdesk: "Wait" does not say for whom, so no wait-user status
    "helpdesk": Vocabulary(group="workgroup"),
}
# role attributes that hold an assignment group in the logs this project reads
GROUP_NAMES = ("Involved ST", "Assignment Group", "assignment_group", "workgroup")


def vocabulary_for(
    preset: str | None,
    roles: list[str],
    *,
    group: str | None = None,
    wait_user: tuple[str, ...] | None = None,
    cancel: tuple[str, ...] | None = None,
    reopen: tuple[str, ...] | None = None,
    close: tuple[str, ...] | None = None,
) -> Vocabulary:
    """The vocabulary of a log imported with `preset` whose role attributes are `roles`; the
    keyword arguments, when given, replace the preset's names. A group attribute the log does
    not have is dropped. Raises ValueError for an explicit `group` that is not a role of it."""
    found = PRESET_VOCABULARIES.get(preset or "")
    vocab = replace(found, source=f"preset {preset}") if found else Vocabulary()
    if vocab.group not in roles:
        known = [name for name in GROUP_NAMES if name in roles]
        vocab = replace(vocab, group=known[0] if known else None)
    if group is not None:
        if group not in roles:
            shown = ", ".join(roles) or "none"
            raise ValueError(f"--group {group!r} is not a role attribute of the log ({shown})")
        vocab = replace(vocab, group=group)
    given = {"wait_user": wait_user, "cancel": cancel, "reopen": reopen, "close": close}
    given = {k: tuple(v) for k, v in given.items() if v is not None}
    if "reopen" in given:  # the named activities replace the preset's definition whole
        given["reopen_from"] = ()
    if given or group is not None:
        vocab = replace(
            vocab, **given, source=f"{vocab.source} and options".removeprefix("none and ")
        )
    return vocab
