"""numba compiles in a subprocess while the first calls run the same generated code as Python.

numba takes seconds to compile a generated module, even a small one; the same readable source runs
as Python in milliseconds on small inputs. So the first call for some argument types, with no
compiled code for them in memory or in the disk cache, runs the python backend's function, for at
most `PYTHON_SECONDS` (longer where grad's primal ran quickly as Python: `expect_python`):

- if it answers in time, that is the call's result, and a worker process compiles the function into
  the disk cache meanwhile; each later call runs as Python until the compile lands (then it stops and
  runs compiled), and from then on calls run compiled;
- if it does not (a long scalar loop, slow as Python), the run stops and the call compiles in-process,
  as it would without this module: a first call costs at most its budget of Python (plus
  `PRIMAL_SECONDS` for grad's check of its output) more, and time inside long NumPy calls up to
  `IN_NUMPY_FACTOR` times that (`_PythonClock`).

A Python run stops at an alarm (SIGALRM, so only in the main thread; elsewhere calls compile or wait),
at a line of the generated function itself. The generated functions never write into their arguments
(normalize makes copies), so a stopped run cannot disturb the call's compiled run. numba's errors
(types it cannot compile) come from the first call after the worker gives up: that call compiles
in-process and raises what numba says.

Off when `S2SAD_BACKGROUND_COMPILE=0`, without a usable disk cache, at NUMBA_OPT=0 (numba cannot cache a
function that calls another jitted one there) and under NUMBA_DISABLE_JIT. `wait_for_compiles()` blocks
until every compile started so far has landed (benchmarks, and anyone timing steady-state calls).
"""

from __future__ import annotations

import atexit
import itertools
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

VARIABLE = "S2SAD_BACKGROUND_COMPILE"
# How long a first call may run as Python before it compiles in-process instead: less than numba takes
# to compile the smallest gradient, so Python runs only where it answers first.
PYTHON_SECONDS = 0.4
PRIMAL_SECONDS = PYTHON_SECONDS / 4  # a gradient takes several times its primal: a slower primal says "compile"
# Where the primal answered as Python, the gradient may run up to this many times as long (a gradient costs
# several times its primal, and its compile many times more), up to LONGEST_PYTHON_SECONDS.
GRADIENT_TO_PRIMAL = 20
LONGEST_PYTHON_SECONDS = 2.0
# Time inside single long calls into NumPy does not count towards those budgets (compiled code spends it
# too: first touches of large arrays, BLAS), up to this many times the budget in all.
IN_NUMPY_FACTOR = 5
TICK_SECONDS = 0.002


@dataclass(eq=False)
class CompileJob:
    """One function of one generated module, for one tuple of numba argument types."""

    source: str
    stem: str
    function: str
    argtypes: tuple
    load: Callable[[], None]  # puts the compiled code (from the disk cache) into the dispatcher
    uncompiled: Callable[[], Callable]  # the python backend's function
    state: str = "compiling"  # then "ready" (in the disk cache) and "loaded", or "failed"
    done: threading.Event = field(default_factory=threading.Event)  # the worker is done with it
    loading: threading.Lock = field(default_factory=threading.Lock)

    def finish(self, state: str) -> None:
        """The worker's answer: "ready" or "failed"."""
        self.state = state
        self.done.set()

    def install(self) -> None:
        """Load the compiled code into the dispatcher, once, in whichever thread asks first."""
        with self.loading:
            if self.state == "ready":
                try:
                    self.load()
                    self.state = "loaded"
                except Exception:  # the next call compiles in-process, and says what went wrong
                    self.state = "failed"


_LOCK = threading.RLock()
_JOBS: dict[tuple, CompileJob] = {}
_IN_PROCESS: set[str] = set()  # generated modules whose calls compile in-process (see in_process)
_BUDGETS: dict[str, float] = {}  # generated module -> seconds of Python its first calls may run (expect_python)
_worker: "_Worker | None" = None
_failed_to_start = False


