"""The public transformations: grad, value_and_grad, vjp, jvp, jacfwd, jacrev, hessian, jit, differentiate, source."""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import numbers
import textwrap
import time
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from s2sad import background, gencache, hidden, jacobians, rules, synthesize
from s2sad import numba_callable
from s2sad.numba_callable import attach, jitted
from s2sad.custom import _Custom
from s2sad.entry import entry_function
from s2sad.backend import (compile_function, float32_results, inferred_return_type, load_module, module_name,
                           passed_check, record_check, remember_lowered)
from s2sad.codegen.module import Generated, jacobian_driver, jvp_module, primal_module, vjp_module
from s2sad.errors import S2SADError, TupleOutputError, TypesNeeded, at_user_line
from s2sad.frontend import unwrap
from s2sad.names import Names
from s2sad.normalize import calls_its_call_method, normalize, register_transformations, unflatten
from s2sad.tree import LEAF, static_def, tree_builder, tree_flatten, tree_registered, tree_unflatten
from s2sad.tree import register as tree_register
from s2sad.units import of_shape
from s2sad.runtime import stop_gradient  # noqa: F401  (re-exported)
from s2sad.runtime.core import adjoint_dtype, scalar_adjoint

DEFAULT_BACKEND = "numba"


def _as_function(fun: Callable) -> types.FunctionType:
    """A Python function with source: `fun` itself, or a one-line wrapper around a primitive."""
    if isinstance(fun, _Custom):  # keep the override: differentiate a call of it
        params = fun.params
        return synthesize.function(fun.name, params, [f"return custom({', '.join(params)})"], {"custom": fun})
    if isinstance(fun, functools.partial):
        return _partial_function(fun)
    if isinstance(fun, types.MethodType):
        return _method_function(fun)
    if calls_its_call_method(fun):  # an object with a Python `__call__` (a loss class)
        return _method_function(fun.__call__)
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


def _method_function(method: types.MethodType) -> types.FunctionType:
    """`model.loss` as `def loss(<its parameters after self>): return method(...)`: the method reaches
    the function as a closure variable, and its object's arrays as hidden parameters."""
    params = [q.name for q in inspect.signature(method).parameters.values()]
    return synthesize.function(method.__name__, params, [f"return method({', '.join(params)})"], {"method": method})


def _partial_function(p: functools.partial) -> types.FunctionType:
    """`partial(f, 2.0, k=3)` as `def f_partial(<f's parameters left>): return inner(2.0, ..., k=3)`,
    the bound values passed in as closure variables (an array among them is read at every call)."""
    inner = _as_function(p.func)
    try:
        left = inspect.signature(p).parameters.values()
    except ValueError as exc:
        raise TypeError(f"s2sad cannot bind {p!r}: {exc}") from None
    if any(q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD) for q in inspect.signature(inner).parameters.values()):
        raise TypeError(f"s2sad cannot transform {p!r}: {inner.__name__} takes *args or **kwargs")
    kept = [q for q in left if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD) and q.name not in p.keywords]
    params = [q.name for q in kept]
    names = Names(params + ["inner", "make"])
    closure: dict[str, Any] = {"inner": inner}
    bound = []
    for value in [*p.args, *p.keywords.values()]:
        bound.append(names.fresh("bound"))
        closure[bound[-1]] = value
    header = []
    for q in kept:  # defaults stay defaults (read when the function is made, like any default)
        if q.default is q.empty:
            header.append(q.name)
        else:
            closure[default := names.fresh("default")] = q.default
            header.append(f"{q.name}={default}")
    keywords = [f"{k}={name}" for k, name in zip(p.keywords, bound[len(p.args):])]
    call = f"return inner({', '.join(bound[:len(p.args)] + params + keywords)})"
    return synthesize.function(f"{inner.__name__}_partial", header, [call], closure)


def _user_signature(fn: types.FunctionType) -> inspect.Signature:
    """`fn`'s signature without the hidden parameters of generated code (hidden.py)."""
    signature = inspect.signature(fn, follow_wrapped=False)
    n_hidden = len(hidden.marked(fn))
    if not n_hidden:
        return signature
    return signature.replace(parameters=list(signature.parameters.values())[:-n_hidden])


def _normalize_argnums(fn: types.FunctionType, argnums, params: list[str]) -> tuple[int, ...]:
    single = isinstance(argnums, int)
    try:
        nums = (argnums,) if single else tuple(argnums)
    except TypeError:
        raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}") from None
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


def _reaches_into_star_args(fun, argnums) -> bool:
    """Do `argnums` count into `fun`'s `*args`? (JAX's argnums count a call's positional arguments.)"""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return False
    star = next((i for i, p in enumerate(params) if p.kind is p.VAR_POSITIONAL), None)
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums) if isinstance(argnums, (tuple, list)) else ()
    return star is not None and any(type(n) is int and n >= star for n in nums)


def _per_arity(fun: Callable, transform: Callable) -> Callable:
    """`transform(fun)` for a `fun(..., *args)` whose argnums count into `*args`: per number of positional
    arguments and keyword names of a call, the transform of `def f(x, args_0, args_1): return fun(x, args_0,
    args_1)`, where each argument has a parameter of its own."""
    params = list(inspect.signature(fun).parameters.values())
    star = next(i for i, p in enumerate(params) if p.kind is p.VAR_POSITIONAL)
    made: dict = {}

    def for_call(args: tuple, kwargs: dict) -> Callable:
        key = (len(args), tuple(kwargs))
        if key not in made:
            names = [p.name for p in params[:star]][:len(args)]
            names += [f"{params[star].name}_{k}" for k in range(len(args) - len(names))]
            call = ", ".join(names + [f"{k}={k}" for k in kwargs])
            spread = synthesize.function(f"{fun.__name__}_spread", names + (["*", *kwargs] if kwargs else []),
                                         [f"return fun({call})"], {"fun": fun})
            made[key] = transform(spread)
        return made[key]

    @functools.wraps(fun)
    def per_arity(*args, **kwargs):
        return for_call(args, kwargs)(*args, **kwargs)

    per_arity.__s2sad_per_arity__ = for_call
    return per_arity


def _refuse_gathering_argnums(fn, argnums: tuple, params: list[str], gathering: list[str]) -> None:
    """JAX's argnums count a call's positional arguments, s2sad's the parameters: they part ways at `*args`,
    so argnums may not name it (nor `**kwargs`)."""
    for n in argnums:
        if params[n] in gathering:
            raise ValueError(f"argnums={n} names `{params[n]}`, which gathers {fn.__name__}'s extra arguments: "
                             "s2sad differentiates with respect to the parameters before it; to differentiate "
                             "an extra argument, name it in a lambda: "
                             f"s2sad.grad(lambda x, a: {fn.__name__}(x, a), argnums=1)")


def _on_gpu(a) -> bool:
    """A GPU array: numba's device arrays (and the simulator's), CuPy, PyTorch CUDA tensors."""
    return hasattr(a, "__cuda_array_interface__") or hasattr(a, "copy_to_host")


def _kept_constant(what: str, fname: str, argument: str) -> str:
    """How to keep an argument constant: out of argnums, or, for vjp and jvp, which differentiate every primal,
    in a lambda that closes over it."""
    if what not in ("vjp", "jvp"):
        return "leave it out of argnums"
    tangents = ", <their tangents>" if what == "jvp" else ""
    return f"pass it in a lambda: {what}(lambda ...: {fname}(..., {argument}, ...), <the other primals>{tangents})"


def _check_float(value, name: str, index: int, fname: str, what: str):
    kind = type(value)
    if kind is float or (kind is np.ndarray and value.dtype.kind == "f"):
        return  # the common case, kept cheap: this runs on every call
    if _on_gpu(value) and np.dtype(value.dtype).kind == "f":
        return  # for vmap(target="cuda")
    if isinstance(value, (complex, np.complexfloating)) or (isinstance(value, np.ndarray) and value.dtype.kind == "c"):
        kind = f"an array of dtype {value.dtype}" if isinstance(value, np.ndarray) else f"complex {value!r}"
        raise TypeError(f"{what} differentiates real floats, but argument {index} (`{name}`) of {fname} is {kind}; "
                        "pass the real and imaginary parts as two float arguments (x.real, x.imag)")
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral)):
        constant = _kept_constant(what, fname, f"{name}={value!r}")
        raise TypeError(f"{what} requires float inputs, but argument {index} (`{name}`) of {fname} is "
                        f"{type(value).__name__} {value!r}; pass a float (e.g. {float(value)!r}) or, to keep it "
                        f"constant, {constant}")
    if isinstance(value, np.ndarray) and value.dtype.kind != "f":
        constant = _kept_constant(what, fname, name)
        convert = (f"pass its fields as float arrays ({name}[{value.dtype.names[0]!r}], ...)" if value.dtype.names
                   else "convert it with .astype(float)")
        raise TypeError(f"{what} requires float inputs, but argument {index} (`{name}`) of {fname} is an "
                        f"array of dtype {value.dtype}; {convert} or, to keep it constant, {constant}")
    if not isinstance(value, (numbers.Real, np.ndarray, np.floating)):
        raise TypeError(f"argument {index} (`{name}`) of {fname} is a {type(value).__name__}; "
                        "s2sad differentiates with respect to floats and NumPy arrays")


