"""Approved task sets, one module per output format."""
