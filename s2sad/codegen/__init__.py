"""Code generation: normalized IR + analysis -> Python source text."""
