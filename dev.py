#!/usr/bin/env python3
"""Set-up and entry points for a fresh checkout; needs only Python 3.11+.

    python3 dev.py demo    # make .venv, install s2sad, run the demo
    python3 dev.py test    # make .venv, install s2sad with test extras, run the whole test suite

The suite runs one process per test module (tests/run_suite.py), which gives numba's memory back as
each module ends. Extra arguments after `test` go to pytest: options apply to every module, and a
test path or node id runs just that, in one pytest process.
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")


def ensure_venv():
    if sys.version_info < (3, 11):
        sys.exit("s2sad needs Python 3.11 or newer")
    if not PY.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    stamp = VENV / ".s2sad-installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != want:
        subprocess.check_call([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"])
        subprocess.check_call([str(PY), "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]"])
        stamp.write_text(want)


def main(argv):
    if not argv or argv[0] not in ("demo", "test"):
        sys.exit(__doc__)
    ensure_venv()
    if argv[0] == "demo":
        cmd = [str(PY), str(ROOT / "examples" / "demo.py"), *argv[1:]]
    elif any(Path(arg.split("::")[0]).exists() for arg in argv[1:] if not arg.startswith("-")):
        cmd = [str(PY), "-m", "pytest", *argv[1:]]
    else:
        cmd = [str(PY), str(ROOT / "tests" / "run_suite.py"), *argv[1:]]
    sys.exit(subprocess.call(cmd, cwd=ROOT))


if __name__ == "__main__":
    main(sys.argv[1:])
