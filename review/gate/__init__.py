"""The approval gate: agreement statistics and the approval rule (pure), a round's ratings as
reliability data, the gate applied to a round's tasks, its stored counts, the applier of
submitted ratings."""
