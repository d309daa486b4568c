"""The public transformations: grad, value_and_grad, vjp, jit, differentiate, source."""

from __future__ import annotations

import functools
import inspect
import numbers
import textwrap
import types
from typing import Any, Callable, Sequence

import numpy as np

from s2sad import rules
from s2sad.backend import compile_function, load_module
from s2sad.codegen.module import Generated, vjp_module
from s2sad.frontend import unwrap
from s2sad.normalize import normalize
from s2sad.runtime import stop_gradient  # noqa: F401  (re-exported)

DEFAULT_BACKEND = "numba"


def _as_function(fun: Callable) -> types.FunctionType:
    """A Python function with source: `fun` itself, or a one-line wrapper around a primitive."""
    inner = unwrap(fun)
    if isinstance(inner, types.FunctionType):
        return inner
    found = rules.lookup_object(fun)
    if found is None:
        raise TypeError(f"s2sad can only transform Python functions and known primitives, got {fun!r}")
    _, spelled = found
    n = len(found[0].template().params) - 2 if found[0].differentiable else 1
    args = ", ".join("xyzw"[:n])
    name = spelled.split(".")[-1]
    source = f"import math\nimport numpy as np\n\n\ndef {name}({args}):\n    return {spelled}({args})\n"
    return getattr(load_module(source, f"primitive_{name}", "python"), name)


def _normalize_argnums(fn: types.FunctionType, argnums, params: list[str]) -> tuple[int, ...]:
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise ValueError("argnums must name at least one argument")
    out = []
    for n in nums:
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"argnums must be ints, got {n!r}")
        if not -len(params) <= n < len(params):
            raise ValueError(f"argnums={argnums!r} is out of range: {fn.__name__} takes {len(params)} "
                             f"argument(s) ({', '.join(params)})")
        out.append(n % len(params))
    if len(set(out)) != len(out):
        raise ValueError(f"argnums={argnums!r} names the same argument twice")
    return tuple(out)


def _check_float(value, name: str, index: int, fname: str, what: str):
    kind = type(value)
    if kind is float or (kind is np.ndarray and value.dtype.kind == "f"):
        return  # the common case, kept cheap: this runs on every call
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral)):
        raise TypeError(f"{what} requires float inputs, but argument {index} (`{name}`) of {fname} is "
                        f"{type(value).__name__} {value!r}; pass a float (e.g. {float(value)!r}) or mark it "
                        "non-differentiable by leaving it out of argnums")
    if isinstance(value, np.ndarray) and value.dtype.kind not in "fc":
        raise TypeError(f"{what} requires float inputs, but argument {index} (`{name}`) of {fname} is an "
                        f"array of dtype {value.dtype}; convert it with .astype(float) or leave it out of argnums")
    if not isinstance(value, (numbers.Real, np.ndarray, np.floating)):
        raise TypeError(f"argument {index} (`{name}`) of {fname} is a {type(value).__name__}; "
                        "s2sad differentiates with respect to floats and NumPy arrays")


class _Reverse:
    """The compiled primal and vjp of one function for one set of differentiated arguments."""

    def __init__(self, fun: Callable, argnums, has_aux: bool, backend: str, what: str):
        self.fun = _as_function(fun)
        self.signature = inspect.signature(self.fun)
        self.params = list(self.signature.parameters)
        self.argnums = _normalize_argnums(self.fun, argnums, self.params)
        self.single = isinstance(argnums, int)
        self.has_aux = has_aux
        self.backend = backend
        self.what = what
        self._generated: Generated | None = None
        self._vjp = None
        self._primal = None

    @property
    def generated(self) -> Generated:
        if self._generated is None:
            fn_ir = normalize(self.fun)
            if self.has_aux and (not fn_ir.returns_tuple or len(fn_ir.outputs) != 2):
                raise TypeError(f"has_aux=True needs {self.fun.__name__} to return a pair (value, aux)")
            if not self.has_aux and fn_ir.returns_tuple:
                raise TypeError(f"{self.fun.__name__} returns a tuple; {self.what} needs a single output "
                                "(use has_aux=True to return (value, aux))")
            wrt = [fn_ir.params[i] for i in self.argnums]
            self._generated = vjp_module(fn_ir, wrt)
        return self._generated

    def bind(self, args, kwargs) -> tuple:
        if kwargs or len(args) != len(self.params):
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = tuple(bound.arguments.values())
        return args

    def check(self, args):
        for i in self.argnums:
            _check_float(args[i], self.params[i], i, self.fun.__name__, self.what)

    @property
    def vjp_fn(self):
        if self._vjp is None:
            g = self.generated
            self._vjp = compile_function(g.source, g.stem, g.vjp, self.backend)
        return self._vjp

    @property
    def primal_fn(self):
        if self._primal is None:
            g = self.generated
            self._primal = compile_function(g.source, g.stem, g.primal, self.backend)
        return self._primal

    def n_outputs(self) -> int:
        return 2 if self.has_aux else 1

    def scalar_vjp(self, args):
        """(outputs..., grads...) for a scalar output seeded with 1.0; TypeError otherwise."""
        try:
            result = self.vjp_fn(*args, 1.0)
        except Exception:
            out = self.primal_fn(*args)
            self.check_scalar(out[0] if self.has_aux else out)
            raise
        self.check_scalar(result[0])
        return result

    def check_scalar(self, value):
        if isinstance(value, np.ndarray) and value.ndim != 0:
            shape = np.shape(value)
            raise TypeError(
                f"{self.what} requires a scalar output, but {self.fun.__name__} returned an array of shape "
                f"{shape}. Use vmap({self.what}(f)) for per-example gradients, jacrev(f) for the Jacobian, "
                "or reduce the output (e.g. .sum()) first.")

    def grads(self, result):
        grads = result[self.n_outputs():]
        return grads[0] if self.single else tuple(grads)


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         backend: str = DEFAULT_BACKEND) -> Callable:
    """Gradient of a scalar-valued `fun` with respect to the argument(s) `argnums`.

    Returns a function with `fun`'s signature that returns the gradient (a tuple when
    `argnums` is a tuple), or `(gradient, aux)` when `has_aux=True`.
    """
    rev = _Reverse(fun, argnums, has_aux, backend, "grad")

    @functools.wraps(rev.fun)
    def grad_fun(*args, **kwargs):
        args = rev.bind(args, kwargs)
        rev.check(args)
        result = rev.scalar_vjp(args)
        g = rev.grads(result)
        return (g, result[1]) if has_aux else g

    grad_fun.__s2sad_reverse__ = rev
    return grad_fun


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   backend: str = DEFAULT_BACKEND) -> Callable:
    """Like `grad`, but returns `(value, grad)`, or `((value, aux), grad)` with `has_aux`."""
    rev = _Reverse(fun, argnums, has_aux, backend, "value_and_grad")

    @functools.wraps(rev.fun)
    def value_and_grad_fun(*args, **kwargs):
        args = rev.bind(args, kwargs)
        rev.check(args)
        result = rev.scalar_vjp(args)
        value = (result[0], result[1]) if has_aux else result[0]
        return value, rev.grads(result)

    value_and_grad_fun.__s2sad_reverse__ = rev
    return value_and_grad_fun


