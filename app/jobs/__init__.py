"""A job queue in the database: background work that leaves the web process."""
