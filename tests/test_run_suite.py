"""tests/run_suite.py runs a large module in parts: together the parts must run each test exactly once."""

import os
import subprocess
import sys
from pathlib import Path

import run_suite

TESTS = Path(__file__).resolve().parent


def _collected(module: str, shard: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != run_suite.SHARD_VARIABLE}
    if shard:
        env[run_suite.SHARD_VARIABLE] = shard
    out = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", "--collect-only",
                          str(TESTS / module)], cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_parts_of_a_split_module_run_every_test_once():
    module, count = "test_rules.py", 3
    whole = _collected(module, None)
    parts = [_collected(module, f"{i}/{count}") for i in range(count)]
    assert all(parts), "a part with no tests"
    assert sorted(sum(parts, [])) == sorted(whole)


def test_every_module_is_run():
    listed = {part.module for part in run_suite.parts()}
    assert listed == {p.name for p in TESTS.glob("test_*.py")}
    assert all(run_suite.PARTS[m] == sum(p.module == m for p in run_suite.parts()) for m in run_suite.PARTS)


def test_summary_counts():
    assert run_suite.counts("3 failed, 120 passed, 2 skipped, 1 error in 4.2s") == {
        "failed": 3, "passed": 120, "skipped": 2, "errors": 1}