@dataclass(frozen=True)
class _Spec:
    """What a transform computes. A transform derived from another (for another argument structure, other
    ranks and types, other differentiated leaves, another target or kernel) differs from it here alone."""

    fun: types.FunctionType
    signature: inspect.Signature  # fun's, without the hidden parameters of generated code
    params: tuple  # the names of its parameters
    gathers: bool  # a `*args` or `**kwargs` parameter: calls bind through the signature
    argnums: tuple  # the differentiated parameters
    single: bool  # argnums is an int: one gradient, not a tuple of them
    backend: str
    what: str  # the public transformation ("grad", "jacfwd", "vmap", ...): what it computes, said in messages
    defs: tuple | None = None  # the pytree structure of each argument, when specialized
    leaf_counts: tuple | None = None  # and how many leaves each has
    flat_argnums: tuple = ()  # indices of the differentiated leaves among all leaves
    kinds: tuple | None = None  # ((param, ndim, type, unit axes, dtype), ...) where the code depends on them
    has_aux: bool = False  # the function returns (value, aux) (reverse mode)
    recompute_libm: bool = False  # libm values are recomputed, not taped: the code a CUDA kernel batches
    batched: tuple = ()  # vmap: which arguments (leaves, for pytrees) are batched along axis 0
    target: str = "cpu"  # vmap: "cpu", "parallel" or "cuda"
    kernel_shapes: tuple | None = None  # vmap on CUDA: the per-example shapes, which size the local arrays
    kernel_dtype: str = "float64"  # and the precision the kernel computes in


@dataclass
class _Made:
    """What a transform makes from its specification, each on first use. A transform derived from another
    starts with none of it (but, where the lowering is the same, the lowered function)."""

    ir: Any = None  # the lowered function
    generated: Generated | None = None
    reads_kinds: bool | None = None
    compiled: dict = field(default_factory=dict)  # "primal", "derivative", ... -> compiled function
    derived: dict = field(default_factory=dict)  # key -> the transform derived from this one for it
    checked_ranks: set = field(default_factory=set)  # argument ranks whose scalar output is checked
    rebuild: list | None = None  # per argnum: how to rebuild its pytree from flat gradients
    entries: dict = field(default_factory=dict)  # s2sad.entry functions, per call structure
    flat_entries: dict = field(default_factory=dict)  # numba_callable's flat entry points, per structure


