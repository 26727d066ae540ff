"""Review rounds: opening them and giving their tasks to experts, claims and reservations,
the order tasks are offered in."""
