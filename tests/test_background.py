"""A cold first call runs the generated code as Python while a worker process compiles it (s2sad.background).

Each scenario runs in fresh processes with a cache of their own, as a user's first session would: the
test suite itself compiles in-process (tests/suite_env.py turns the worker off)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.special

import s2sad
from s2sad import background
from background_functions import ellipk_of_length, logistic_loss
from helpers import assert_close, fd_grad

HERE = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent("""
    import json, signal, threading
    import numpy as np, s2sad
    from s2sad import background
    from background_functions import ellipk_of_length, logistic_loss, long_loop, sum_of_squares

    def job(function):
        return next((j for j in background._JOBS.values() if j.function == function), None)

    out = {}
    W, b = np.array([0.1, 0.2, 0.3]), 0.1
    inputs = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
    targets = np.array([True, True, False, True])
    g = s2sad.grad(logistic_loss, (0, 1))
    first = g(W, b, inputs, targets)
    found = job("logistic_loss_grad")
    out["loss_first_uncompiled"] = found is not None  # a job: Python answered, and the worker compiles
    out["waited"] = s2sad.wait_for_compiles(timeout=600)
    out["loss_state"] = None if found is None else found.state
    second = g(W, b, inputs, targets)
    out["loss"] = [list(first[0]), first[1], list(second[0]), second[1]]

    x = 0.5
    out["long_loop"] = s2sad.grad(long_loop)(x)
    found = job("long_loop_grad")
    out["long_loop_job"] = None if found is None else found.state
    out["long_loop_compiled"] = bool(s2sad.grad(long_loop).__s2sad_transform__.compiled("wrapper").signatures)
    out["alarm_restored"] = signal.getsignal(signal.SIGALRM) == signal.SIG_DFL and \
        signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)

    x = np.array([0.5, -1.0, 2.0])
    h = s2sad.grad(ellipk_of_length)
    out["ellipk_first"] = list(h(x))
    s2sad.wait_for_compiles(timeout=600)
    try:
        h(x)
        out["ellipk_second"] = "no error"
    except s2sad.UnsupportedError as exc:
        out["ellipk_second"] = str(exc)
    squares = s2sad.grad(sum_of_squares)
    found = {}
    runner = threading.Thread(target=lambda: found.update(thread=list(squares(np.array([1.0, -2.0])))))
    runner.start()
    runner.join()  # off the main thread no alarm can stop Python: that call compiles in-process
    out["squares_thread"] = [found["thread"], job("sum_of_squares_grad") is None]
    out["squares_main"] = [squares(np.array([[1.0, -2.0]])).tolist(), job("sum_of_squares_grad") is not None]
    out["worker_pid"] = background._worker.process.pid if background._worker is not None else None
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory):
    """The script above run twice against one new cache: a first session, then a later one."""
    folder = tmp_path_factory.mktemp("background")
    script = folder / "session.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, S2SAD_CACHE_DIR=str(folder / "cache"), S2SAD_BACKGROUND_COMPILE="1", NUMBA_OPT="1",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script)], cwd=HERE, env=env, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return runs


def _loss_args():
    W, b = np.array([0.1, 0.2, 0.3]), 0.1
    inputs = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
    return [W, b, inputs, np.array([True, True, False, True])]


def test_the_first_call_runs_uncompiled_and_later_calls_compiled_with_the_same_gradient(two_sessions):
    first = two_sessions[0]
    assert first["loss_first_uncompiled"] and first["waited"] and first["loss_state"] == "loaded"
    dW, db, dW2, db2 = np.array(first["loss"][0]), first["loss"][1], np.array(first["loss"][2]), first["loss"][3]
    args = _loss_args()
    assert_close(dW, fd_grad(logistic_loss, args, 0))
    assert_close(db, fd_grad(logistic_loss, args, 1))
    np.testing.assert_allclose(dW2, dW, rtol=1e-12)
    assert db2 == pytest.approx(db, rel=1e-12)


def test_a_later_session_loads_the_compiled_code_and_runs_nothing_uncompiled(two_sessions):
    later = two_sessions[1]
    assert not later["loss_first_uncompiled"] and later["loss_state"] is None
    np.testing.assert_allclose(np.array(later["loss"][0]), np.array(two_sessions[0]["loss"][2]), rtol=1e-12)
    assert later["long_loop_job"] is None  # compiled, and loaded from disk
    assert later["long_loop"] == pytest.approx(1.0, rel=1e-6)


def test_where_python_is_slow_the_first_call_compiles_in_process_and_the_python_run_stops(two_sessions):
    first = two_sessions[0]
    assert first["long_loop"] == pytest.approx(1.0, rel=1e-6)  # d/dx of 10^8 terms x * 1e-8
    assert first["long_loop_job"] is None and first["long_loop_compiled"]
    assert first["alarm_restored"]  # the alarm that stopped the Python run is gone


def test_numbas_error_comes_from_the_first_call_after_the_worker_gives_up(two_sessions):
    x = np.array([0.5, -1.0, 2.0])
    for run in two_sessions:
        c = scipy.special.ellipk(0.25)
        np.testing.assert_allclose(run["ellipk_first"], 2.0 * c * x, rtol=1e-12)  # Python runs it
        path = HERE / "background_functions.py"
        line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "c = scipy.special.ellipk" in text)
        assert run["ellipk_second"].startswith(f"{path}:{line}:5: numba cannot compile the code generated for "
                                               "this line (`c = scipy.special.ellipk(")


def test_the_worker_ends_with_its_process(two_sessions):
    for run in two_sessions:
        assert run["worker_pid"] is not None
        with pytest.raises(ProcessLookupError):
            os.kill(run["worker_pid"], 0)


