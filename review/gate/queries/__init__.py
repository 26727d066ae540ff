"""The gate's statements: `reads` (a round's ratings, statuses and checks; the decisions
stored) and `pending` (submitted ratings queued for the gate)."""