def _forget_after_fork() -> None:
    """A forked child has no worker and no thread reading its answers: it starts its own when it needs one."""
    global _worker, _LOCK
    _LOCK = threading.RLock()
    _JOBS.clear()
    _IN_PROCESS.clear()
    _BUDGETS.clear()
    _worker = None


os.register_at_fork(after_in_child=_forget_after_fork)


def enabled() -> bool:
    """Whether compiles may go to a worker process (see the module's docstring)."""
    if os.environ.get(VARIABLE, "1") == "0":
        return False
    from numba.core import config

    return not config.DISABLE_JIT and int(config.OPT) > 0


def job_of(key: tuple) -> CompileJob | None:
    return _JOBS.get(key)


def in_process(module: str) -> bool:
    """Do this generated module's functions compile in-process (Python was too slow on one of them, or
    failed, or no worker could start)?"""
    return module in _IN_PROCESS


def compile_in_process(module: str) -> None:
    _IN_PROCESS.add(module)


def expect_python(module: str, primal_seconds: float) -> None:
    """The primal of `module` ran as Python in `primal_seconds`: its derivative may take proportionally long
    before its first call gives up on Python and compiles in-process."""
    _BUDGETS[module] = min(LONGEST_PYTHON_SECONDS, max(PYTHON_SECONDS, GRADIENT_TO_PRIMAL * primal_seconds))


def first_call(key: tuple, module: str, make: Callable[[], CompileJob], compiled: Callable, args: tuple) -> Any:
    """The first call for `key` (a function, argument types), where `alarm_free()`: Python's answer and a
    compile in the worker, or (Python slow, failing, or no worker) `compiled(*args)`, which compiles
    in-process."""
    job = make()
    outcome, value = run_briefly(job.uncompiled(), args, _BUDGETS.get(module, PYTHON_SECONDS))
    with _LOCK:
        worker = _worker_process() if outcome == "done" else None
        if worker is None:  # slow, an error (numba's result or error is the one to give), or no worker
            compile_in_process(module)
        elif key not in _JOBS:
            _JOBS[key] = job
            worker.send(job)
    return value if worker is not None else compiled(*args)


def run_while_compiling(job: CompileJob, compiled: Callable, args: tuple) -> Any:
    """The uncompiled function's result, or `compiled(*args)` as soon as the compile lands (the Python
    run stops there). Off the main thread, where no alarm can stop it, the call waits for the compile."""
    outcome, value = run_until(job.uncompiled(), args, lambda: job.state in ("ready", "loaded"), 0.01)
    if outcome == "done":
        return value
    if outcome != "stopped":  # an error (numba's result, or its error, is the one to give), or no alarm
        job.done.wait()
    return compiled(*args)


def run_briefly(fn: Callable, args: tuple, seconds: float) -> tuple[str, Any]:
    """`run_until` stopping fn(*args) once it has run `seconds` of Python, or `IN_NUMPY_FACTOR` times that in all."""
    clock = _PythonClock()
    return run_until(fn, args, lambda: clock.tick() > seconds or clock.wall() > IN_NUMPY_FACTOR * seconds,
                     TICK_SECONDS)


class _PythonClock:
    """The seconds a run spends running Python lines, read at each alarm.

    Alarms come every TICK_SECONDS while Python runs; a call into C (a NumPy operation on large arrays)
    holds the alarm until it returns. So an alarm that arrives late measures one such call, and its
    delay is left out: a vectorized function that is slow only because its arrays are large and new is
    about as slow compiled, and is worth running as Python while the worker compiles."""

    def __init__(self, now: Callable[[], float] = time.perf_counter):
        self.now = now
        self.start = self.last = now()
        self.in_calls = 0.0

    def tick(self) -> float:
        now = self.now()
        self.in_calls += max(0.0, now - self.last - 2 * TICK_SECONDS)
        self.last = now
        return now - self.start - self.in_calls

    def wall(self) -> float:
        return self.now() - self.start


class _Stopped(BaseException):
    """Raised at a line of generated code whose run is no longer wanted."""


