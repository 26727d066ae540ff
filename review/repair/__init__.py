"""Adjudication and repair: a lead's decision on a task the gate could not decide, the repair
loop that sends tasks back to their authors, experts' proposed resolutions."""
