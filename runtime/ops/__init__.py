"""Ops that pick candidates from the registry by each group's launch contract."""
