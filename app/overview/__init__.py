"""The home page's platform-wide counts: event logs, tasks, rounds, ratings."""
