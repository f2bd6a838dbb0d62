"""Annotated programs shared by tests, benchmarks and lessons: the model zoo (examples) and
the training steps (training)."""