class _Transform:
    """One function, one set of differentiated arguments: its generated module, compiled lazily.

    `spec` says what it computes and never changes; its fields read as the transform's own attributes
    (`t.argnums`), copied into the instance so that reading one costs what reading any attribute does.
    `made` holds what the transform makes from it. Another specification is another transform (`derive`)."""

    def __init__(self, fun: Callable, argnums, backend: str, what: str, **options):
        fun = _as_function(fun)
        signature = _user_signature(fun)
        params = tuple(signature.parameters)
        gathering = [p.name for p in signature.parameters.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        nums = _normalize_argnums(fun, argnums, params)
        _refuse_gathering_argnums(fun, nums, params, gathering)
        self._hold(_Spec(fun, signature, params, bool(gathering), nums, isinstance(argnums, int), backend, what,
                         flat_argnums=nums, **options), _Made())

    def _hold(self, spec: _Spec, made: _Made) -> None:
        vars(self).update(vars(spec), spec=spec, made=made)

    def __setattr__(self, name, value):
        raise AttributeError(f"a transform's specification does not change (setting {name!r}): derive another")

    def derive(self, key, keep_ir: bool = False, **changes) -> "_Transform":
        """The transform whose specification differs from this one's in `changes`, made once per `key`:
        nothing it makes is shared with this one, except (keep_ir) the lowered function."""
        found = self.made.derived.get(key)
        if found is None:
            found = type(self).__new__(type(self))
            found._hold(dataclasses.replace(self.spec, **changes), _Made(ir=self.made.ir if keep_ir else None))
            self.made.derived[key] = found
        return found

    @property
    def ir(self):
        """The lowered function, specialized to the argument structure (and kinds, where it reads them)."""
        if self.made.ir is None:
            trees = {p: d for p, d in zip(self.params, self.defs or ()) if d is not LEAF}
            self.made.ir = self.normalized(trees)
        return self.made.ir

    def normalized(self, trees: dict):
        """The function lowered for arguments of structure `trees` (parameter -> PyTreeDef)."""
        return normalize(self.fun, arg_trees=trees, arg_kinds=self.arg_kinds())

    def arg_kinds(self) -> dict | None:
        """parameter -> (ndim, type, unit axes, dtype), where the transform is specialized to them."""
        return {p: kind for p, *kind in self.kinds} if self.kinds is not None else None

    @property
    def generated(self) -> Generated:
        made = self.made
        if made.generated is None:
            key = self.cache_key()
            if key is None or made.ir is not None:  # (lowered already: what it read went unrecorded)
                made.generated = self.generate(self.ir)
            else:  # a later process reuses the module when nothing generation read has changed
                made.generated = gencache.cached_generate(key, self.fun, self.fun.__name__,
                                                          lambda: self.generate(self.ir))
        return made.generated

    def cache_key(self) -> tuple | None:
        """What besides the function decides the generated module (None: never kept on disk)."""
        return None

    def specialize(self, args) -> tuple["_Transform", tuple]:
        """The transform for the structure of `args` (pytrees) and, for a function that branches on
        them (`x.ndim`, `isinstance`), their ranks and types; and what its compiled code takes: their
        leaves, then the arrays it reads from outside (hidden.py)."""
        found, leaves = self.specialize_kinds(args)
        return found, leaves + found.hidden_args()

    def hidden_args(self) -> tuple:
        """The arrays generated code reads from globals, closures and objects, as they are now."""
        found = self.generated.fn.hidden
        return hidden.values(found) if found else ()

    def specialize_kinds(self, args) -> tuple["_Transform", tuple]:
        """`specialize` without the hidden arrays: the transform, and the leaves of `args`."""
        found, leaves = self.specialize_structure(args)
        if found.kinds is None and found.reads_kinds():
            found = found.with_kinds(_arg_kinds(found.params, found.defs, args))
        return found, leaves

    def reads_kinds(self) -> bool:
        """Does the code depend on the arguments' ranks or types? (Lowering without them says so.)"""
        if self.made.reads_kinds is None:
            try:
                self.made.reads_kinds = self.generated.fn.asks_types
            except TypesNeeded:
                self.made.reads_kinds = True
            except Exception:  # not about types: the call path generates again and raises it where it always has
                return False
        return self.made.reads_kinds

    def with_kinds(self, kinds: tuple) -> "_Transform":
        """This transform, generated for arguments of these ranks and types."""
        found = self.derive(("kinds", kinds), kinds=kinds)
        found.made.reads_kinds = True
        return found

    def specialize_structure(self, args) -> tuple["_Transform", tuple]:
        """The transform for the structure of `args` (pytrees), and their leaves."""
        for a in args:
            if type(a) not in _LEAF_TYPES:
                break
        else:
            return self, args  # plain arrays and numbers: no flattening (a loop: cheaper than all(genexpr))
        flat, defs = [], []
        for i, a in enumerate(args):
            if type(a) in _LEAF_TYPES:
                flat.append(a)
                defs.append(LEAF)
                continue
            if isinstance(a, np.random.RandomState) and self.backend != "python":
                raise TypeError(f"argument {i} of {self.fun.__name__} is a np.random.RandomState, which numba code "
                                "cannot draw from; pass a np.random.Generator (np.random.default_rng(seed)) or use "
                                "backend='python'")
            if _is_static_argument(a) and i in self.argnums:
                self.differentiable_object(a, i)  # a dataclass becomes a pytree of its fields
            if _is_static_argument(a):  # inlined: the function (object) is part of the structure, as a shape is
                defs.append(static_def(a))
                continue
            leaves, treedef = tree_flatten(a)
            flat += leaves
            defs.append(treedef)
        defs = tuple(defs)
        if all(d is LEAF or d == LEAF for d in defs):
            return self, args
        found = self.made.derived.get(defs)
        if found is None:
            counts = tuple(d.num_leaves for d in defs)
            offsets = np.cumsum([0, *counts])
            found = self.derive(defs, defs=defs, leaf_counts=counts,
                                flat_argnums=tuple(j for i in self.argnums for j in range(offsets[i], offsets[i + 1])))
        return found, tuple(flat)

    def differentiable_object(self, value, index: int) -> None:
        """An object `argnums` names: a dataclass is registered as a pytree of its fields (s2sad.tree.register),
        so its float and array fields are differentiated; anything else is refused."""
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            tree_register(type(value))
            return
        kind = type(value).__name__
        raise TypeError(f"{self.what} differentiates floats, arrays and pytrees of them, but argument {index} "
                        f"(`{self.params[index]}`) of {self.fun.__name__} is a {kind} object; register {kind} as a "
                        f"pytree (s2sad.tree.register({kind}, flatten, unflatten), or make it a dataclass), or "
                        "pass its arrays as arguments")

    def regroup(self, flat_grads) -> tuple:
        """Gradients of the differentiated leaves, rebuilt into the structure of each argnum."""
        if self.defs is None:
            return tuple(flat_grads)
        rebuild = self.made.rebuild
        if rebuild is None:  # once per structure: finding a builder hashes the tree, num_leaves walks it
            counts = self.leaf_counts or tuple(d.num_leaves for d in self.defs)
            rebuild = self.made.rebuild = [(tree_builder(self.defs[i]), self.defs[i], counts[i]) for i in self.argnums]
        out, k = [], 0
        for build, treedef, n in rebuild:
            part = flat_grads[k:k + n]
            out.append(build(part) if build is not None else tree_unflatten(treedef, part))
            k += n
        return tuple(out)

    def generate(self, fn_ir) -> Generated:
        raise NotImplementedError

    def compiled(self, which: str) -> Callable:
        """`which` of the generated module ("primal", "derivative"), compiled for the backend."""
        compiled = self.made.compiled
        if which not in compiled:
            g = self.generated
            remember_lowered(g.source, g.stem, g.fn)
            compiled[which] = compile_function(g.source, g.stem, getattr(g, which), self.backend)
        return compiled[which]

    @property
    def primal_fn(self):
        return self.compiled("primal")

    def source_function(self, which: str = "wrapper") -> types.FunctionType:
        """The wrapper (or primal) as a plain Python function in a real file: what a further transformation parses."""
        g = self.generated
        fn = getattr(load_module(g.source, g.stem, "python"), getattr(g, which))
        if g.fn.hidden:  # a transformation of it reads them where they live, as this one does
            setattr(fn, hidden.MARK, g.fn.hidden)
        return fn

    def bind(self, args, kwargs) -> tuple:
        """The call's arguments, one per parameter: `*args` and `**kwargs` parameters get a tuple and a dict."""
        if kwargs or len(args) != len(self.params) or self.gathers:
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = tuple(bound.arguments.values())
        return args

    def check(self, args):
        """`args` are the leaves (after specialize); every differentiated one must be a float."""
        for i in self.flat_argnums:
            a = args[i]
            if type(a) is float or (type(a) is np.ndarray and a.dtype.kind == "f"):
                continue  # the common case, before naming the leaf (which reads the generated module)
            _check_float(a, self.leaf_name(i), i, self.fun.__name__, self.what)

    def leaf_name(self, i: int) -> str:
        if self.defs is None:
            return self.params[i]
        return self.generated.fn.params[i]

    def wrt(self, fn_ir) -> list[str]:
        return [fn_ir.params[i] for i in self.flat_argnums]


class _Reverse(_Transform):
    """The compiled primal and vjp of one function for one set of differentiated arguments."""

    def __init__(self, fun: Callable, argnums, has_aux: bool, backend: str, what: str):
        super().__init__(fun, argnums, backend, what, has_aux=has_aux)

    def for_target(self, target: str) -> "_Reverse":
        """This transform, or for target="cuda" the same one recomputing libm values (a thread keeps no tape)."""
        if target != "cuda" or self.recompute_libm:
            return self
        return self.derive(("recompute_libm",), recompute_libm=True)

    def generate(self, fn_ir) -> Generated:
        shape = fn_ir.output_shape
        if self.has_aux and not (isinstance(shape, tuple) and len(shape) == 2 and shape[0] is None):
            raise TypeError(f"has_aux=True needs {self.fun.__name__} to return a pair (value, aux)")
        if not self.has_aux and fn_ir.returns_tuple:
            raise TupleOutputError(f"{self.fun.__name__} returns a tuple; {self.what} needs a single output "
                                    "(use has_aux=True to return (value, aux))")
        kind = {"grad": "grad", "hessian": "grad", "value_and_grad": "value_and_grad"}.get(self.what, "vjp")
        return vjp_module(fn_ir, self.wrt(fn_ir), kind, self.recompute_libm)

    def returns_tuple(self) -> bool:
        """Whether the function returns a tuple (has_aux aside), read from its generated module, which a
        warm process takes from the disk cache without lowering the function again."""
        try:
            return self.generated.fn.returns_tuple
        except TupleOutputError:  # only single outputs are generated (and kept on disk)
            return True

    def cache_key(self) -> tuple | None:
        if not all(_printed_whole(d) for d in self.defs or ()):
            return None
        return ("reverse", self.what, self.has_aux, self.argnums, self.flat_argnums, repr(self.defs),
                self.recompute_libm, repr(self.kinds))

    @property
    def vjp_fn(self):
        return self.compiled("derivative")

    def n_outputs(self) -> int:
        return len(self.generated.fn.outputs) if self.has_aux else 1

    def aux(self, result):
        """The aux output, rebuilt into the structure the function returned."""
        outputs = list(result[1:self.n_outputs()])
        return unflatten(self.generated.fn.output_shape[1], outputs)

    def scalar_vjp(self, args):
        """(outputs..., grads...) for a scalar output seeded with 1.0; TypeError otherwise."""
        try:
            result = _called(self.vjp_fn, *args, 1.0)
        except MemoryError:
            raise self.tape_error() from None  # not the generic handler: rerunning the primal could exhaust memory again
        except Exception:
            self.check_output(args)
            raise
        self.check_scalar(result[0])
        return result

    def gradient(self, args) -> tuple:
        """(gradient leaves..., aux...) from the module's `f_grad`, which never computes the value.

        The output must still be a scalar: the primal checks that once per tuple of argument ranks
        when numba compiles (ranks fix the output's rank there; a file in the cache remembers it for
        later processes), and on every call in Python."""
        fn = self.compiled("wrapper")
        ranks = tuple([a.ndim if type(a) is np.ndarray else type(a) for a in args])
        checked = self.made.checked_ranks
        if ranks not in checked:
            if self.backend == "python":
                self.check_output(args)
            else:
                self.check_output_once(args, ranks)
                checked.add(ranks)
        try:
            result = _called(fn, *args)
        except MemoryError:
            raise self.tape_error() from None
        return result if len(self.flat_argnums) + self.n_outputs() > 2 else (result,)

    def check_output(self, args):
        out = self.primal_fn(*_generators_copied(args))
        self.check_scalar(out[0] if self.has_aux else out)

    def check_output_once(self, args, ranks: tuple):
        g = self.generated
        key = "scalar output for argument ranks " + ", ".join(
            str(r) if isinstance(r, int) else f"{r.__module__}.{r.__qualname__}" for r in ranks)
        if not passed_check(g.source, g.stem, key):
            if not self.scalar_uncompiled(args) and not self.scalar_by_type(args):
                self.check_output(args)  # compiles and runs the primal: its value names what is wrong
            record_check(g.source, g.stem, key)

    def scalar_uncompiled(self, args) -> bool:
        """Where numba compiles in the background (s2sad.background), whether the primal run as Python
        returns a scalar, when Python answers in time: numba's typing would cost what the worker saves.
        Where it does not, the module's calls compile in-process, as the gradient would run slower still."""
        if not background.enabled():
            return False
        g = self.generated
        primal = compile_function(g.source, g.stem, g.primal, "python")
        started = time.perf_counter()
        outcome, out = background.run_briefly(primal, _generators_copied(args), background.PRIMAL_SECONDS)
        if outcome == "done":
            background.expect_python(module_name(g.source, g.stem), time.perf_counter() - started)
            self.check_scalar(out[0] if self.has_aux else out)
        elif outcome != "unavailable":  # off the main thread Python never ran: it says nothing of its speed
            background.compile_in_process(module_name(g.source, g.stem))
        return outcome == "done"

    def scalar_by_type(self, args) -> bool:
        """Whether numba's type inference alone shows the primal returns a scalar on `args`."""
        from numba.core import types as nb

        out = inferred_return_type(self.primal_fn, args)
        if self.has_aux:
            out = out.types[0] if isinstance(out, nb.BaseTuple) and out.types else None
        return isinstance(out, (nb.Number, nb.Boolean)) or (isinstance(out, nb.Array) and out.ndim == 0)

    def tape_error(self) -> MemoryError:
        import re

        tapes = re.findall(r"(\w+) = List\(\)", self.generated.source)
        kept = f"its tapes ({', '.join(tapes)})" if tapes else "its intermediate arrays"
        return MemoryError(
            f"{self.what} of {self.fun.__name__} ran out of memory in the reverse sweep: {kept} hold values "
            "from every loop iteration (8 bytes per float, about 170 bytes plus the data per array). Run fewer "
            "iterations, differentiate in chunks, or use forward mode (jvp/jacfwd), which keeps no tape. "
            f"The tapes are in the generated code: print(s2sad.source({self.fun.__name__}))")

    def check_scalar(self, value):
        if type(value) is float:
            return  # the common case, kept cheap (an isinstance against the numbers.Number ABC is slow)
        if not isinstance(value, (numbers.Number, np.ndarray, np.number)):
            raise TypeError(f"{self.what} requires a number as output, but {self.fun.__name__} returned "
                            f"{type(value).__name__} {value!r}")
        if isinstance(value, np.ndarray) and value.ndim != 0:
            shape = np.shape(value)
            raise TypeError(
                f"{self.what} requires a scalar output, but {self.fun.__name__} returned an array of shape "
                f"{shape}. Use vmap({self.what}(f)) for per-example gradients, jacrev(f) for the Jacobian, "
                "or reduce the output (e.g. .sum()) first.")

    def entry_for(self, specialized: "_Reverse", args: tuple, leaves: tuple) -> Callable | None:
        """The entry function (s2sad.entry) for calls structured like `args`, which has just passed
        every check of `specialized`; None where the general path must run on every call."""
        if self.backend == "python" or len(args) != len(self.params):
            return None  # the python backend checks the output on every call; defaults need binding
        key = (specialized.defs, tuple([(type(a), a.ndim, a.dtype) if type(a) is np.ndarray else type(a) for a in leaves]))
        entries = self.made.entries
        if key not in entries:
            entries[key] = entry_function(specialized, leaves)
        return entries[key]

    def grads(self, result, start: int | None = None):
        """The gradients in `result` from index `start` on (default: after the outputs a vjp returns
        first), in the structure of the argnums."""
        start = self.n_outputs() if start is None else start
        if self.single and self.defs is None:
            return result[start]
        grads = self.regroup(result[start:start + len(self.flat_argnums)])
        return grads[0] if self.single else grads


class _Forward(_Transform):
    """The compiled primal and jvp of one function with respect to the arguments `argnums`."""

    def __init__(self, fun: Callable, argnums, backend: str, what: str = "jvp"):
        super().__init__(fun, argnums, backend, what)

    def with_wrt(self, flat_positions: tuple) -> "_Forward":
        """The same structure, differentiating exactly these leaves (cached)."""
        return self.derive(("wrt", flat_positions), keep_ir=True, flat_argnums=flat_positions)  # same lowering

    def generate(self, fn_ir) -> Generated:
        return jvp_module(fn_ir, self.wrt(fn_ir))

    @property
    def jvp_fn(self):
        return self.compiled("derivative")


_LEAF_TYPES = (float, np.ndarray, int, np.float64, np.float32, bool)  # arguments that need no flattening
_MEMO: dict[tuple, _Transform] = {}


def _is_static_argument(value) -> bool:
    """A function (`minimize(f, x0)`) or a plain object (a model, a configuration) passed as an argument:
    its code is inlined and its numbers read when the code is generated; its arrays are read at each call.
    A random generator is passed as it is: generated code draws from it, advancing it."""
    if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)) or hasattr(value, "py_func") \
            or hasattr(value, "__s2sad_transform__"):
        return True
    kind = type(value)
    return kind.__module__ not in ("builtins", "numpy") and not isinstance(value, (tuple, list, dict, np.generic)) \
        and not tree_registered(kind) and not isinstance(value, hidden.RANDOM_GENERATORS)


