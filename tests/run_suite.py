"""The whole suite as one pytest process per module (or per part of a large module), a few at a time.

numba keeps the machine code of every function it compiles until its process ends, about 2.5-12 MB a
compile, and the suite compiles thousands. One long-lived worker per core (pytest-xdist) grew past
10 GB; a process per module gives that memory back when the module ends. Each part's line reports its
time and its peak memory, and a failing part prints its whole output.

    python tests/run_suite.py [pytest options]     (what `python3 dev.py test` runs)
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# Modules whose compiles outgrow one process's share of memory, split into this many parts (by item
# number, so each part has every kind of case).
PARTS = {"test_rules.py": 12, "test_runtime_layouts.py": 3, "test_real_code.py": 6, "test_real_numpy.py": 3,
         "test_numpy_spellings.py": 3}
# Run first, being the longest, so that no long part starts last.
FIRST = ("test_rules.py", "test_real_code.py", "test_runtime_layouts.py", "test_real_numpy.py",
         "test_numpy_spellings.py", "test_numpy_programs.py", "test_demo.py", "test_background.py")
SHARD_VARIABLE = "S2SAD_TEST_SHARD"


@dataclass
class Part:
    module: str
    index: int = 0
    count: int = 1
    pid: int = 0  # a forked part
    process: subprocess.Popen | None = None  # a part in a new interpreter, where the platform cannot fork
    log: object = None
    started: float = 0.0
    seconds: float = 0.0
    peak_mb: float | None = None
    returncode: int | None = None
    summary: str = ""
    output: str = ""

    @property
    def label(self) -> str:
        return self.module + (f" [{self.index + 1}/{self.count}]" if self.count > 1 else "")


def parts() -> list[Part]:
    modules = sorted(p.name for p in TESTS.glob("test_*.py"))
    order = [m for m in FIRST if m in modules] + [m for m in modules if m not in FIRST]
    return [Part(m, i, PARTS.get(m, 1)) for m in order for i in range(PARTS.get(m, 1))]


def start(part: Part, pytest_args: list[str]) -> None:
    """A forked copy of this process where the platform forks (it has numba, s2sad and the helpers
    warm_programs compiled already, so each part skips importing and compiling them); a new interpreter
    elsewhere."""
    part.log = tempfile.TemporaryFile(mode="w+")
    part.started = time.perf_counter()
    args = ["-n", "0", "-p", "no:cacheprovider", *pytest_args, str(TESTS / part.module)]
    shard = {SHARD_VARIABLE: f"{part.index}/{part.count}"} if part.count > 1 else {}
    if not hasattr(os, "fork"):
        part.process = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=ROOT,
                                        env={**os.environ, **shard}, stdout=part.log, stderr=subprocess.STDOUT)
        return
    sys.stdout.flush()
    part.pid = os.fork()
    if part.pid == 0:
        code = 1
        try:
            os.environ.update(shard)
            os.dup2(part.log.fileno(), 1)
            os.dup2(part.log.fileno(), 2)
            os.chdir(ROOT)
            import pytest

            code = int(pytest.main(args))
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def finished(part: Part) -> bool:
    """Reap the part's process if it has ended, keeping a forked part's peak memory."""
    if part.process is not None:
        if part.process.poll() is None:
            return False
        part.returncode = part.process.returncode
    else:
        pid, status, usage = os.wait4(part.pid, os.WNOHANG)
        if pid == 0:
            return False
        part.returncode = os.waitstatus_to_exitcode(status)
        part.peak_mb = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    part.seconds = time.perf_counter() - part.started
    part.log.seek(0)
    output = part.log.read()
    part.log.close()
    part.summary = _last_line(output)
    part.output = output
    return True


def _last_line(output: str) -> str:
    lines = [line.strip("= ") for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")


def counts(summary: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for n, what in _COUNT.findall(summary):
        what = {"error": "errors", "warning": "warnings"}.get(what, what)
        found[what] = found.get(what, 0) + int(n)
    return found


def report(part: Part) -> None:
    memory = f"{part.peak_mb / 1024:5.2f} GB" if part.peak_mb is not None else "    ?   "
    print(f"{part.label:<42} {part.seconds:7.1f} s {memory}  {part.summary}", flush=True)
    if part.returncode not in (0, 5):  # 5: every test of the part deselected
        print(part.output, flush=True)


def main(pytest_args: list[str]) -> int:
    import warm_programs  # after suite_env: it imports numba

    jobs = int(os.environ.get("S2SAD_TEST_JOBS", os.cpu_count() or 1))
    forks = hasattr(os, "fork")
    if forks:
        warm_programs.common()
        # What this process holds is moved out of the collector's reach: a forked part's collections then
        # neither walk it nor write to its pages (which would copy them into the part's own memory).
        gc.freeze()
    waiting, running, done = parts(), [], []
    began = time.perf_counter()
    while waiting or running:
        while waiting and len(running) < jobs:
            part = waiting.pop(0)
            start(part, pytest_args)
            running.append(part)
        for part in [p for p in running if finished(p)]:
            running.remove(part)
            done.append(part)
            report(part)
        time.sleep(0.2)
    totals: dict[str, int] = {}
    for part in done:
        for what, n in counts(part.summary).items():
            if what != "deselected":  # the other parts' tests
                totals[what] = totals.get(what, 0) + n
    failed = [p.label for p in done if p.returncode not in (0, 5)]
    peaks = [p.peak_mb for p in done if p.peak_mb is not None]
    print(f"\n{', '.join(f'{n} {what}' for what, n in totals.items())} in {time.perf_counter() - began:.0f} s, "
          f"{len(done)} processes, {jobs} at a time" + (f", largest {max(peaks) / 1024:.2f} GB" if peaks else ""))
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS))
    import suite_env  # noqa: F401  (before numba is imported, in this process and the parts forked from it)

    sys.exit(main(sys.argv[1:]))
