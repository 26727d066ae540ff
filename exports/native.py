"""Native JSONL: one task per line, as the catalog holds it, with the export's record of it
under the key `itsmreview` (version, content hash, decision), which an import ignores."""

from itsmreview.catalog.native import EXPORT_RECORD as EXPORT_KEY
from itsmreview.exports.bundle import jsonl

__all__ = ["EXPORT_KEY", "PATH", "render"]
PATH = "tasks/native.jsonl"


def render(tasks: list[dict]) -> dict[str, str]:
    """{relative path: text} for native task dicts carrying their export record."""
    return {PATH: jsonl(tasks)}