def _arg_kinds(params: list, defs: tuple | None, args: tuple) -> tuple:
    """(param, ndim, type, unit axes, dtype) of each argument that is not a pytree: what `x.ndim`, `isinstance`,
    `np.squeeze(x)` and `x.dtype == np.float32` read."""
    return tuple((p, len(_shape_of(a)), np.ndarray if isinstance(a, np.ndarray) else type(a), of_shape(_shape_of(a)),
                  _dtype_of(a)) for i, (p, a) in enumerate(zip(params, args)) if defs is None or defs[i] is LEAF)


def _dtype_of(value) -> np.dtype | None:
    """The dtype of an array or a number; None for anything else (a class passed as `dtype=np.float32`)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype
    return np.dtype(type(value)) if isinstance(value, (bool, int, float)) else None


def _shape_of(value) -> tuple:
    """np.shape(value), but () for a class: np.shape(np.float32), a dtype passed as `dtype=np.float32`, reads
    the class's attribute `shape`, a descriptor."""
    return () if isinstance(value, type) else np.shape(value)


def _printed_whole(treedef) -> bool:
    """Does the structure's repr say all of it? (A namedtuple's or registered class's prints only its name.)"""
    if treedef.kind in ("namedtuple", "custom", "static"):
        return False
    return all(_printed_whole(c) for c in treedef.children)


def _memo(key: tuple, make: Callable[[], Any]) -> Any:
    """Transforms made inside calls (jvp, vjp, jacobians) are reused: codegen runs once per function."""
    try:
        found = _MEMO.get(key)
    except TypeError:  # an unhashable callable
        return make()
    if found is None:
        found = _MEMO[key] = make()
    return found


def _reverse(fun, argnums, has_aux, backend, what) -> _Reverse:
    return _memo(("rev", fun, argnums, has_aux, backend, what), lambda: _Reverse(fun, argnums, has_aux, backend, what))


def _forward(fun, argnums, backend) -> _Forward:
    return _memo(("fwd", fun, argnums, backend), lambda: _Forward(fun, argnums, backend))


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         backend: str = DEFAULT_BACKEND) -> Callable:
    """Gradient of a scalar-valued `fun` with respect to the argument(s) `argnums`.

    Returns a function with `fun`'s signature that returns the gradient (a tuple when
    `argnums` is a tuple), or `(gradient, aux)` when `has_aux=True`.
    """
    if _reaches_into_star_args(fun, argnums):
        return _per_arity(fun, lambda f: grad(f, argnums, has_aux, backend))
    rev = _Reverse(fun, argnums, has_aux, backend, "grad")

    def general(r: _Reverse, leaves: tuple):
        result = r.gradient(leaves)  # (gradient leaves..., aux leaves...)
        g = r.grads(result, 0)
        return (g, unflatten(r.generated.fn.output_shape[1], list(result[len(r.flat_argnums):]))) if has_aux else g

    return attach(_behind_entry(rev, general), "grad", rev)


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   backend: str = DEFAULT_BACKEND) -> Callable:
    """Like `grad`, but returns `(value, grad)`, or `((value, aux), grad)` with `has_aux`."""
    if _reaches_into_star_args(fun, argnums):
        return _per_arity(fun, lambda f: value_and_grad(f, argnums, has_aux, backend))
    rev = _Reverse(fun, argnums, has_aux, backend, "value_and_grad")

    def general(r: _Reverse, leaves: tuple):
        result = r.scalar_vjp(leaves)
        value = (result[0], r.aux(result)) if has_aux else result[0]
        return value, r.grads(result)

    return attach(_behind_entry(rev, general), "value_and_grad", rev)


def _behind_entry(rev: _Reverse, general: Callable) -> Callable:
    """The public function of `rev` (grad or value_and_grad): the entry function written for the last
    call's structure (s2sad.entry) where it fits, else `general(specialized, leaves)` after the
    general path's binding, flattening and checks."""
    entry = None

    @functools.wraps(rev.fun)
    def transformed(*args, **kwargs):
        nonlocal entry
        try:
            if entry is not None and not kwargs:
                out = entry(args)
                if out is not None:
                    return out
            r, leaves = rev.specialize(rev.bind(args, kwargs))
            r.check(leaves)
            out = general(r, leaves)
        except S2SADError as exc:
            raise at_user_line(exc) from None
        if not kwargs and not rev.has_aux:
            entry = rev.entry_for(r, args, leaves)
        return out

    transformed.__s2sad_transform__ = rev
    return transformed


def _as_float(x):
    """A tangent or cotangent as floats in its own precision (float32 stays float32; ints become float64)."""
    if np.ndim(x) == 0:
        return scalar_adjoint(x, x)
    x = np.asarray(x)
    return np.asarray(x, dtype=adjoint_dtype(x))


def _generators_copied(args: tuple) -> tuple:
    """`args` with each random generator copied: a check that runs the primal must not move the user's
    generators, which the gradient then draws from."""
    if not any(isinstance(a, hidden.RANDOM_GENERATORS) for a in args):
        return args
    return tuple(copy.deepcopy(a) if isinstance(a, hidden.RANDOM_GENERATORS) else a for a in args)



def _called(fn: Callable, *args):
    """`fn(*args)` in NumPy's scalar types: numba returns a float32 scalar as a Python float, so where an
    argument is float32 those results come back as np.float32, as NumPy (and the python backend) give."""
    result = fn(*args)
    for a in args:
        if type(a) is np.float32 or (type(a) is np.ndarray and a.dtype is _FLOAT32):
            return as_float32_at(result, float32_results(fn, args))
    return result


_FLOAT32 = np.dtype(np.float32)  # (tested by identity, which costs less than the dtype's ==)


def as_float32_at(result, positions: tuple[int, ...]):
    """`result` (one value or a tuple) with the values at `positions` as np.float32."""
    if not positions:
        return result
    if not isinstance(result, tuple):
        return np.float32(result)
    return tuple([np.float32(r) if k in positions else r for k, r in enumerate(result)])


