"""Names of compiled code that no other process gives to other code.

numba names a function's machine code by its module, qualified name, argument types and a count of the
functions its process has compiled (`FunctionIdentity.unique_id`). Code loaded from numba's disk cache
calls the functions it was compiled with by those names, and where this process already holds code
under the same name, the call goes there. Functions that share a qualified name and argument types but
not their code are common in the runtime: the closures one overload factory returns for vexp and for
vtanh, scipy.special's kernels. Two processes with a like history reach the same count, and a cached
gradient compiled to call tanh then calls exp. Each process therefore counts from a random start, and a
forked child from a new one: names made in two processes do not meet.
"""

from __future__ import annotations

import itertools
import os
import secrets

from numba.core.bytecode import FunctionIdentity

_START_BITS = 40  # about 10^12 starts: two processes meet with a chance of about 10^-12 per pair


def count_from_a_random_start() -> None:
    FunctionIdentity._unique_ids = itertools.count(1 + secrets.randbits(_START_BITS))


count_from_a_random_start()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=count_from_a_random_start)
