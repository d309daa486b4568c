"""reductions rules."""
