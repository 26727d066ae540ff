"""Local user accounts and roles."""
