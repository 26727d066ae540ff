"""Demo content: synthetic log, demo task set, users and a partly finished review round."""
