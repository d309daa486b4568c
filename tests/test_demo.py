"""The README's first command runs examples/demo.py: it must keep printing generated code and
gradients that match finite differences (the demo checks each one and exits 1 otherwise)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_demo_runs_and_every_gradient_matches():
    """At numba's default optimization level, as users run it (the rest of the suite compiles at -O0)."""
    env = {name: value for name, value in os.environ.items() if name != "NUMBA_OPT"}
    out = subprocess.run([sys.executable, "examples/demo.py"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "Summary: all gradients match finite differences." in out.stdout
    assert "def loss_grad(W, b, inputs, targets):" in out.stdout  # the generated adjoint is shown