def vjp(fun: Callable, *primals, has_aux: bool = False, backend: str = DEFAULT_BACKEND):
    """`(out, vjp_fun)` (plus `aux` with `has_aux`); `vjp_fun(cotangent)` returns one array per primal.

    When `fun` returns a tuple (and has_aux is False), `out` and the cotangent are tuples.
    """
    rev = _reverse(fun, tuple(range(len(primals))), has_aux, backend, "vjp")
    rev, args = rev.specialize_kinds(rev.bind(primals, {}))
    if not has_aux and rev.returns_tuple():
        return _tuple_vjp(fun, primals, backend)
    args += rev.hidden_args()
    rev.check(args)
    out = _called(rev.primal_fn, *args)
    value = out[0] if has_aux else out

    def vjp_fun(cotangent):
        _check_cotangent(cotangent, value)
        return rev.regroup(_called(rev.vjp_fn, *args, _as_float(cotangent))[rev.n_outputs():])

    return (value, vjp_fun, rev.aux((None,) + tuple(out[1:]))) if has_aux else (value, vjp_fun)


def _check_cotangent(cotangent, value):
    if np.shape(cotangent) != np.shape(value):
        raise ValueError(f"cotangent has shape {np.shape(cotangent)}, but the output has shape {np.shape(value)}")


def _tuple_vjp(fun, primals, backend):
    """vjp of a tuple-valued `fun`: the gradient of sum_k <cotangent_k, out_k>, generated as source."""
    weighted = _memo(("weighted", fun), lambda: _weighted_sum(fun))
    n = len(primals)
    rev = _reverse(weighted, tuple(range(n)), False, backend, "vjp")
    fwd, leaves = _forward(fun, _float_positions(primals), backend).specialize(primals)
    out = _called(fwd.primal_fn, *leaves)

    def vjp_fun(cotangent):
        if not isinstance(cotangent, tuple) or len(cotangent) != len(out):
            raise ValueError(f"{rev.fun.__name__} returns a tuple of {len(out)}: give a tuple of as many cotangents")
        for c, o in zip(cotangent, out):
            _check_cotangent(c, o)
        r, args = rev.specialize(tuple(primals) + tuple(_as_float(c) for c in cotangent))
        return tuple(_called(r.vjp_fn, *args, 1.0)[1:n + 1])

    return out, vjp_fun


def _weighted_sum(fun) -> types.FunctionType:
    """`f_weighted(*args, *weights) = sum_k sum_axis(out_k * weight_k)` around a tuple-valued `fun`."""
    inner = _as_function(fun)
    params = list(_user_signature(inner).parameters)
    try:
        n_out = len(normalize(inner, copy_arguments=False).outputs)
    except TypesNeeded:  # the number of outputs does not depend on the argument types the code asked for
        n_out = len(normalize(inner, arg_kinds={}, copy_arguments=False).outputs)
    names = Names(params + ["inner", "make", "sum_axis"])
    outs = [names.fresh("out") for _ in range(n_out)]
    weights = [names.fresh("weight") for _ in range(n_out)]
    total = " + ".join(f"sum_axis({o} * {w})" for o, w in zip(outs, weights))
    body = [f"{', '.join(outs)} = inner({', '.join(params)})", f"return {total}"]
    return synthesize.function(f"{inner.__name__}_weighted", params + weights, body, {"inner": inner},
                               imports="from s2sad.runtime import sum_axis")


def _floats_and_arrays(values: tuple) -> bool:
    for v in values:
        if type(v) is not float and type(v) is not np.ndarray:
            return False
    return True


def _flat_pairs(primals: tuple, tangents: tuple) -> tuple[list, list]:
    """The leaves of the primals and of the tangents; ValueError where a tangent's structure differs."""
    flat_primals, flat_tangents = [], []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        p_leaves, p_def = tree_flatten(p)
        t_leaves, t_def = tree_flatten(t)
        if p_def != t_def:
            raise ValueError(f"tangent {i} has structure {t_def}, but its primal has structure {p_def}")
        flat_primals += p_leaves
        flat_tangents += t_leaves
    return flat_primals, flat_tangents


def _float_positions(primals) -> tuple[int, ...]:
    """Which primals carry tangents: floats and float arrays (ints and bools are constants)."""
    return tuple(i for i, p in enumerate(primals)
                 if not isinstance(p, (bool, np.bool_, numbers.Integral))
                 and not (isinstance(p, np.ndarray) and p.dtype.kind in "biu"))


def _defaults(fun: Callable, given: int) -> tuple:
    """The defaults of the parameters after the first `given`, which `fun(*primals)` reads: constants of
    the derivative, as the arguments `argnums` leaves out are in `grad`."""
    params = list(_user_signature(_as_function(fun)).parameters.values())[given:]
    if any(q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD) or q.default is q.empty for q in params):
        return ()  # the call itself reports a missing argument
    return tuple(q.default for q in params)


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, backend: str = DEFAULT_BACKEND):
    """`(out, tangent_out)`: `fun(*primals)` and its derivative along `tangents`, by forward mode.

    `primals` and `tangents` are tuples of the same length; a tangent must have its primal's
    shape. Integer and bool primals are constants (their tangents are ignored). Tuple outputs
    give tuples of tangents.
    """
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp got {len(primals)} primals but {len(tangents)} tangents")
    if _floats_and_arrays(primals) and _floats_and_arrays(tangents):
        flat_primals, flat_tangents = primals, tangents  # floats and arrays: nothing to flatten (the common case)
    else:
        flat_primals, flat_tangents = _flat_pairs(primals, tangents)
    positions = _float_positions(flat_primals)
    for i in positions:
        p, t = flat_primals[i], flat_tangents[i]
        if not (type(p) is float and type(t) is float) and np.shape(t) != np.shape(p):
            raise ValueError(f"tangent leaf {i} has shape {np.shape(t)}, but its primal has shape {np.shape(p)}")
    if not positions:
        raise TypeError("jvp needs at least one float primal to differentiate, but every primal is an int or a bool "
                        "(those are constants); pass floats, e.g. 3.0 or x.astype(float)")
    fwd, leaves = _forward(fun, tuple(range(len(primals))), backend).specialize_kinds(
        primals + _defaults(fun, len(primals)))
    for i in positions:
        p = flat_primals[i]
        if type(p) is not float and not (type(p) is np.ndarray and p.dtype.kind == "f"):
            _check_float(p, fwd.ir.params[i], i, fwd.fun.__name__, "jvp")  # (naming the leaf lowers the function)
    if fwd.flat_argnums != positions:  # ints among the leaves are constants: differentiate the float ones
        fwd = fwd.with_wrt(positions)  # (before generating: an int made a float, np.float64(n), has no tangent)
    args = leaves + fwd.hidden_args()
    carried = [flat_tangents[i] for i in positions]  # the tangents of the float primals
    result = _called(fwd.jvp_fn, *args, *(t if type(t) is float else _as_float(t) for t in carried))
    fn = fwd.generated.fn
    n = len(fn.outputs)
    return unflatten(fn.output_shape, list(result[:n])), unflatten(fn.output_shape, list(result[n:]))


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, backend: str = DEFAULT_BACKEND) -> Callable:
    """The Jacobian of `fun` by forward mode, one jvp per input element.

    Shape `out.shape + arg.shape` per (output leaf, argument leaf); the result has the
    structure of the output, each leaf holding the structure of the argument(s) (a tuple over
    `argnums` when it is a tuple), as in JAX.
    """
    if _reaches_into_star_args(fun, argnums):
        return _per_arity(fun, lambda f: jacfwd(f, argnums, backend))
    fwd0 = _Forward(fun, argnums, backend, "jacfwd")

    @functools.wraps(fwd0.fun)
    def jacfwd_fun(*args, **kwargs):
        fwd, flat = fwd0.specialize(fwd0.bind(args, kwargs))
        fwd.check(flat)
        fn = fwd.generated.fn
        blocks = jacobians.by_jvps(fwd.primal_fn, fwd.jvp_fn, flat, fwd.flat_argnums,
                                   fn.returns_tuple or len(fn.outputs) > 1)
        return unflatten(fn.output_shape, [_arrange(fwd, row) for row in blocks])

    jacfwd_fun.__s2sad_transform__ = fwd0
    return attach(jacfwd_fun, "jacfwd", fwd0)