def vjp(fun: Callable, *primals, has_aux: bool = False, backend: str = DEFAULT_BACKEND):
    """`(out, vjp_fun)` (plus `aux` with `has_aux`); `vjp_fun(cotangent)` returns one array per primal."""
    rev = _Reverse(fun, tuple(range(len(primals))), has_aux, backend, "vjp")
    args = rev.bind(primals, {})
    rev.check(args)
    out = rev.primal_fn(*args)
    value = out[0] if has_aux else out

    def vjp_fun(cotangent):
        if np.shape(cotangent) != np.shape(value):
            raise ValueError(f"cotangent has shape {np.shape(cotangent)}, but the output has shape "
                             f"{np.shape(value)}")
        cot = np.asarray(cotangent, dtype=float) if np.ndim(cotangent) else float(cotangent)
        return tuple(rev.vjp_fn(*args, cot)[rev.n_outputs():])

    return (value, vjp_fun, out[1]) if has_aux else (value, vjp_fun)


def jit(fun: Callable, backend: str = DEFAULT_BACKEND) -> Callable:
    """Compile `fun` with numba (`fun` may be a function s2sad returned)."""
    if hasattr(fun, "__s2sad_reverse__") or backend == "python":
        return fun  # already compiled inside
    import numba

    return numba.njit(cache=False)(unwrap(fun))


def source(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> str:
    """The generated module (primal + adjoint) that `grad(fun, argnums, has_aux)` compiles."""
    return _Reverse(fun, argnums, has_aux, DEFAULT_BACKEND, "grad").generated.source


class differentiate:
    """Decorator: the function still runs (numba-compiled) and grows derivative methods.

        @s2sad.differentiate
        def loss(w, x): ...

        loss(w, x)                      # compiled primal
        loss.grad(w, x)                 # gradient w.r.t. argnums (default 0)
        loss.value_and_grad(w, x)
        loss.vjp(w, x)                  # (out, vjp_fun)
        print(loss.source())            # the generated adjoint code
    """

    def __init__(self, fun: Callable | None = None, *, argnums=0, has_aux=False, backend=DEFAULT_BACKEND):
        self._options = dict(argnums=argnums, has_aux=has_aux, backend=backend)
        self._compiled = None
        self._grad = self._vag = None
        if fun is not None:
            self._set(fun)

    def _set(self, fun):
        self.__s2sad_fun__ = unwrap(fun)
        functools.update_wrapper(self, self.__s2sad_fun__)

    def __call__(self, *args, **kwargs):
        if not hasattr(self, "__s2sad_fun__"):  # used as @differentiate(argnums=...)
            self._set(args[0])
            return self
        if self._compiled is None:
            rev = _Reverse(self.__s2sad_fun__, 0, self._options["has_aux"], self._options["backend"], "call")
            self._compiled = rev
        rev = self._compiled
        return rev.primal_fn(*rev.bind(args, kwargs))

    def grad(self, *args, **kwargs):
        if self._grad is None:
            self._grad = grad(self.__s2sad_fun__, **self._options)
        return self._grad(*args, **kwargs)

    def value_and_grad(self, *args, **kwargs):
        if self._vag is None:
            self._vag = value_and_grad(self.__s2sad_fun__, **self._options)
        return self._vag(*args, **kwargs)

    def vjp(self, *primals):
        return vjp(self.__s2sad_fun__, *primals, has_aux=self._options["has_aux"], backend=self._options["backend"])

    def source(self, argnums=None, has_aux=None) -> str:
        argnums = self._options["argnums"] if argnums is None else argnums
        has_aux = self._options["has_aux"] if has_aux is None else has_aux
        return source(self.__s2sad_fun__, argnums, has_aux)
