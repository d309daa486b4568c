"""linalg rules."""
