"""Append-only provenance ledger: where every artifact and field came from."""