def _arrange(t: _Transform, per_leaf: list):
    """Blocks for each differentiated leaf, in the structure of the argument(s) `argnums` names."""
    grouped = t.regroup(per_leaf)
    return grouped[0] if t.single else grouped


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, backend: str = DEFAULT_BACKEND) -> Callable:
    """The Jacobian of `fun` by reverse mode, one vjp per output element (shape out.shape + arg.shape)."""
    if _reaches_into_star_args(fun, argnums):
        return _per_arity(fun, lambda f: jacrev(f, argnums, backend))
    rev0 = _Reverse(fun, argnums, False, backend, "jacrev")

    @functools.wraps(rev0.fun)
    def jacrev_fun(*args, **kwargs):
        rev, flat = rev0.specialize(rev0.bind(args, kwargs))
        rev.check(flat)
        return _arrange(rev, jacobians.by_vjps(rev.primal_fn, rev.vjp_fn, flat, rev.flat_argnums))

    jacrev_fun.__s2sad_transform__ = rev0
    return attach(jacrev_fun, "jacrev", rev0)


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, backend: str = DEFAULT_BACKEND) -> Callable:
    """Second derivatives of a scalar `fun`: forward mode over the generated gradient.

    Shape `arg.shape + arg.shape`; for tuple `argnums` a nested tuple `H[i][j]`; for pytree
    arguments, the argument's structure nested in itself (`H['W']['b']`), as in JAX.
    """
    if _reaches_into_star_args(fun, argnums):
        return _per_arity(fun, lambda f: hessian(f, argnums, backend))
    rev0 = _Reverse(fun, argnums, False, backend, "hessian")

    @functools.wraps(rev0.fun)
    def hessian_fun(*args, **kwargs):
        rev, flat = rev0.specialize(rev0.bind(args, kwargs))
        rev.check(flat)
        leaves = rev.flat_argnums
        J = _hessian_jacobian(rev)(*flat[:len(flat) - len(rev.generated.fn.hidden)])
        if len(leaves) == 1:
            J = ((J,),)
        rows = [_arrange(rev, list(row)) for row in J]
        return _arrange(rev, rows)

    hessian_fun.__s2sad_transform__ = rev0
    return attach(hessian_fun, "hessian", rev0, jacobian=_hessian_jacobian)


def _hessian_jacobian(rev: _Reverse) -> Callable:
    """jacfwd of the gradient `rev` generates, made once per structure (codegen must not run on every call)."""
    if "hessian" not in rev.made.compiled:
        leaves = rev.flat_argnums
        gradient = rev.source_function()  # leaves -> gradient leaves, as generated source
        rev.made.compiled["hessian"] = jacfwd(gradient, leaves[0] if len(leaves) == 1 else leaves, backend=rev.backend)
    return rev.made.compiled["hessian"]


class _AsWritten(_Transform):
    """The function itself, compiled as written: it writes into its caller's arrays as NumPy does."""

    def __init__(self, fun: Callable, argnums, backend: str):
        super().__init__(fun, argnums, backend, "call")

    def normalized(self, trees: dict):
        return normalize(self.fun, arg_trees=trees, arg_kinds=self.arg_kinds(), copy_arguments=False)

    def generate(self, fn_ir) -> Generated:
        return primal_module(fn_ir)

    def cache_key(self) -> tuple | None:
        return ("as written", repr(self.defs)) if all(_printed_whole(d) for d in self.defs or ()) else None


class _Batched(_Transform):
    """The generated batch loop of one function: axis 0 of the batched arguments (leaves, for pytrees)."""

    def __init__(self, fun: Callable, batched: tuple[bool, ...], target: str, backend: str):
        super().__init__(fun, tuple(i for i, b in enumerate(batched) if b) or 0, backend, "vmap", batched=batched,
                         target=target)

    def structured(self, defs: tuple | None, leaf_batched: tuple[bool, ...]) -> "_Batched":
        """The batch loop for arguments of structure `defs` (None: plain arrays) batched leaf by leaf."""
        if defs is None and leaf_batched == self.batched:
            return self
        return self.derive(("batched", defs, leaf_batched), defs=defs, batched=leaf_batched, leaf_counts=None)

    def generate(self, fn_ir) -> Generated:
        if self.target == "cuda":
            from s2sad.codegen.cuda import kernel_module

            if self.kernel_shapes is None:
                raise ValueError("a CUDA kernel is generated for the per-example shapes of its arguments (its "
                                 "local arrays get static sizes): call the vmapped function once, then print "
                                 "its source")
            if fn_ir.hidden:
                raise TypeError(f"vmap(target='cuda') of {fn_ir.name}, which reads arrays from outside its "
                                f"arguments ({', '.join(w.spelled for _, w in fn_ir.hidden)}): pass them as "
                                "arguments with in_axes None")
            return kernel_module(fn_ir, list(self.batched), list(self.kernel_shapes), self.kernel_dtype)
        from s2sad.codegen.vmap import vmap_module

        return vmap_module(fn_ir, list(self.batched) + [False] * len(fn_ir.hidden), self.target)

    def run(self, leaves: list):
        if self.target != "cuda":
            return self.compiled("derivative")(*leaves, *self.hidden_args())
        shapes = tuple(tuple(np.shape(a)[1:] if b else np.shape(a)) for a, b in zip(leaves, self.batched))
        dtype = _kernel_dtype(leaves)
        if ("kernel", shapes, dtype) not in self.made.derived:
            self.ir  # lowered once, for the kernels of all shapes
        kernel = self.derive(("kernel", shapes, dtype), keep_ir=True, kernel_shapes=shapes, kernel_dtype=dtype)
        return kernel.kernel()(*leaves)

    def kernel(self) -> Callable:
        """The CUDA kernel for the per-example shapes of the specification, which size its local arrays."""
        compiled = self.made.compiled
        if "kernel" not in compiled:
            g = self.generated
            compiled["kernel"] = getattr(load_module(g.source, g.stem, "python"), g.derivative)
        return compiled["kernel"]


def _kernel_dtype(leaves) -> str:
    """The precision a CUDA kernel computes in: float32 where its float arrays are all float32."""
    floats = {a.dtype for a in leaves if getattr(a, "dtype", None) is not None and np.dtype(a.dtype).kind == "f"}
    return "float32" if floats == {np.dtype(np.float32)} else "float64"


def _leaf_axes(spec, value, where: str) -> list:
    """The in_axes entry of every leaf of `value`: `spec` is an int/None for all, or a matching pytree."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(tree_flatten(value)[0])
    if isinstance(spec, dict) and isinstance(value, dict) and set(spec) == set(value):
        return [ax for k in sorted(value) for ax in _leaf_axes(spec[k], value[k], f"{where}[{k!r}]")]
    if isinstance(spec, (tuple, list)) and isinstance(value, (tuple, list)) and len(spec) == len(value):
        return [ax for i, (s, v) in enumerate(zip(spec, value)) for ax in _leaf_axes(s, v, f"{where}[{i}]")]
    raise ValueError(f"vmap: in_axes for {where} is {spec!r}, which does not match the argument's structure "
                     f"({type(value).__name__}); use an int, None, or a pytree of those shaped like the argument")


def _check_vmapped_floats(fun: Callable, args: tuple):
    """vmap(grad(f)) and the like: the inner transform's differentiated arguments must be float arrays."""
    t = getattr(fun, "__s2sad_transform__", None)
    if not isinstance(t, (_Reverse, _Forward)):
        return
    for i in t.argnums:
        for leaf in tree_flatten(args[i])[0] if i < len(args) else ():
            _check_float(leaf, t.params[i], i, t.fun.__name__, f"vmap({t.what})")


def vmap(fun: Callable, in_axes=0, out_axes=0, target: str = "cpu", backend: str = DEFAULT_BACKEND) -> Callable:
    """Map `fun` over an axis of its arguments by a generated loop (compiled by numba).

    in_axes: an int for all arguments, or one entry per argument: an int, None for an argument
    passed whole to every example, or a pytree of those shaped like the argument (JAX's rules).
    out_axes: where the batch axis goes in each output.
    target: "cpu" (a serial loop), "parallel" (numba.prange over the batch) or "cuda" (a
    numba.cuda kernel, one thread per example; needs `pip install s2sad[cuda]`).

        per_example_grads = s2sad.vmap(s2sad.grad(loss), in_axes=(None, 0, 0))(W, X, y)
    """
    from s2sad.codegen.vmap import TARGETS

    if target not in TARGETS + ("cuda",):
        raise ValueError(f"vmap target must be one of {TARGETS + ('cuda',)}, got {target!r}")
    per_arity = getattr(fun, "__s2sad_per_arity__", None)
    if per_arity is not None:  # argnums that count into *args: a batch loop per number of arguments
        made: dict = {}

        @functools.wraps(fun)
        def vmapped_per_arity(*args):
            if len(args) not in made:
                made[len(args)] = vmap(per_arity(args, {}), in_axes, out_axes, target, backend)
            return made[len(args)](*args)

        return vmapped_per_arity
    inner = _as_function(fun)
    n_params = len(_user_signature(inner).parameters)
    axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * n_params
    if len(axes) != n_params:
        raise ValueError(f"in_axes has {len(axes)} entries but {inner.__name__} takes {n_params} arguments")
    if all(a is None for a in axes):
        raise ValueError("vmap needs at least one batched argument (an in_axes entry that is not None)")
    rev = getattr(fun, "__s2sad_transform__", None)
    batched_fun = rev.for_target(target).source_function() if isinstance(rev, _Reverse) else fun
    batch = _Batched(batched_fun, tuple(a is not None for a in axes), target, backend)

    @functools.wraps(inner)
    def vmapped(*args):
        if len(args) != n_params:
            raise TypeError(f"{inner.__name__} takes {n_params} arguments, got {len(args)}")
        _check_vmapped_floats(fun, args)
        if all(type(a) in _LEAF_TYPES or _on_gpu(a) for a in args):
            b, leaves, leaf_axes = batch, args, axes
        else:
            leaves, defs, leaf_axes = [], [], []
            for i, (a, axis) in enumerate(zip(args, axes)):
                flat, d = tree_flatten(a)
                leaves += flat
                defs.append(d)
                leaf_axes += _leaf_axes(axis, a, f"argument {i} (`{batch.params[i]}`)")
            b = batch.structured(tuple(defs), tuple(ax is not None for ax in leaf_axes))
            if isinstance(getattr(fun, "__s2sad_transform__", None), _Reverse):
                return _vmap_of_grad(fun.__s2sad_transform__, batch, defs, leaves, leaf_axes, out_axes)
        out = b.run(_batch_first(b, leaves, leaf_axes))
        if b.defs is not None and b.ir.output_shape is not None:
            out = unflatten(b.ir.output_shape, list(out) if isinstance(out, tuple) else [out])
        return _move_out(out, out_axes)

    vmapped.__s2sad_transform__ = batch
    if target == "cuda":  # launched from Python: not callable from numba code
        return vmapped
    return attach(vmapped, "vmap", batch, in_axes=axes, out_axes=out_axes, fun=fun)


