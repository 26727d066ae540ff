"""Task and transcript formats. Each reader maps a benchmark's files into native tasks and
keeps the original document, so the matching writer reproduces the input."""

from itsmreview.catalog.formats.registry import (
    FORMATS,
    TRANSCRIPT_FORMATS,
    detect_format,
    export_tasks,
    read_tasks,
    read_transcripts,
)

__all__ = [
    "FORMATS",
    "TRANSCRIPT_FORMATS",
    "detect_format",
    "export_tasks",
    "read_tasks",
    "read_transcripts",
]