def test_off_in_this_suite_and_by_its_variable(monkeypatch):
    """The suite compiles in-process (errors at the first call, as the rest of the tests expect)."""
    assert not background.enabled()
    monkeypatch.setenv("S2SAD_BACKGROUND_COMPILE", "1")
    from numba.core import config

    assert background.enabled() == (int(config.OPT) > 0 and not config.DISABLE_JIT)
    monkeypatch.setenv("S2SAD_BACKGROUND_COMPILE", "0")
    assert not background.enabled()
    g = s2sad.grad(ellipk_of_length)
    with pytest.raises(s2sad.UnsupportedError):
        g(np.array([0.5, -1.0, 2.0]))
    assert not any(j.function == "ellipk_of_length_grad" for j in background._JOBS.values())


def test_wait_for_compiles_with_nothing_started_returns_at_once():
    assert s2sad.wait_for_compiles(timeout=0.0)


def test_a_first_call_off_the_main_thread_compiles_and_leaves_the_main_threads_calls_as_they_were(two_sessions):
    first = two_sessions[0]
    assert first["squares_thread"] == [[2.0, -4.0], True]  # compiled in-process, no job
    assert first["squares_main"] == [[[2.0, -4.0]], True]  # a new signature from the main thread: Python first


def test_code_compiled_with_the_worker_off_is_loaded_by_a_later_session_with_it_on(tmp_path):
    """A session that compiles in-process (S2SAD_BACKGROUND_COMPILE=0) marks the code as on disk, so a later
    session with the worker on loads it instead of running Python and compiling again."""
    script = tmp_path / "session.py"
    script.write_text(textwrap.dedent("""
        import json, numpy as np, s2sad
        from s2sad import background
        from background_functions import sum_of_squares
        g = s2sad.grad(sum_of_squares)(np.array([1.0, -2.0]))
        ran_python = any(j.function == "sum_of_squares_grad" for j in background._JOBS.values())
        print(json.dumps([g.tolist(), ran_python]))
    """))
    env = dict(os.environ, S2SAD_CACHE_DIR=str(tmp_path / "cache"), NUMBA_OPT="1",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    env.pop("NUMBA_CACHE_DIR", None)
    outcomes = []
    for worker in ("0", "1"):
        proc = subprocess.run([sys.executable, str(script)], cwd=HERE, env=dict(env, S2SAD_BACKGROUND_COMPILE=worker),
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr
        outcomes.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert outcomes == [[[2.0, -4.0], False], [[2.0, -4.0], False]]  # d/dx sum(x * x) = 2x


def test_a_python_run_is_timed_by_its_python_lines_not_by_one_long_call_into_c():
    """A late alarm measures one call into C, which compiled code would make too: it does not count
    against the budget, up to IN_NUMPY_FACTOR times it in all."""
    from background_functions import one_long_call, python_for

    budget = 0.05
    assert background.run_briefly(python_for, (0.3,), budget)[0] == "stopped"
    n = _c_iterations_for(2 * budget)  # stopped by a wall clock; within the cap (5x) with room to spare
    assert background.run_briefly(one_long_call, (n,), budget) == ("done", sum(range(n)))
    n = _c_iterations_for(2 * background.IN_NUMPY_FACTOR * budget)
    assert background.run_briefly(one_long_call, (n,), budget)[0] == "stopped"


def test_the_python_clock_leaves_out_the_delay_of_late_alarms():
    """Alarms every TICK_SECONDS; one 0.1 s late (a call into C held it) adds nothing but its tick."""
    tick = background.TICK_SECONDS
    times = iter([0.0, tick, 2 * tick, 2 * tick + 0.1, 3 * tick + 0.1])
    clock = background._PythonClock(lambda: next(times))
    seen = [clock.tick() for _ in range(4)]
    assert seen[:2] == pytest.approx([tick, 2 * tick])
    assert seen[2] == pytest.approx(4 * tick)  # the late alarm: 0.1 s, less the 2 ticks any gap may take
    assert seen[3] == pytest.approx(5 * tick)


def _c_iterations_for(seconds: float) -> int:
    """How long a range `sum` runs for about `seconds` on this machine."""
    import time

    t = time.perf_counter()
    sum(range(1_000_000))
    return int(1_000_000 * seconds / (time.perf_counter() - t))


def test_a_gradient_may_run_as_python_in_proportion_to_its_primal(monkeypatch):
    """A primal that answered quickly as Python lets its gradient's first call run as Python longer (a
    GMM's gradient takes 0.6 s where its compile takes a minute), within LONGEST_PYTHON_SECONDS."""
    monkeypatch.setattr(background, "_BUDGETS", {})
    monkeypatch.setattr(background, "_IN_PROCESS", set())
    for module, primal in (("fast", 0.001), ("proportional", 0.05), ("long", 0.5)):
        background.expect_python(module, primal)
    assert background._BUDGETS == pytest.approx({
        "fast": background.PYTHON_SECONDS, "proportional": background.GRADIENT_TO_PRIMAL * 0.05,
        "long": background.LONGEST_PYTHON_SECONDS})
    budgets = []
    monkeypatch.setattr(background, "run_briefly", lambda fn, args, seconds: budgets.append(seconds) or ("stopped", None))
    job = type("Job", (), {"uncompiled": lambda self: None})()
    for module in ("proportional", "unseen"):
        assert background.first_call((module, ()), module, lambda: job, lambda: "compiled", ()) == "compiled"
    assert budgets == pytest.approx([background.GRADIENT_TO_PRIMAL * 0.05, background.PYTHON_SECONDS])
    assert background.in_process("proportional")  # Python ran out of time: its calls compile in-process
