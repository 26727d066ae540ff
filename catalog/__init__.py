"""Task catalog: benchmark tasks, their versions and simulated-actor transcripts."""
