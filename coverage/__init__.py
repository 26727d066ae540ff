"""Event-log import, variants, roles, coverage metrics and gaps."""
