"""Expert review, one subpackage per sub-area: rubrics, the approval gate, rounds, ratings,
adjudication and repair, the lead's dashboard, model assistance on top."""
