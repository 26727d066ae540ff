"""Model assistance through the Anthropic API: a model rater inside the reliability model, and
gap hints for task authors. It sits above catalog, review and coverage; none of them imports it."""