def _vmap_of_grad(rev: "_Reverse", batch: _Batched, defs: list, leaves: list, leaf_axes: list, out_axes):
    """vmap(grad(f)) with pytree arguments: batch the gradient specialized to their structure."""
    if rev.what != "grad" or rev.has_aux:
        raise TypeError(f"vmap of {rev.what}{' with has_aux' if rev.has_aux else ''} over pytree arguments is not "
                        "supported; vmap(grad(f)) is, or pass the leaves as separate arguments")
    example = [leaf if ax is None else np.take(leaf, 0, axis=ax) for leaf, ax in zip(leaves, leaf_axes)]
    per_example, n = [], 0
    for d in defs:
        per_example.append(tree_unflatten(d, example[n:n + d.num_leaves]))
        n += d.num_leaves
    r, _ = rev.for_target(batch.target).specialize(tuple(per_example))
    key = ("grad", r.defs, tuple(ax is not None for ax in leaf_axes))
    b = batch.made.derived.get(key)
    if b is None:
        b = batch.made.derived[key] = _Batched(r.source_function(), key[2], batch.target, batch.backend)
    out = b.run(_batch_first(b, leaves, leaf_axes))
    out = list(out) if isinstance(out, tuple) else [out]
    grads = r.regroup([_move_out(o, out_axes) for o in out])
    return grads[0] if r.single else grads


def _batch_first(b: _Batched, leaves, leaf_axes) -> list:
    """The leaves with their batch axis moved to the front; a ValueError naming them if sizes differ."""
    moved, sizes = [], {}
    for i, (a, axis) in enumerate(zip(leaves, leaf_axes)):
        if axis is None:
            moved.append(a)
            continue
        name = b.leaf_name(i) if b.defs is not None else b.params[i]
        if np.ndim(a) == 0:
            raise ValueError(f"vmap: argument {i} (`{name}`) is a scalar, but its in_axes entry is {axis}")
        if axis not in (0, -np.ndim(a)):
            a = np.moveaxis(np.asarray(a), axis, 0)
        sizes[name] = a.shape[0]
        moved.append(a)
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"`{k}` has {v}" for k, v in sizes.items())
        raise ValueError(f"vmap: batched arguments must have the same batch size, but {shown}")
    return moved


def _move_out(out, out_axes):
    """Each output's batch axis (0 as generated) moved to its out_axes entry."""
    if out_axes == 0:
        return out
    if isinstance(out, tuple):
        axes_out = out_axes if isinstance(out_axes, (tuple, list)) else (out_axes,) * len(out)
        return tuple(np.moveaxis(o, 0, k) for o, k in zip(out, axes_out))
    return np.moveaxis(out, 0, out_axes)


_JITTED_MARK = "__s2sad_jit__"  # on what jit returns: source() prints the function numba compiles


def jit(fun: Callable, backend: str = DEFAULT_BACKEND) -> Callable:
    """Compile `fun` with numba (`fun` may be a function s2sad returned).

    For a function s2sad returned: its numba dispatcher (numba_callable.py), which numba code can call
    and which Python calls at the cost of numba's dispatch; arguments numba cannot pass (pytrees) take
    the Python path. Where its parameters have defaults or it runs uncompiled: `fun` itself."""
    if hasattr(fun, "__s2sad_per_arity__"):
        return fun  # compiled inside, per number of arguments
    if hasattr(fun, "__s2sad_transform__") or backend == "python":
        if backend == "numba" and getattr(fun, "__s2sad_numba__", None) is not None and \
                fun.__s2sad_transform__.backend == "numba" and _plain_parameters(fun):
            return jitted(fun)
        return fun  # already compiled inside
    import numba

    dispatcher = numba.njit(cache=False, error_model="numpy")(unwrap(fun))
    setattr(dispatcher, _JITTED_MARK, True)
    return dispatcher


def _plain_parameters(fun: Callable) -> bool:
    """Positional parameters without defaults: numba's dispatcher binds them as Python would."""
    return all(q.kind == q.POSITIONAL_OR_KEYWORD and q.default is q.empty
               for q in fun.__s2sad_transform__.signature.parameters.values())


_UNSET: Any = object()
_SHORTHAND = ("argnums", "has_aux", "mode", "order")


def source(fun: Callable, *args, argnums=_UNSET, has_aux=_UNSET, mode=_UNSET, order=_UNSET) -> str:
    """The program s2sad generates for `fun` (s2sad's `make_jaxpr`), as readable source. numba compiles
    it line for line after the rewrites the README lists under "What numba compiles" (tapes as numba
    lists, views, loops for runs of elementwise lines per signature); the cache keeps that text beside it.

    For a function s2sad returned (`grad`, `value_and_grad`, `jacfwd`, `jacrev`, `hessian`, `vmap`,
    `jit`, or a method of `@differentiate`): the program that function runs. `source(grad(f))` is
    `f_grad` with the primal lines it needs; `source(jacfwd(f))` the jvp and the loop that calls it.
    `args` are example arguments, for code that depends on their ranks, types or structure; without
    them it is the code of the function's last call (or, never called, the code that needs no call).

    For any other function, the shorthand for its derivative's code: the `order`-th derivative in
    mode="rev" (primal, adjoint and `f_grad`; order N differentiates `grad` N-1 more times) or
    mode="fwd" (primal, tangent and `f_jvp_tangent`; forward mode N times). The options may also be
    given in that order by position: `source(f, (0, 1), mode="fwd")`.
    """
    given = {k: v for k, v in zip(_SHORTHAND, (argnums, has_aux, mode, order)) if v is not _UNSET}
    program = _program(fun)
    if program is not None and not given:
        return program(args)
    if len(args) > len(_SHORTHAND):
        raise TypeError(f"source takes at most {len(_SHORTHAND)} options after the function "
                        f"({', '.join(_SHORTHAND)}), got {len(args)} positional arguments")
    positional = dict(zip(_SHORTHAND, args))
    if set(positional) & set(given):
        raise TypeError(f"source got {', '.join(sorted(set(positional) & set(given)))} both by position and by name")
    options = {"argnums": 0, "has_aux": False, "mode": "rev", "order": 1, **positional, **given}
    return _derivative_source(fun, **options)


def _derivative_source(fun: Callable, argnums, has_aux: bool, mode: str, order: int) -> str:
    if mode not in ("fwd", "rev"):
        raise ValueError(f"mode must be 'fwd' or 'rev', got {mode!r}")
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"order must be a positive int, got {order!r}")
    for _ in range(order - 1):
        fun = grad(fun, argnums, has_aux) if mode == "rev" else _tangent_function(fun, argnums)
        has_aux = False
    try:
        if mode == "rev":
            return _Reverse(fun, argnums, has_aux, DEFAULT_BACKEND, "grad").generated.source
        return _Forward(fun, argnums, DEFAULT_BACKEND).generated.source
    except TypesNeeded as exc:
        name = getattr(fun, "__name__", "f")
        raise TypesNeeded(f"{exc}\n  hint: the code is generated for the arguments' types: pass examples through "
                          f"the transformation, s2sad.source(s2sad.grad({name}), *example_args)") from None


