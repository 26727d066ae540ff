"""itsmreview: practitioner review of ITSM agent-benchmark tasks next to real process logs."""

__version__ = "0.1.0"
