"""Simulator realism measured against the logs: first, a log's own behaviour profile
(ping-pong, waits for the user, reassignments, case length, cancel and reopen rates, the
activity distribution) with intervals and a real-versus-real noise floor."""