def _program(fun: Callable) -> Callable[[tuple], str] | None:
    """For a function s2sad returned: example arguments -> the text of the program it runs."""
    if isinstance(fun, types.MethodType) and isinstance(fun.__self__, differentiate):
        return fun.__self__.program_of(fun.__func__.__name__)
    per_arity = getattr(fun, "__s2sad_per_arity__", None)
    if per_arity is not None:  # argnums count into fun's *args: the program for as many arguments as given
        return lambda args: source(per_arity(args, {}), *args)
    t = getattr(fun, "__s2sad_transform__", None)
    if isinstance(t, _Batched):
        return lambda args: _batched_source(fun, t, args)
    if isinstance(t, _Forward) and t.what == "jacfwd":
        return lambda args: _jacobian_source(_specialized(t, args, fun), "jacfwd", t.fun.__name__)
    if isinstance(t, _Reverse) and t.what == "jacrev":
        return lambda args: _jacobian_source(_specialized(t, args, fun), "jacrev", t.fun.__name__)
    if isinstance(t, _Reverse) and t.what == "hessian":
        return lambda args: _hessian_source(t, args, fun)
    if isinstance(t, (_Reverse, _Forward)):
        return lambda args: _specialized(t, args, fun).generated.source
    if getattr(fun, _JITTED_MARK, False):
        return lambda args: textwrap.dedent(inspect.getsource(fun.py_func))
    return None


def _specialized(t: _Transform, args: tuple, fun: Callable) -> _Transform:
    """The transform `fun` runs for `args`; without them, for its last call, or the one needing no call."""
    if args:
        return t.specialize(t.bind(args, {}))[0]
    last = _last_call(t)
    if last is not t:
        return last
    try:
        t.generated
    except TypesNeeded as exc:
        name = getattr(fun, "__name__", "g")
        raise TypesNeeded(f"source({name}): {exc}\n  hint: call {name}(...) once first, or pass example "
                          f"arguments: s2sad.source({name}, *example_args)") from None
    return t


def _last_call(t: _Transform) -> _Transform:
    """The specialization (argument structure, then ranks and types) that `t`'s last new call made."""
    structural = [v for k, v in t.made.derived.items()
                  if not (isinstance(k, tuple) and k[:1] in (("wrt",), ("recompute_libm",)))]
    return _last_call(structural[-1]) if structural else t


def _jacobian_source(t: _Transform, kind: str, name: str) -> str:
    g = t.generated
    return g.source + "\n\n" + jacobian_driver(g, kind, f"{name}_{kind}", t.flat_argnums, t.single)


def _hessian_source(rev: _Reverse, args: tuple, fun: Callable) -> str:
    """The jvp module of the gradient `rev` generates, and the jacfwd loop over it that hessian runs."""
    rev = _specialized(rev, args, fun)
    jf = _hessian_jacobian(rev)
    inner = jf.__s2sad_transform__
    if args:
        flat = rev.specialize(rev.bind(args, {}))[1]
        inner = _specialized(inner, flat[:len(flat) - len(rev.generated.fn.hidden)], jf)
    else:
        inner = _last_call(inner)
    return _jacobian_source(inner, "hessian", rev.fun.__name__)


def _batched_source(fun: Callable, batch: "_Batched", args: tuple) -> str:
    """The batch loop (or CUDA kernel) `fun` runs; with example arguments, generated for them by a call."""
    if args:
        fun(*args)
    return _last_call(batch).generated.source


def _jvp_function(fun: Callable, backend: str) -> Callable:
    """`jvp(fun, primals, tangents)` as a function of (primals, tangents), which numba code can call."""
    def jvp_of(primals, tangents):
        return jvp(fun, primals, tangents, backend=backend)

    forward = _Forward(fun, 0, backend)  # (its name and signature; the call specializes to all primals)
    jvp_of.__name__ = f"{forward.fun.__name__}_jvp"
    return attach(jvp_of, "jvp", forward, ["primals", "tangents"],
                  forward=lambda n: _forward(fun, tuple(range(n)), backend))


def _tangent_function(fun, argnums) -> types.FunctionType:
    """`f_jvp_tangent(*args, *tangents)` of `fun` as Python source: forward mode's derivative function."""
    return _Forward(fun, argnums, DEFAULT_BACKEND).source_function()


class differentiate:
    """Decorator: the function still runs (numba-compiled) and grows derivative methods.

        @s2sad.differentiate
        def loss(w, x): ...

        loss(w, x)                      # compiled primal
        loss.grad(w, x)                 # gradient w.r.t. argnums (default 0)
        loss.value_and_grad(w, x)
        loss.jvp((w, x), (dw, dx))      # (out, tangent_out)
        loss.vjp(w, x)                  # (out, vjp_fun)
        loss.hessian(w, x)              # second derivatives w.r.t. argnums
        print(loss.source())            # the generated adjoint code (mode="fwd" for the tangent code)
    """

    NUMBA_METHODS = ("grad", "value_and_grad", "hessian", "jvp")  # callable from numba code (numba_callable.py)

    def __init__(self, fun: Callable | None = None, *, argnums=0, has_aux=False, backend=DEFAULT_BACKEND):
        self._options = dict(argnums=argnums, has_aux=has_aux, backend=backend)
        self._compiled = None
        self._grad = self._vag = self._hessian = self._jvp = self._call = None
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
            self._compiled = _AsWritten(self.__s2sad_fun__, 0, self._options["backend"])
        plain, leaves = self._compiled.specialize(self._compiled.bind(args, kwargs))
        return _called(plain.primal_fn, *leaves)

    def grad(self, *args, **kwargs):
        if self._grad is None:
            self._grad = grad(self.__s2sad_fun__, **self._options)
        return self._grad(*args, **kwargs)

    def value_and_grad(self, *args, **kwargs):
        if self._vag is None:
            self._vag = value_and_grad(self.__s2sad_fun__, **self._options)
        return self._vag(*args, **kwargs)

    def jvp(self, primals, tangents):
        return jvp(self.__s2sad_fun__, primals, tangents, backend=self._options["backend"])

    def vjp(self, *primals):
        return vjp(self.__s2sad_fun__, *primals, has_aux=self._options["has_aux"], backend=self._options["backend"])

    def hessian(self, *args, **kwargs):
        if self._hessian is None:
            self._hessian = hessian(self.__s2sad_fun__, self._options["argnums"], backend=self._options["backend"])
        return self._hessian(*args, **kwargs)

    def public(self, method: str) -> Callable:
        """The function s2sad returns for `method` (grad(fun), ...): what numba code calls for `loss.grad`."""
        fun, backend = self.__s2sad_fun__, self._options["backend"]
        if method == "grad":
            self._grad = self._grad or grad(fun, **self._options)
            return self._grad
        if method == "value_and_grad":
            self._vag = self._vag or value_and_grad(fun, **self._options)
            return self._vag
        if method == "hessian":
            self._hessian = self._hessian or hessian(fun, self._options["argnums"], backend=backend)
            return self._hessian
        if method == "jvp":
            self._jvp = self._jvp or _jvp_function(fun, backend)
            return self._jvp
        if method == "__call__":  # the function itself, compiled as written
            if self._compiled is None:
                self._compiled = _AsWritten(fun, 0, backend)
            if self._call is None:
                self._call = attach(functools.wraps(fun)(lambda *args: self(*args)), "call", self._compiled)
            return self._call
        raise AttributeError(method)

    @property
    def _numba_type_(self):
        """numba's type for this object in numba code (numba_callable.py): `loss.grad(w, x)` there."""
        from s2sad.numba_callable import DifferentiateType

        return DifferentiateType(self)

    def program_of(self, method: str) -> Callable[[tuple], str] | None:
        """For `source(loss.grad)` and the like: the program that method runs (see `source`)."""
        fun, backend = self.__s2sad_fun__, self._options["backend"]
        everything = tuple(range(len(_user_signature(_as_function(fun)).parameters)))
        if method == "grad":
            self._grad = self._grad or grad(fun, **self._options)
            return _program(self._grad)
        if method == "value_and_grad":
            self._vag = self._vag or value_and_grad(fun, **self._options)
            return _program(self._vag)
        if method == "hessian":
            self._hessian = self._hessian or hessian(fun, self._options["argnums"], backend=backend)
            return _program(self._hessian)
        if method == "jvp":  # what jvp(fun, primals, tangents) runs: the jvp in every argument
            found = _forward(fun, everything, backend)
        elif method == "vjp":
            found = _reverse(fun, everything, self._options["has_aux"], backend, "vjp")
        else:
            return None
        return lambda args: _specialized(found, args, getattr(self, method)).generated.source

    def source(self, argnums=None, has_aux=None, mode: str = "rev", order: int = 1) -> str:
        argnums = self._options["argnums"] if argnums is None else argnums
        has_aux = self._options["has_aux"] if has_aux is None else has_aux
        return _derivative_source(self.__s2sad_fun__, argnums, has_aux, mode, order)


numba_callable.install(differentiate, jvp, lambda f: _memo(("numba jvp", f), lambda: _jvp_function(f, DEFAULT_BACKEND)))
# normalize lowers user code that calls these (`s2sad.grad(g)(x)` inside f), and sits below this module.
register_transformations((grad, value_and_grad, vmap), jvp,
                         lambda f, n: _forward(f, tuple(range(n)), "python").generated)