def alarm_free() -> bool:
    """Can this thread set an alarm to stop a Python run? Only the main thread takes signals, and only
    while the program has no alarm of its own."""
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer") \
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None) \
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def run_until(fn: Callable, args: tuple, give_up: Callable[[], bool], every: float) -> tuple[str, Any]:
    """("done", fn(*args)), or ("stopped", None) once `give_up()` holds at an alarm (every `every` seconds),
    or ("error", exception), or ("unavailable", None) where this thread cannot take alarms.

    The alarm stops the run only where it finds it in the generated function's own lines (the signal
    handler gets the frame it interrupts): never inside a callee, such as numba compiling a helper the
    python backend calls, whose state an exception in the middle could leave broken. So it runs in the
    caller's thread, at full speed; only the main thread takes signals, and only one alarm can be set."""
    if not alarm_free():
        return "unavailable", None
    filename = fn.__code__.co_filename

    def on_alarm(signum, frame):
        if give_up() and frame is not None and frame.f_code.co_filename == filename:
            raise _Stopped

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, every, min(every, 0.002))
    try:
        with np.errstate(all="ignore"):  # as the compiled code will run: no warning for an overflow
            return "done", fn(*args)
    except _Stopped:
        return "stopped", None
    except Exception as exc:
        return "error", exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Block until every compile handed to the background worker so far has landed (or failed, so that
    the next call compiles in-process and raises numba's error). False if `timeout` seconds pass first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _LOCK:
        jobs = list(_JOBS.values())
    for job in jobs:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not job.done.wait(left):
            return False
        job.install()
    return True


class _Worker:
    """One process compiling the jobs sent to it, one after another.

    Jobs go down its stdin pickled (a pipe between this process and its own child: nothing on disk is
    unpickled); it answers `<id> ok` or `<id> failed` on a line each, and a thread here loads each
    compile that is ok."""

    def __init__(self):
        from s2sad.cache import cache_dir

        env = dict(os.environ, **{VARIABLE: "0"})
        folder = cache_dir()
        if folder is not None:
            env["S2SAD_CACHE_DIR"] = str(folder)
        paths = [p for p in sys.path if p] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from s2sad.backend import serve_compiles; serve_compiles()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.pending: dict[int, CompileJob] = {}
        self.ids = itertools.count()
        threading.Thread(target=self._read_answers, name="s2sad compile answers", daemon=True).start()

    def send(self, job: CompileJob) -> None:
        job_id = next(self.ids)
        self.pending[job_id] = job
        try:
            pickle.dump((job_id, job.source, job.stem, job.function, job.argtypes), self.process.stdin)
            self.process.stdin.flush()
        except (OSError, pickle.PicklingError):
            self.pending.pop(job_id, None)
            job.finish("failed")

    def _read_answers(self) -> None:
        for line in self.process.stdout:
            job_id, answer = line.decode().split()
            job = self.pending.pop(int(job_id))
            job.finish("ready" if answer == "ok" else "failed")
            job.install()  # unless a call got to it first
        for job in list(self.pending.values()):  # the worker is gone
            job.finish("failed")
        self.pending.clear()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()  # numba writes each cache file whole (to a temporary name, then renamed)
            self.process.wait()


def _worker_process() -> _Worker | None:
    """The running worker, started if need be; None if it cannot start (calls then compile in-process)."""
    global _worker, _failed_to_start
    if _failed_to_start:
        return None
    if _worker is None or _worker.process.poll() is not None:
        try:
            _worker = _Worker()
        except OSError:
            _failed_to_start = True
            return None
    return _worker


@atexit.register
def _stop_worker() -> None:
    """A compile still running when the program ends is not finished: no process outlives its user."""
    if _worker is not None:
        _worker.stop()


def serve(compile_one: Callable[[str, str, str, tuple], None]) -> None:
    """The worker's loop: compile each job read from stdin with `compile_one(source, stem, function,
    argtypes)`, answering on the real stdout; anything else printed goes to stderr."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    while True:
        try:
            job_id, source, stem, function, argtypes = pickle.load(sys.stdin.buffer)
        except EOFError:
            return
        try:
            compile_one(source, stem, function, argtypes)
            answer = "ok"
        except Exception:
            answer = "failed"
        answers.write(f"{job_id} {answer}\n")
