"""The lead's dashboard: a round's figures composed from the gate, ratings, rounds and repair."""
