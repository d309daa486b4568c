import os

import numpy as np
import pytest

import suite_env  # noqa: F401  (sets the environment before numba is imported)

BACKENDS = ["python", "numba"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def numba_caches(monkeypatch):
    """Compile at -O1 for this test (and its subprocesses): there numba writes every function to disk."""
    from numba.core import config

    monkeypatch.setattr(config, "OPT", config._OptLevel(1))  # read each time numba builds its passes
    monkeypatch.setenv("NUMBA_OPT", "1")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _part_key(item) -> str:
    """Cases of one rule or program side by side whatever their backend, so a part compiles the runtime
    helpers that a few rules call rather than every rule's."""
    callspec = getattr(item, "callspec", None)
    case = callspec.id if callspec is not None else item.name
    for backend in BACKENDS:
        case = case.replace(f"{backend}-", "").replace(f"-{backend}", "")
    return case


def pytest_collection_modifyitems(config, items):
    """Under tests/run_suite.py, keep part i of n of a large module (`S2SAD_TEST_SHARD=i/n`): the i-th of n
    runs of its items, ordered by case."""
    shard = os.environ.get("S2SAD_TEST_SHARD")
    if not shard:
        return
    index, count = map(int, shard.split("/"))
    ordered = sorted(items, key=_part_key)
    kept = ordered[len(ordered) * index // count:len(ordered) * (index + 1) // count]
    chosen = set(map(id, kept))
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
    items[:] = [item for item in items if id(item) in chosen]
