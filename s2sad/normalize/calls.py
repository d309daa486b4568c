"""Calls: NumPy and math functions with rules, array methods, output arguments (`out=`), np.where and
the index-array functions, np.array / np.stack / np.concatenate of sequences, @vectorize and
@guvectorize functions, and s2sad's own transformations called inside user code. (Python functions are
inlined by lowerer.py; builtins and containers are in iteration.py.)
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import types
from dataclasses import dataclass
import typing
from typing import Any, Callable

import libcst as cst
import numpy as np

from s2sad import ir, rules
from s2sad.backend import load_module
from s2sad.errors import UnsupportedError
from s2sad.frontend import unwrap
from s2sad.hidden import Hidden
from s2sad.ir import Const, Copy, For, Load, Prim, Slice, Store, Var
from s2sad.objects import LocalObject, is_namedtuple
from s2sad.rules import inlined
from s2sad.rules.registry import Custom
from s2sad.units import pointwise
from s2sad.normalize.pytrees import _constant_tuple, _numbers_tree, flatten, is_tree, unflatten
from s2sad.normalize.state import _NOT_STATIC, NestedFunction, NumberType, Positions, StaticRef, UnknownKinds
from s2sad.normalize.static import _folded, _in_library, _is_own_generator, _user_class, calls_its_call_method
from s2sad.normalize.syntax import _walk
from s2sad.normalize.tables import METHOD_HINT, METHODS, SEQUENCE_CALLS, SHAPE_FIRST, TUNING_KEYWORDS, VARARG_METHODS


@dataclass
class Transformations:
    """s2sad's own transformations, as user code calls them inside a function it lowers (`s2sad.grad(g)(x)`,
    `s2sad.jvp(f, (x,), (dx,))`). api.py defines them and lowers functions, so it sits above this module:
    it hands them down at import (`register_transformations`) rather than this module importing it."""

    evaluated: tuple = ()  # grad, value_and_grad, vmap: called while lowering; the function they return is inlined
    jvp: Any = None  # s2sad.jvp: the tangent function of its first argument is inlined
    tangent: Callable | None = None  # (fn, n) -> the Generated forward module of `fn` in its first n arguments

    def is_jvp(self, fn) -> bool:
        return self.jvp is not None and fn is self.jvp


TRANSFORMATIONS = Transformations()


def register_transformations(evaluated: tuple, jvp: Callable, tangent: Callable) -> None:
    """Called once by api.py, which defines them: see Transformations."""
    TRANSFORMATIONS.evaluated, TRANSFORMATIONS.jvp, TRANSFORMATIONS.tangent = evaluated, jvp, tangent


class CallsMixin:
    def call(self, node: cst.Call, out, target):
        if any(a.star for a in node.args):
            node = self.spread(node, out)
        if isinstance(node.func, cst.Call) and self.makes_object(node.func):  # `make_loss(k)(x)`, `Model(w)(x)`
            made = self.value(node.func, out)
            if isinstance(made, StaticRef):
                node = node.with_changes(func=self.kept(made))
        if isinstance(node.func, cst.Attribute) and self.makes_object(node.func.value):  # `KDE(h).fit(x)`
            made = self.value(node.func.value, out)
            if isinstance(made, StaticRef):
                node = node.with_changes(func=node.func.with_changes(value=self.kept(made)))
        if isinstance(node.func, cst.Call) and self.static_value(node.func.func) is np.vectorize:  # np.vectorize(f)(x)
            return self.numpy_vectorized(node, self.static_vectorize(node.func), [], out, target)
        if isinstance(node.func, cst.Call) and self.callee_is(node.func.func, type):  # `type(scale)(1)`
            return self.in_type_of(node, self.type_of(node.func, out).obj, out, target)
        if isinstance(node.func, cst.Call):  # `s2sad.grad(g, argnums=1)(x, y)`
            return self.apply(node, self.static_transform(node.func), [], out, target)
        if self.is_frozen_distribution(node.func):  # `norm(mu, s).logpdf(x)` is `norm.logpdf(x, mu, s)`
            frozen = node.func.value
            node = node.with_changes(func=node.func.with_changes(value=frozen.func), args=[*node.args, *frozen.args])
        if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call) and \
                self.callee_is(node.func.value.func, super):  # `super().__init__(d)`
            method = self.super_method(node.func)
            if method is None:
                return Const(None)
            owner = StaticRef(method.obj.__self__, method.where and method.where.then("attr", "__self__"))
            return self.inline(node, method.obj.__func__, [owner], out, target)
        ref = self.static_ref(node.func)
        fn = _NOT_STATIC if ref is None else ref.obj
        if isinstance(fn, LocalObject):  # `model(x)` of an object the function built, with a `__call__`
            ref = StaticRef(fn.class_attribute("__call__"), None)
            fn = ref.obj
        if (_user_class(fn) or is_namedtuple(fn)) and rules.lookup_object(fn) is None:
            return self.construct(node, ref, out)
        if isinstance(fn, NestedFunction):
            return self.inline_nested(node, fn, out, target)
        if _is_own_generator(getattr(fn, "__self__", None)) and ref.where is not None \
                and ref.where.steps[-1][0] == "attr":  # `RNG.normal(...)`, `self.rng.random()`: the user's generator
            return self.draw(node, out, target, self.hidden_generator(Hidden(ref.where.owner, ref.where.steps[:-1])))
        if fn is type:
            return self.type_of(node, out)
        if isinstance(fn, NumberType):
            return self.in_type_of(node, fn, out, target)
        if fn in _SHAPED_LIKE and any(a.keyword and a.keyword.value == "shape" for a in node.args):
            return self.call(self.made_in_shape(node, fn), out, target)
        if fn is typing.cast:  # `cast("float", backcast)` is `backcast`: Python checks nothing
            value = self.value(self.bound_arguments(node, fn)["val"], out)
            return self.emit(out, target, Copy(value)) if target is not None and not is_tree(value) else value
        if fn is np.ndim and len(node.args) == 1 and node.args[0].keyword is None:  # as `x.ndim` reads it
            return self.ndim_of(self.expr(node.args[0].value, out), out, target)
        if (written := inlined.stand_in(fn)) is not None:  # scipy.linalg.cho_solve: NumPy written out
            if written in inlined.AT_SEVERAL and len(node.args) > 1 and (isinstance(
                    node.args[1].value, (cst.List, cst.Tuple)) or isinstance(self.tree_of(node.args[1].value), list)):
                written = inlined.AT_SEVERAL[written]  # np.quantile(x, [0.1, 0.9])
            return self.inline(node, written, [], out, target)
        if calls_its_call_method(fn):  # `loss_fn(x)` of an object with a Python `__call__`
            ref = StaticRef(fn.__call__, ref.where.then("attr", "__call__") if ref.where else None)
            fn = ref.obj
        if isinstance(fn, types.MethodType) and isinstance(unwrap(fn.__func__), types.FunctionType) \
                and rules.lookup_object(fn) is None and not _in_library(unwrap(fn.__func__)):  # (norm.cdf has a rule)
            owner = self.seen(StaticRef(fn.__self__, ref.where.then("attr", "__self__") if ref.where else None))
            return self.inline(node, unwrap(fn.__func__), [owner], out, target)
        if TRANSFORMATIONS.is_jvp(fn):
            return self.inline_jvp(node, out, target)
        if fn is _NOT_STATIC:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" and \
                    isinstance(table := self.tree_of(node.func.value), dict):  # `params.get("eps", 1e-5)`
                return self.dict_get(node, table, out)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item" and node.args:
                return self.item_at(node, out, target)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in METHODS:
                receiver = self.expr(node.func.value, out)
                method = node.func.attr.value
                positional = [a for a in node.args if a.keyword is None]
                if method in VARARG_METHODS and len(positional) > 1:
                    packed = cst.Arg(cst.Tuple([cst.Element(a.value) for a in positional]))
                    node = node.with_changes(args=[packed] + [a for a in node.args if a.keyword is not None])
                return self.apply(node, METHODS[method], [receiver], out, target)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "astype":
                return self.astype(node, out, target)
            if _is_dtype_type(node.func) and len(node.args) == 1 and node.args[0].keyword is None:  # x.dtype.type(1)
                like = self.expr(node.func.value.value, out)
                return self.prim(out, "number_like", (self.expr(node.args[0].value, out), like), target=target,
                                 hint="number")
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "pop" and not node.args \
                    and isinstance(node.func.value, cst.Name) and node.func.value.value in self.locals:
                return self.prim(out, "tape_pop", (Var(self.var(node.func.value.value)),), target=target,
                                 hint="popped")
            if self.draws_from_generator(node):
                return self.draw(node, out, target)
            what = cst.Module([]).code_for_node(node.func)
            raise self.err(node, f"cannot call `{what}`: s2sad only calls NumPy/math functions with rules "
                                 "and other Python functions", METHOD_HINT)
        written = _output_argument(node, fn)
        if written is not None:
            return self.into_output(node, fn, written, out)
        result = self.apply(node, fn, [], out, target)
        return result

    def type_of(self, node: cst.Call, out) -> StaticRef:
        """`type(z)` of a number: a constructor of numbers of z's precision."""
        if len(node.args) != 1 or node.args[0].keyword or node.args[0].star:
            raise self.err(node, "type() takes one argument here")
        like = self.expr(node.args[0].value, out)
        if isinstance(like, Const):
            return StaticRef(type(like.value), None)
        if self.known_rank(like, required=True) != 0:
            raise self.err(node, "type() is supported of a number, as a constructor of numbers of its precision",
                           "for an array's, write x.dtype.type(v) or v.astype(x.dtype)")
        return StaticRef(NumberType(like), None)

    def in_type_of(self, node: cst.Call, made: NumberType, out, target):
        """`T(v)` of `T = type(z)`: v as a number of z's precision (`float(v)` where z is a float)."""
        if len(node.args) != 1 or node.args[0].keyword or node.args[0].star:
            raise self.err(node, "a number type takes one argument here")
        value = self.expr(node.args[0].value, out)
        return self.prim(out, "number_like", (value, made.like), target=target, hint="number")

    def made_in_shape(self, node: cst.Call, fn) -> cst.Call:
        """`np.zeros_like(x, dtype=d, shape=s)` is `np.zeros(s, dtype=d)`, where `dtype` defaults to x's (numba's
        zeros_like takes no `shape`); likewise ones_like, empty_like and full_like."""
        bound = self.bound_arguments(node, fn)
        if set(bound) - {"a", "dtype", "shape", "fill_value"}:
            raise self.err(node, f"np.{fn.__name__}() with `shape=` takes a, fill_value, dtype and shape here")
        dtype = bound.get("dtype", cst.Attribute(bound["a"], cst.Name("dtype")))
        args = [cst.Arg(bound["shape"])] + ([cst.Arg(bound["fill_value"])] if "fill_value" in bound else [])
        return node.with_changes(func=self.kept(StaticRef(_SHAPED_LIKE[fn], None)),
                                 args=args + [cst.Arg(dtype, keyword=cst.Name("dtype"))])

    def item_at(self, node: cst.Call, out, target):
        """`x.item(k)`, the k-th entry of x in C order, is `np.ravel(x)[k]`; `x.item(i, j)` is `x[i, j]`."""
        if any(a.keyword is not None or a.star for a in node.args):
            raise self.err(node, "write .item() with positions alone", "x.item(0), x.item(i, j)")
        receiver = self.expr(node.func.value, out)
        if len(node.args) > 1:
            base = receiver
        else:  # a NumPy number has .item(0) too
            base = self.prim(out, "ravel", (self.prim(out, "atleast_1d", (receiver,)),), hint="flat")
        positions = [cst.SubscriptElement(cst.Index(a.value)) for a in node.args]
        return self.load(cst.Subscript(node.func.value, positions), base, out, target)

    def dict_get(self, node: cst.Call, table: dict, out):
        if not 1 <= len(node.args) <= 2 or any(a.keyword for a in node.args):
            raise self.err(node, "dict.get takes a key and an optional default")
        key = self.static_key(node.args[0].value)
        if key in table:
            return table[key]
        return self.value(node.args[1].value, out) if len(node.args) == 2 else Const(None)

    def into_output(self, node: cst.Call, fn, written: cst.Arg, out):
        """`np.add(a, b, out)`, `np.sqrt(d, out=d)`, `np.dot(a, b, c)`: the result is written into the
        output array, and the call's value is that array, as NumPy does. `out=np.zeros_like(a)` is a fresh
        array; a ufunc's `where=mask` keeps the output's items where the mask is false."""
        local = isinstance(written.value, cst.Name) and written.value.value in self.locals
        fresh = isinstance(written.value, cst.Call) and self.static_value(written.value.func) in FRESH_OUTPUTS
        if not local and not fresh:
            raise self.err(written, "an output argument must be a local array variable (`out=d`) or a new array",
                           "assign the result instead: `d[:] = np.sqrt(d)`")
        where = next((a for a in node.args if a.keyword is not None and a.keyword.value == "where"), None)
        rest = node.with_changes(args=[a for a in node.args if a is not written and a is not where])
        mask = None if where is None else self.masked_inputs(where, rest, fn, out)
        result = self.apply(rest, fn, [], out, None) if mask is None else \
            self.apply(rest.with_changes(args=rest.args[fn.nin:]), fn, mask[1], out, None)
        if is_tree(result):
            raise self.err(written, "only functions with one result can write into an output argument")
        kept = Var(self.var(written.value.value)) if local else self.expr(written.value, out)
        if mask is not None:
            result = self.prim(out, "where", (mask[0], result, kept))
        if not local:
            return result
        out.append(Store(kept.name, (ir.Slice(None, None, None),), result, self.loc))
        return kept

    def masked_inputs(self, where: cst.Arg, call: cst.Call, fn, out):
        """`where=mask` of a ufunc: the mask, and the inputs with 1.0 where it is false, so that the items
        NumPy skips (`b == 0` in `np.divide(a, b, where=b != 0)`) send no inf or nan into the derivative."""
        inputs = [a for a in call.args[:getattr(fn, "nin", 0)] if a.keyword is None and not a.star]
        if not isinstance(fn, np.ufunc) or len(inputs) != fn.nin:
            raise self.err(where, "`where=` is an argument of NumPy's ufuncs, with their inputs given by position")
        mask = self.expr(where.value, out)
        return mask, [self.prim(out, "where", (mask, self.expr(a.value, out), Const(1.0)), hint="kept") for a in inputs]

    def spread(self, node: cst.Call, out) -> cst.Call:
        """`f(x, *args, **options)` with a static tuple and dict: one argument per item, each read from the
        lowered container (kept under a name no user code has)."""
        args = []
        for a in node.args:
            if not a.star:
                args.append(a)
                continue
            value = self.value(a.value, out)
            if not (isinstance(value, dict) if a.star == "**" else isinstance(value, (tuple, list))):
                kind = "dict" if a.star == "**" else "tuple or list"
                raise self.err(a, f"`{a.star}` unpacks a {kind} whose items s2sad knows when it generates code",
                               "pass the arguments one by one")
            name = self.names.fresh("spread")
            self.trees[name] = value
            items = list(value) if a.star == "**" else range(len(value))
            for key in items:
                index = cst.SimpleString(repr(key)) if a.star == "**" else cst.Integer(str(key))
                item = cst.Subscript(cst.Name(name), [cst.SubscriptElement(cst.Index(index))])
                args.append(cst.Arg(item, keyword=cst.Name(key) if a.star == "**" else None))
        return node.with_changes(args=args)

    def is_frozen_distribution(self, func) -> bool:
        """`dist(...).method`, where `dist` is an object whose methods have rules (scipy.stats.norm)."""
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call)):
            return False
        dist = self.static_value(func.value.func)
        return rules.registry.is_namespace(dist) or inlined.written_out_distribution(dist)

    def static_transform(self, node: cst.Call):
        """Evaluate `s2sad.grad(g, ...)` now: its generated wrapper is then inlined like any callee."""
        fn = self.static_value(node.func)
        if fn not in TRANSFORMATIONS.evaluated:
            raise self.err(node, "a called expression must be a function name, `s2sad.grad(...)`, "
                                 "`s2sad.value_and_grad(...)` or `s2sad.vmap(...)`")
        try:
            args = [self.static_arg(a.value) for a in node.args if a.keyword is None]
            kwargs = {a.keyword.value: self.static_arg(a.value) for a in node.args if a.keyword is not None}
            return fn(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise self.err(node, f"bad transformation inside the function: {exc}") from None

    def inline_jvp(self, node: cst.Call, out, target):
        """`s2sad.jvp(f, (x, ...), (dx, ...))`: inline f's generated tangent function."""
        if len(node.args) != 3 or any(a.keyword for a in node.args) or \
                not all(isinstance(a.value, cst.Tuple) for a in node.args[1:]):
            raise self.err(node, "inside a differentiated function, write `s2sad.jvp(f, (x, ...), (dx, ...))`")
        fn = self.static_arg(node.args[0].value)
        primals, tangents = (node.args[i].value.elements for i in (1, 2))
        if len(primals) != len(tangents):
            raise self.err(node, "jvp needs as many tangents as primals")
        n = len(primals)
        g = TRANSFORMATIONS.tangent(fn, n)
        if g.fn.returns_tuple:
            raise self.err(node, "jvp of a tuple-valued function is not supported inside a differentiated function")
        tangent_fn = getattr(load_module(g.source, g.stem, "python"), g.derivative)
        call = node.with_changes(func=cst.Name(tangent_fn.__name__), args=[
            cst.Arg(e.value) for e in list(primals) + list(tangents)])
        return self.inline(call, tangent_fn, [], out, target)

    def apply(self, node, fn, leading, out, target):
        if not leading and any(fn is b for b in (max, min, sum, any, all, math.prod, list, tuple, dict)):
            return self.builtin_call(node, fn, out, target)
        if fn is functools.reduce and not leading:
            return self.folded_call(node, out, target)
        if fn is len and len(node.args) == 1 and not leading:
            operand = node.args[0].value
            if isinstance(operand, cst.Attribute) and operand.attr.value == "shape":  # `len(x.shape)` is x.ndim
                return self.ndim_of(self.expr(operand.value, out), out, target)
            value = self.value(operand, out)
            if is_tree(value):
                return Const(len(value))
            return self.prim(out, "len", (value,), target=target, hint="n")
        if fn is range:  # `p[range(m), y]`: the integers as an index array
            fn = np.arange
        if fn is np.pad and (mode := _pad_mode(node, leading)) is not None:
            mode = self.value(mode, out)
            if mode != Const("constant"):
                return self.pad_in_mode(node, mode.value if isinstance(mode, Const) else mode, leading, out, target)
        keywords = frozenset(a.keyword.value for a in node.args if a.keyword is not None)
        if fn is np.trace and inlined.trace not in self.stack and (node.args or leading):
            node, leading = self.operand_lowered(node, leading, out)
            if keywords & {"axis1", "axis2"} or (self.known_rank(leading[0]) or 2) > 2:  # not a matrix's diagonal
                return self.inline(node, inlined.trace, leading, out, target)
        if fn is np.linalg.norm and "axis" not in keywords and \
                self.static_number(_norm_ord(node, leading)) in _SUMS_ORDS:
            node, leading = self.operand_lowered(node, leading, out)
            if self.known_rank(leading[0]) == 2:  # a matrix's largest or smallest column or row sum
                return self.inline(node, inlined.norm_of_sums, leading, out, target)
        if (keywords or leading) and (written := inlined.stand_in(fn, keywords)) is not None:  # `x.max(initial=0.0)`
            return self.inline(node, written, leading, out, target)
        if fn is np.clip and keywords & {"min", "max", "a_min", "a_max"}:
            node = _one_sided_clip(node, len(leading))
        if fn in _ORDER_POSITION and not any(a.star for a in node.args):
            node, reversed_layout = self.layout_order(node, fn, leading)
            if reversed_layout:
                return self.in_fortran_order(node, fn, leading, out, target)
        if isinstance(fn, Custom):
            if fn in self.plain:
                return self.inline(node, fn.fun, leading, out, target)
            if any(a.keyword for a in node.args) or leading:
                raise self.err(node, f"call custom function `{fn.name}` with positional arguments")
            args = [self.expr(a.value, out) for a in node.args]
            if len(args) != len(fn.params):
                raise self.err(node, f"`{fn.name}` takes {len(fn.params)} arguments, got {len(args)}")
            return self.emit(out, target or self.temp(fn.name), Prim(fn.rule(), tuple(args)))
        if (fn is np.where or fn is np.nonzero) and len(node.args) == 1 and not leading:
            return self.positions(node.args[0].value, out)
        if fn is np.where and len(node.args) == 3 and not leading and not any(a.keyword or a.star for a in node.args):
            return self.guarded_where(node, out, target)
        if fn in (np.diag_indices, np.diag_indices_from) and not leading:
            return self.diagonal_positions(node, fn, out)
        if fn in TRIANGLES and not leading:
            return self.triangle_positions(node, fn, out)
        if fn in (np.asarray, np.asanyarray) and len(node.args) == 1 and self.names_a_container(node.args[0].value):
            fn = np.array  # `np.asarray(args)` of a tuple of numbers (`*args`): a new array
        if fn in (np.asarray, np.asanyarray) and not leading and (dtype := _static_dtype_arg(self, node)) is not None \
                and dtype not in (np.float64, np.float32):  # `np.asarray(x, dtype=np.int64)`: no derivative
            return self.cast(node, self.expr(node.args[0].value, out), Const(dtype), False, out, target)
        if fn in SEQUENCE_CALLS:
            return self.sequence_call(node, fn, out, target)
        if fn is np.linalg.slogdet:  # a tuple-valued primitive: two primitives, paired statically
            if len(node.args) != 1 or node.args[0].keyword is not None:
                raise self.err(node, "np.linalg.slogdet takes one matrix")
            a = self.expr(node.args[0].value, out)
            return (self.prim(out, "slogdet_sign", (a,), hint="sign"),
                    self.prim(out, "logabsdet", (a,), hint="logdet"))
        if fn is np.linalg.eigh:  # (eigenvalues, eigenvectors) of the symmetric matrix its lower triangle makes
            if len(node.args) != 1 or node.args[0].keyword is not None:
                raise self.err(node, "np.linalg.eigh takes one matrix here (its lower triangle, UPLO='L')")
            a = self.expr(node.args[0].value, out)
            return (self.prim(out, "eigvalsh", (a,), hint="eigenvalues"),
                    self.prim(out, "eigh_vectors", (a,), hint="eigenvectors"))
        if fn is np.ndarray:  # `np.ndarray(shape, dtype)` makes an uninitialized array, as np.empty does
            fn = np.empty
        if fn in SHAPE_FIRST and node.args and isinstance(node.args[0].value, cst.List):  # np.zeros([n, m])
            shape = node.args[0].value
            node = node.with_changes(args=[node.args[0].with_changes(value=cst.Tuple(shape.elements)), *node.args[1:]])
        elif fn in SHAPE_FIRST and node.args and isinstance(items := self.tree_of(node.args[0].value), list):
            shape = self.names.fresh("shape")  # `shape = list(x.shape); shape[0] = n; np.zeros(shape)`
            self.trees[shape] = tuple(items)
            node = node.with_changes(args=[node.args[0].with_changes(value=cst.Name(shape)), *node.args[1:]])
        if fn is np.isscalar and len(node.args) == 1 and not leading and node.args[0].keyword is None:
            return self.isscalar_call(node.args[0].value, out, target)
        if fn is np.float_power and len(node.args) == 2 and not any(a.keyword or a.star for a in node.args):
            base = self.prim(out, "as_float", (self.prim_arg(node.args[0].value, out),), hint="base")
            return self.prim(out, "pow", (base, self.prim_arg(node.args[1].value, out)), target=target)  # in float64
        if fn in (np.prod, np.sum) and len(node.args) == 1 and not leading and node.args[0].keyword is None \
                and _names_a_shape(node.args[0].value):  # `np.prod(img.shape[:2])`: numba's takes no tuple
            if self.is_static_iterable(node.args[0].value):
                return self.builtin_call(node, {np.prod: math.prod, np.sum: sum}[fn], out, target)
            dims = self.prim(out, "asarray", (self.expr(node.args[0].value, out),), hint="dims")
            rule, spelled = rules.lookup_object(fn)
            return self.emit(out, target or self.temp(rule.name), Prim(rule, (dims,), (), spelled))
        if fn in (np.float64, np.float32) and len(node.args) == 1 and not leading and node.args[0].keyword is None \
                and not node.args[0].star:  # `np.float64(x)`: float(x) of a number, x.astype(np.float64) of an array
            return self.cast(node, self.expr(node.args[0].value, out), Const(np.dtype(fn)), True, out, target)
        if fn is np.einsum and not leading and node.args and node.args[0].keyword is None \
                and isinstance(spec := self.prim_arg(node.args[0].value, out), Const) and isinstance(spec.value, str) \
                and ("..." in spec.value or spec.value.count(",") > 1):
            return self.einsum_spelled_out(node, spec.value, out, target)
        found = rules.lookup_object(fn)
        if fn in ACCUMULATES_IN_DTYPE and any(a.keyword and a.keyword.value == "dtype" for a in node.args):
            node, leading = self.operand_in_dtype(node, leading, out)
        if found is not None:
            if any(a.star for a in node.args):
                raise self.err(node, "`*args` / `**kwargs` in calls are not supported")
            args = leading + [self.prim_arg(a.value, out) for a in node.args if a.keyword is None]
            kwargs = [(a.keyword.value, self.prim_arg(a.value, out)) for a in node.args if a.keyword is not None
                      and a.keyword.value not in TUNING_KEYWORDS.get(fn, ())]
            rule = found[0]
            if rule.operator and kwargs:
                op = rules.registry.OPERATORS[rule.operator][0]
                raise self.err(node, f"{found[1]}() with keyword arguments ({kwargs[0][0]}=...) is not supported",
                               f"write the operator `{op}` and assign the result")
            if rule.differentiable:
                t = rule.template()
                n_pos, given = len(t.params) - 2, len(args) + len(kwargs)
                required = [p for p in t.params[2 + len(args):] if p not in t.defaults and p not in dict(kwargs)]
                if len(args) > n_pos:
                    raise self.err(node, f"{found[1]}() takes at most {n_pos} positional arguments here")
                if required and given < n_pos:
                    raise self.err(node, f"{found[1]}() is missing argument(s) {', '.join(required)}")
                args, kwargs = _keywords_in_place(t, args, kwargs)
            if (unknown := _keywords_not_taken(rule, kwargs)):
                raise self.err(node, f"{found[1]}() with `{unknown}=` is not supported (s2sad's {rule.print_as} "
                                     "does not take it)", _KEYWORD_HINTS.get(unknown, _KEYWORD_HINT))
            if (ignored := _keywords_its_derivative_ignores(fn, rule, kwargs)):
                raise self.err(node, f"{found[1]}() with `{ignored}=` is not supported: its derivative rule does not "
                                     "read it", _KEYWORD_HINTS.get(ignored, _KEYWORD_HINT))
            folded = _folded(fn, args, kwargs)
            if folded is not None:  # `dot(B, u)` of filterpy's defaults B=1, u=0: a number now
                return self.expr_result(folded, out, target)
            if rule.name == "squeeze" and len(args) == 1 and _without_axis(kwargs):
                args, kwargs = [args[0], self.unit_axes_of(args[0])], ()
                if args[1].value == ():  # no axis of length one: the array itself
                    return self.expr_result(args[0], out, target)
            return self.emit(out, target or self.temp(rule.name), Prim(rule, tuple(args), tuple(kwargs), found[1]))
        if isinstance(fn, np.vectorize):  # `@np.vectorize` or `vf = np.vectorize(f)`
            return self.numpy_vectorized(node, fn, leading, out, target)
        scalar_code = getattr(getattr(fn, "_dispatcher", None), "py_func", None)  # a numba.vectorize ufunc
        if isinstance(scalar_code, types.FunctionType) and _gufunc_layout(fn) is not None:
            return self.gufunc_call(node, fn, scalar_code, leading, out, target)
        if isinstance(scalar_code, types.FunctionType):
            return self.vectorized(node, scalar_code, leading, out, target)
        inner = unwrap(fn)
        if isinstance(inner, types.FunctionType) and not _in_library(inner):
            return self.inline(node, inner, leading, out, target)
        return self.opaque_call(node, fn, out, target, leading=leading)

    def pad_in_mode(self, node: cst.Call, mode, leading, out, target):
        """np.pad(x, widths, mode='edge' / 'wrap' / 'reflect' / 'symmetric'): reads of x's items (rules/inlined.py)
        for widths known when the code is generated."""
        if mode not in ("edge", "wrap", "reflect", "symmetric"):
            raise self.err(node, f"np.pad in mode {mode!r} is not supported",
                           "s2sad pads in modes 'constant', 'edge', 'wrap', 'reflect' and 'symmetric'")
        args = [a.value for a in node.args if a.keyword is None] + \
            [a.value for a in node.args if a.keyword is not None and a.keyword.value == "pad_width"]
        array = leading[0] if leading else self.expr(args[0], out)
        widths = self.value(args[1 - len(leading)], out)
        if not all(isinstance(w, Const) and type(w.value) is int for w in flatten(widths)[0]):
            raise self.err(node, f"np.pad in mode {mode!r} needs its pad widths known when the code is generated",
                           "write the widths as ints in the call, or pass them as int arguments")
        rank = self.operand_ranks(node, [array], f"np.pad in mode {mode!r} needs the rank of the array it pads")[0]
        pairs = inlined.pad_pairs(_constant_tuple(widths), rank)
        return self.inline(node.with_changes(args=[]), inlined.padded_in_mode(pairs, mode), [array], out, target)

    def layout_order(self, node: cst.Call, fn, leading) -> tuple[cst.Call, bool]:
        """The call without its `order` argument, and whether that order is 'F' (items read with the
        first index fastest). 'A' and 'K' follow the array's memory layout, which the code does not know."""
        position = _ORDER_POSITION[fn] - len(leading)
        positional = [a for a in node.args if a.keyword is None]
        given = [a for a in node.args if a.keyword is not None and a.keyword.value == "order"]
        if len(positional) > position >= 0:
            given.append(positional[position])
        if not given:
            return node, False
        order = given[0].value
        if not (isinstance(order, cst.SimpleString) and order.evaluated_value in ("C", "F")):
            raise self.err(order, f"np.{fn.__name__} with order={cst.Module([]).code_for_node(order)} is not supported: "
                                  "s2sad reads items in order 'C' or 'F'",
                           "write order='C' (the default) or order='F'")
        return node.with_changes(args=[a for a in node.args if a is not given[0]]), order.evaluated_value == "F"

    def in_fortran_order(self, node: cst.Call, fn, leading, out, target):
        """np.ravel(a, order='F') is the C-order ravel of a.T (every axis reversed); np.reshape(a, shape,
        order='F') the transpose of that ravel reshaped to the shape reversed."""
        array = leading[0] if leading else self.expr(node.args[0].value, out)
        items = self.prim(out, "ravel", (self.prim(out, "transpose", (array,)),), hint="items_f")
        if fn is np.ravel:
            return items
        shape_node = node.args[1 - len(leading)].value if len(node.args) > 1 - len(leading) else None
        if isinstance(shape_node, (cst.Integer, cst.UnaryOperation)):
            shape_node = cst.Tuple([cst.Element(shape_node)])
        if not isinstance(shape_node, cst.Tuple):
            raise self.err(node, "np.reshape with order='F' needs its shape written out, as a tuple or ints",
                           "write the shape in the call: x.reshape((n, m), order='F')")
        reversed_shape = self.prim_arg(shape_node.with_changes(elements=list(reversed(shape_node.elements))), out)
        return self.prim(out, "transpose", (self.prim(out, "reshape", (items, reversed_shape)),), target=target)

    def static_vectorize(self, made: cst.Call) -> np.vectorize:
        """`np.vectorize(f, otypes=[float])` of a function known when the code is generated."""
        try:
            args = [self.static_arg(a.value) for a in made.args if a.keyword is None]
            kwargs = {a.keyword.value: self.static_arg(a.value) for a in made.args if a.keyword is not None}
            return np.vectorize(*args, **kwargs)
        except (TypeError, ValueError, UnsupportedError):
            raise self.err(made, "np.vectorize takes a function defined outside the differentiated one here",
                           "define the function with `def` at module level, or decorate it with @np.vectorize")

    def numpy_vectorized(self, node: cst.Call, vec: np.vectorize, leading, out, target):
        """np.vectorize(f) runs f item by item, as a `@numba.vectorize` function does."""
        if vec.signature is not None or vec.excluded:
            raise self.err(node, "np.vectorize with signature= or excluded= is not supported",
                           "loop over the items and call the function yourself")
        inner = unwrap(vec.pyfunc)
        if not isinstance(inner, types.FunctionType):
            raise self.err(node, f"np.vectorize of {vec.pyfunc!r}: s2sad inlines Python functions only")
        return self.vectorized(node, inner, leading, out, target)

    def vectorized(self, node: cst.Call, fn, leading, out, target):
        """A `@numba.vectorize` function: its scalar code inlined on numbers, and on arrays run item by item
        in a loop over the items (operands of one shape, or numbers), as the ufunc numba builds does."""
        if any(a.keyword or a.star for a in node.args):
            raise self.err(node, f"call the vectorized function `{fn.__name__}` with positional arguments")
        args = leading + [self.expr(a.value, out) for a in node.args]
        ranks = self.operand_ranks(node, args, f"`{fn.__name__}` is vectorized: s2sad needs to know which operands "
                                                 "are arrays")
        call = node.with_changes(args=[])
        if not any(ranks):
            return self.inline(call, fn, args, out, target)
        arrays = [a for a, r in zip(args, ranks) if r]
        shape = self.prim(out, "shape", (arrays[0],))
        flat = {a.name: self.prim(out, "ravel", (a if k == 0 else self.prim(out, "broadcast_to", (a, shape)),),
                                  hint=a.name + "_items") for k, a in enumerate(arrays)}
        n = self.prim(out, "len", (flat[arrays[0].name],), hint="n")
        results = self.prim(out, "empty", (n,), hint=fn.__name__ + "_items")
        counter = self.names.fresh("k")
        self.ints.add(counter)
        body: list = []
        self.branch_depth += 1
        self.nested += 1
        try:
            items = [self.emit(body, self.temp(a.name + "_item"), Load(flat[a.name], (Var(counter),)))
                     if r else a for a, r in zip(args, ranks)]
            value = self.inline(call, fn, items, body, None)
            body.append(Store(results.name, (Var(counter),), self.refuse_non_atom(node, value), self.loc))
        finally:
            self.branch_depth -= 1
            self.nested -= 1
        out.append(For(counter, Const(0), n, Const(1), body, self.loc))
        return self.prim(out, "reshape", (results, shape), target=target, hint=fn.__name__)

    def operand_ranks(self, node: cst.Call, args: list, unknown: str) -> list[int]:
        """The ranks of a call's operands (0 for numbers). Where one is not known, the code asks for the
        argument types, or (given them) is refused with `unknown`."""
        ranks = [0 if isinstance(a, Const) else self.ranks.get(a.name) for a in args]
        if None in ranks and isinstance(self.kinds, UnknownKinds):
            self.kind_of(args[ranks.index(None)], required=True)
        if None in ranks:
            raise self.err(node, unknown, "pass arrays made with NumPy, or call grad(f) on arguments")
        return ranks

    def gufunc_call(self, node: cst.Call, fn, code, leading, out, target):
        """A `@numba.guvectorize` function called with its inputs, as NumPy calls a gufunc: its outputs made here
        (float64, of the core shapes its layout names), and its Python code run on the core of each operand,
        once, or for each item along one leading loop axis. A `()` operand reaches the code as an array of one
        item, as numba passes it. Output arrays passed after the inputs (`f(x, y)`, as numba's gufuncs without
        types are called) start the code's outputs with their values, and get its results."""
        ins, outs = _gufunc_layout(fn)
        name = getattr(fn, "__name__", "gufunc")
        if any(a.keyword or a.star for a in node.args):
            raise self.err(node, f"call the @guvectorize function `{name}` with positional arguments")
        given, written = [], []
        if len(leading) + len(node.args) == len(ins) + len(outs):
            written = [self.output_array(a, name, out) for a in node.args[len(node.args) - len(outs):]]
            given = [start for start, _, _ in written]
            node = node.with_changes(args=node.args[:len(node.args) - len(outs)])
        if len(leading) + len(node.args) != len(ins):
            raise self.err(node, f"`{name}` is a @guvectorize function: s2sad calls it with its {len(ins)} input(s) "
                                 f"and returns its output(s), as NumPy calls a gufunc",
                           "leave the output arguments out: `y = f(x)` rather than `f(x, y)`")
        if any(t.split("->")[1] != "d" * len(outs) for t in fn.types):
            raise self.err(node, f"`{name}` is a @guvectorize function whose outputs are not all float64",
                           "declare float64 outputs")
        args = leading + [self.expr(a.value, out) for a in node.args]
        ranks = self.operand_ranks(node, args, f"`{name}` is a gufunc: s2sad needs to know the ranks of its operands")
        loops = [r - len(core) for r, core in zip(ranks, ins)]
        lead = max(loops)
        if min(loops) < 0 or lead > 1 or any(k not in (0, lead) for k in loops):
            raise self.err(node, f"s2sad runs the gufunc `{name}` on operands with at most one leading axis beyond "
                                 "the core axes of its layout, that axis the same for all that have it",
                           "reshape the operands to (n, *core), or loop over them")
        sizes: dict = {}
        for a, core, k in zip(args, ins, loops):
            if any(d not in sizes for d in core):
                shape = self.prim(out, "shape", (a,), hint="shape")
                for axis, d in enumerate(core):
                    sizes.setdefault(d, self.emit(out, self.temp(f"{d}_dim"), Load(shape, (Const(k + axis),))))
        if any(d not in sizes for core in outs for d in core):
            raise self.err(node, f"an output axis of the gufunc `{name}` is named by no input, so its length is "
                                 "not known", "call it with an output argument of your own, outside s2sad")

        declared = _gufunc_operand_types(fn)
        dynamic = getattr(fn, "is_dynamic", False)  # no types given: numba passes a `()` input as a number
        as_array = [not core and not dynamic and (declared is None or hasattr(declared[i], "ndim"))
                    for i, core in enumerate(ins)]

        def one_item(v, body):  # a `()` operand declared an array (`intp[:]`): an array of one item
            return self.prim(body, "expand_dims_any", (v, Const(0)), hint="item")

        def made_outputs(body, extra=()):
            return [self.prim(body, "zeros", (self.prim(body, "make_tuple", (*extra, *(sizes[d] for d in core)),
                                                        hint="dims"),), hint=f"{name}_out")
                    if core or extra else self.prim(body, "zeros", (Const(1),), hint=f"{name}_out") for core in outs]

        def started(body, row=None):  # the outputs the code fills: copies of those given (of their row)
            if not given:
                return made_outputs(body)
            parts = [g if row is None else self.emit(body, self.temp(f"{g.name}_row"), Load(g, (row,)))
                     for g in given]
            return [self.prim(body, "copy", (p,), hint=f"{name}_out") if core
                    else self.prim(body, "expand_dims_any", (p, Const(0)), hint=f"{name}_out")
                    for p, core in zip(parts, outs)]

        call = node.with_changes(args=[])
        fixed = [one_item(a, out) if wrap and not k else a for a, wrap, k in zip(args, as_array, loops)]
        if not lead:
            if any(not core for core in outs[:len(given)]):
                raise self.err(node, f"an output of the gufunc `{name}` is a number here: s2sad returns it",
                               "leave the output arguments out: `y = f(x)` rather than `f(x, y)`")
            made = started(out)
            self.inline(call, code, fixed + made, out, None)
            results = [m if core else self.emit(out, self.temp(name), Load(m, (Const(0),))) for m, core in zip(made, outs)]
        else:
            n = self.prim(out, "len", (args[loops.index(1)],), hint="n")
            results = made_outputs(out, (n,)) if not given else [self.prim(out, "copy", (g,), hint=f"{name}_out")
                                                                 for g in given]
            counter = self.names.fresh("k")
            self.ints.add(counter)
            body: list = []
            with self.inside_loop():
                items = [self.emit(body, self.temp(f"{a.name}_row"), Load(a, (Var(counter),))) if k else f
                         for a, f, k in zip(args, fixed, loops)]
                items = [one_item(v, body) if k and wrap else v for v, wrap, k in zip(items, as_array, loops)]
                made = started(body, Var(counter))
                self.inline(call, code, items + made, body, None)
                for r, m, core in zip(results, made, outs):
                    value = m if core else self.emit(body, self.temp(name), Load(m, (Const(0),)))
                    body.append(Store(r.name, (Var(counter),), value, self.loc))
            out.append(For(counter, Const(0), n, Const(1), body, self.loc))
        for (_, array, turned_back), r in zip(written, results):
            out.append(Store(array.name, (Slice(None, None, None),), turned_back(r, out), self.loc))
        value = results[0] if len(results) == 1 else tuple(results)
        return self.emit(out, target, Copy(value)) if target is not None and len(results) == 1 else value

    def output_array(self, arg: cst.Arg, name: str, out):
        """A gufunc's output argument, a local array or its axes swapped (`y.swapaxes(-1, axis)`, `y.T`, as
        resampy passes it): the values the code starts from, the array the call writes, and how a result
        turns back into that array's layout."""
        value, base, turned_back = arg.value, arg.value, lambda r, _: r
        if isinstance(value, cst.Attribute) and value.attr.value == "T":
            base, turned_back = value.value, lambda r, body: self.prim(body, "transpose", (r,))
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and \
                value.func.attr.value == "swapaxes" and len(value.args) == 2 and not any(a.keyword for a in value.args):
            base, axes = value.func.value, [self.expr(a.value, out) for a in value.args]
            turned_back = lambda r, body: self.prim(body, "swapaxes", (r, *axes))  # noqa: E731
        if not (isinstance(base, cst.Name) and base.value in self.locals):
            raise self.err(arg, f"an output argument of the gufunc `{name}` must be a local array variable",
                           "bind the array to a name first, or leave the outputs out: `y = f(x)`")
        return self.expr(value, out), Var(self.var(base.value)), turned_back

    def isscalar_call(self, node, out, target):
        """`np.isscalar(H)`: decided when the code is generated for numbers, containers and arrays (filterpy's
        `if np.isscalar(H): H = np.array([H])` then keeps one side, and numba sees one rank for `H`)."""
        value = self.value(node, out)
        if is_tree(value) or isinstance(value, Const):
            return self.expr_result(Const(bool(np.isscalar(value.value)) if isinstance(value, Const) else False),
                                    out, target)
        kind = self.kind_of(value) if value.name in self.arguments else None
        if value.name in self.arrays or (self.ranks.get(value.name) or 0) > 0 or kind is not None and kind[0] > 0:
            return self.expr_result(Const(False), out, target)
        return self.prim(out, "isscalar", (value,), target=target)

    def prim_arg(self, node, out):
        """An operand of a primitive: an atom; a tuple of ints (a shape, axes) becomes one value."""
        dtype = self.static_dtype(node)
        if dtype is not None:
            return Const(dtype)
        self.refuse_generator(node)
        node = self.list_call_as_comprehension(node)
        if isinstance(node, cst.ListComp):  # NumPy makes the list an array anyway
            if not self.is_static_comprehension(node):
                return self.filled_array(node, out, None)
            return self.array_of(node, self.list_comp(node, out), out)
        value = self.value(node, out)
        if not is_tree(value):
            return value
        leaves, _ = flatten(value)
        if all(isinstance(v, Const) for v in leaves) and not isinstance(value, dict):
            return Const(_constant_tuple(value))  # e.g. pad widths ((1, 0), (0, 2))
        if type(value) is tuple and all(type(v) is tuple and not any(is_tree(w) for w in v) for v in value):
            # pad widths from run-time ints: `((0, 0), (pad, pad))`
            pairs = tuple(self.prim(out, "make_tuple", tuple(v), hint="dims") for v in value)
            return self.prim(out, "make_tuple", pairs, hint="dims")
        if isinstance(value, (tuple, list)) and any(isinstance(v, StaticRef) for v in value):
            raise self.err(node, "functions passed to a NumPy function (np.piecewise, np.vectorize) are not supported",
                           "call them yourself and pick with np.where: np.where(x < 0, f(x), g(x))")
        if not isinstance(value, (tuple, list)) or any(is_tree(v) for v in value):
            raise self.err(node, "a NumPy function takes numbers, arrays, or a tuple of ints here")
        if type(value) is list:  # `np.sum([1.0, a * a, b])`: NumPy makes a list an array (a tuple is a shape)
            return self.array_of(node, value, out)
        return self.prim(out, "make_tuple", tuple(value), hint="dims")

    def guarded_where(self, node: cst.Call, out, target):
        """`np.where(x > 0, np.sqrt(x), 0.0)`: a side that may divide by zero or leave a function's domain
        (`/`, sqrt, log, ...) and is computed item by item reads its variables as 1.0 where the other side is
        picked. NumPy's result is the same, and the derivative gets 0 there, not `0 * inf` (nan)."""
        cond = self.expr(node.args[0].value, out)
        sides = []
        for k, arg in enumerate(node.args[1:]):
            names = self.guarded_names(arg.value)
            saved = {n: self.scope[n] for n in names}
            for n in names:
                picked = (cond, Var(saved[n]), Const(1.0)) if k == 0 else (cond, Const(1.0), Var(saved[n]))
                self.scope[n] = self.prim(out, "where", picked, hint=f"{n}_kept").name
            try:
                sides.append(self.expr(arg.value, out))
            finally:
                self.scope.update(saved)
        return self.prim(out, "where", (cond, *sides), target=target)

    def guarded_names(self, node) -> set[str]:
        """The local variables of an np.where side that is computed item by item and may be singular; none
        for any other side."""
        names, singular = set(), False
        for n in _walk(node):
            if isinstance(n, cst.Call):
                fn = self.static_value(n.func)
                found = rules.lookup_object(fn) if callable(fn) else None
                if found is None or not pointwise(found[0]) or any(a.keyword or a.star for a in n.args):
                    return set()
                singular |= found[0].singular
            elif isinstance(n, cst.BinaryOperation):
                if not isinstance(n.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)):
                    return set()
                singular |= isinstance(n.operator, (cst.Divide, cst.Power))
            elif isinstance(n, (cst.Subscript, cst.Lambda, cst.Comparison, cst.BooleanOperation, cst.IfExp,
                                cst.ListComp, cst.GeneratorExp, cst.Tuple, cst.List, cst.Dict)):
                return set()
            elif isinstance(n, cst.Name) and n.value in self.scope and n.value not in self.trees:
                names.add(n.value)
        return {n for n in names if self.scope[n] not in self.ints} if singular else set()

    def positions(self, node, out) -> "Positions":
        """`np.where(c)` / `np.nonzero(c)`: the index arrays of c's true (nonzero) items. s2sad keeps the
        condition: `x[np.where(c)]` reads and writes what the boolean mask `x[c]` does, in the same order."""
        mask = self.expr(node, out)
        if not isinstance(node, cst.Comparison):
            mask = self.prim(out, "ne", (mask, Const(0)), hint="nonzero")
        return Positions(mask)

    def diagonal_positions(self, node, fn, out) -> "Positions":
        """`np.diag_indices(n, ndim=2)` / `np.diag_indices_from(a)`: a main diagonal's index arrays, kept as the
        boolean mask that reads and writes the same items in the same order, as np.where's are (numba lacks both)."""
        if not node.args or any(a.keyword or a.star for a in node.args) or len(node.args) > 1 + (fn is np.diag_indices):
            raise self.err(node, "write np.diag_indices(n), np.diag_indices(n, ndim) or np.diag_indices_from(a), "
                                 "with positional arguments")
        first = self.expr(node.args[0].value, out)
        if fn is np.diag_indices_from:
            return Positions(self.prim(out, "diagonal_mask", (self.prim(out, "shape", (first,)),), hint="diagonal"))
        ndim = self.expr(node.args[1].value, out) if len(node.args) == 2 else Const(2)
        if not (isinstance(ndim, Const) and type(ndim.value) is int):
            raise self.err(node.args[1], "np.diag_indices' ndim must be a constant int")
        shape = self.prim(out, "make_tuple", (first,) * ndim.value, hint="shape")
        return Positions(self.prim(out, "diagonal_mask", (shape,), hint="diagonal"))

    def einsum_spelled_out(self, node: cst.Call, spec: str, out, target):
        """`np.einsum` as the two-operand contractions s2sad has a rule for: a '...' spelled with letters the
        subscripts leave free (as many as each operand's rank leaves, which lowering knows or asks the argument
        types for), and three or more operands contracted a pair at a time (`_pairwise_einsums`)."""
        if any(a.star or a.keyword and a.keyword.value not in TUNING_KEYWORDS[np.einsum] for a in node.args):
            raise self.err(node, "np.einsum takes its subscripts and operands alone here")
        operands = [self.prim_arg(a.value, out) for a in node.args[1:] if a.keyword is None]
        try:
            if "..." in spec:
                ranks = self.operand_ranks(node, operands, "np.einsum's '...' needs the ranks of its operands")
                spec = _ellipsis_lettered(spec, ranks)
            steps = _pairwise_einsums(spec, len(operands))
        except ValueError as e:
            raise self.err(node, str(e)) from None
        rule, spelled = rules.lookup_object(np.einsum)
        for k, (subscripts, picked) in enumerate(steps):
            last = k == len(steps) - 1
            result = self.emit(out, target if last and target else self.temp(rule.name),
                               Prim(rule, (Const(subscripts), *(operands[i] for i in picked)), (), spelled))
            operands = [result if i == picked[0] else o for i, o in enumerate(operands) if i not in picked[1:]]
        return result

    def operand_lowered(self, node: cst.Call, leading: list, out):
        """The call without its first positional argument, which leads, lowered (as a method's receiver does)."""
        if leading:
            return node, leading
        if node.args[0].keyword is not None or node.args[0].star:
            raise self.err(node, "pass the array first, by position")
        return node.with_changes(args=node.args[1:]), [self.expr(node.args[0].value, out)]

    def operand_in_dtype(self, node: cst.Call, leading: list, out):
        """`np.cumsum(x, dtype=float)`: NumPy converts the items to the dtype and adds in it, as
        `np.cumsum(x.astype(float))` does. Returns the call without its dtype, the converted operand leading."""
        given = next(a.value for a in node.args if a.keyword and a.keyword.value == "dtype")
        dtype = self.static_dtype(given)
        if dtype is None:
            raise self.err(given, "the dtype= of a sum or product must be known when the code is generated",
                           "dtype=np.float64")
        rest = [a for a in node.args if a.value is not given]
        if not rest and not leading:  # `m.mean(dtype=float)`: the method's array leads
            raise self.err(node, "pass the array first, by position")
        node, leading = self.operand_lowered(node.with_changes(args=rest), leading, out)
        converted = self.cast(node, leading[0], Const(dtype), True, out, None)
        return node, [converted, *leading[1:]]

    def triangle_positions(self, node, fn, out) -> "Positions":
        """`np.triu_indices(n, k=0, m=None)`, `np.tril_indices_from(a, k=0)`, ...: a triangle's index arrays,
        kept as the boolean mask that picks the same items in the same (C) order."""
        args = {name: self.expr(value, out) for name, value in self.bound_arguments(node, fn).items()}
        k = args.get("k", Const(0))
        if "arr" in args:
            n, m = self.dims_of(self.prim(out, "shape", (args["arr"],), hint="shape"), 2, out)
        else:
            n = args["n"]
            m = args.get("m", Const(None))
            m = n if m == Const(None) else m
        upper = Const(fn in (np.triu_indices, np.triu_indices_from))
        return Positions(self.prim(out, "triangle_mask", (n, m, k, upper), hint="triangle"))

    def sequence_call(self, node: cst.Call, fn, out, target):
        """np.concatenate / stack / hstack / vstack / array of a tuple or list, and np.split."""
        if fn is np.split:
            return self.split(node, out)
        if fn is np.array:  # `copy=True` is np.array's default: it makes a new array whatever it is given
            node = node.with_changes(args=[a for a in node.args if not (
                a.keyword and a.keyword.value == "copy" and self.static_value(a.value) is True)])
        if not node.args or node.args[0].keyword is not None:
            raise self.err(node, "pass the arrays as a tuple or list first")
        first = self.list_call_as_comprehension(node.args[0].value)
        self.refuse_generator(first)
        if fn in (np.array, np.stack) and len(node.args) == 1 and isinstance(first, cst.ListComp) \
                and not self.is_static_comprehension(first):
            return self.filled_array(first, out, target)
        dtype = self.array_dtype(node) if fn is np.array else None
        if dtype is not None and dtype != np.float64:  # `np.array([1, 2], dtype=np.int32)`: made, then cast
            made = self.sequence_call(node.with_changes(args=node.args[:1]), fn, out, None)
            return self.cast(node, made, Const(dtype), True, out, target)
        items = self.value(first, out)
        as_float = dtype == np.float64
        if as_float:
            node = node.with_changes(args=node.args[:1])  # `dtype=float`: what stacking numbers gives
        if fn is np.array and isinstance(items, Var) and len(node.args) == 1:  # np.array(x) of an array: a copy
            rule, spelled = rules.lookup_object(np.copy)
            return self.emit(out, target or self.temp("array"), Prim(rule, (items,), (), spelled))
        if fn is np.array and len(node.args) == 1 and is_tree(items) and any(is_tree(i) for i in items):
            return self.nested_array(node, items, out, target, as_float)
        if isinstance(items, (tuple, list)) and fn is not np.array:  # `np.concatenate(([0.0], np.cumsum(x)))`
            items = [self.nested_array(node, i, out, None) if _numbers_tree(i) else i for i in items]
        if not isinstance(items, (tuple, list)) or not items or any(is_tree(i) for i in items):
            raise self.err(node, "pass a tuple or list of arrays (a literal, or one built in the function)",
                           "an item may also be a list of numbers, `[0.0]`" if isinstance(items, (tuple, list))
                           else "")
        axis_nodes = [a.value for a in node.args[1:] if a.keyword is None or a.keyword.value == "axis"]
        axis = self.expr(axis_nodes[0], out) if axis_nodes else Const(0)
        if fn is np.array:
            if len(node.args) > 1:
                raise self.err(node, "np.array([...]) of numbers or arrays takes no other arguments here")
            fn = np.stack
        if fn in (np.stack, np.array):
            items = [self.prim(out, "expand_dims_any", (i, axis), hint="item") for i in items]
        elif fn is np.vstack:
            items, axis = [self.prim(out, "atleast_2d", (i,), hint="row") for i in items], Const(0)
        elif fn is np.concatenate and axis == Const(None):  # the items flattened first
            items, axis = [self.prim(out, "ravel", (i,), hint="flat") for i in items], Const(0)
        elif fn is np.hstack:
            items = [self.prim(out, "atleast_1d", (i,), hint="item") for i in items]
            axis = self.prim(out, "hstack_axis", (items[0],), hint="axis")
        result = items[0]
        for item in items[1:]:
            result = self.prim(out, "concatenate2", (result, item, axis), hint="joined")
        if target is not None:
            return self.emit(out, target, Copy(result))
        return result

    def array_dtype(self, node: cst.Call) -> np.dtype | None:
        """The dtype `np.array(rows, dtype)` asks for, where it is its only other argument and known when
        the code is generated; else None."""
        dtype = [a.value for a in node.args[1:] if a.keyword is None or a.keyword.value == "dtype"]
        return self.static_dtype(dtype[0]) if len(node.args) == 2 and len(dtype) == 1 else None

    def nested_array(self, node: cst.Call, rows, out, target, as_float=False):
        """`np.array([[c, -s], [s, c]])`: each row made an array, then the rows stacked. Rows of numbers
        known when the code is generated are one constant table."""
        leaves = flatten(rows)[0]
        if all(isinstance(a, Const) and type(a.value) in (int, float, bool) for a in leaves):
            if as_float:
                rows = unflatten(flatten(rows)[1], [Const(float(a.value)) for a in leaves])
            table = self.constant_table(node, rows, out)
            return self.prim(out, "asarray", (table,), target=target, hint="array")
        if len({len(r) if is_tree(r) else None for r in rows}) != 1:
            raise self.err(node, "np.array([...]) of rows needs rows of equal length")
        made = [self.nested_array(node, r, out, None) if is_tree(r) and any(is_tree(i) for i in r)
                else self.stack_items(r, out) if is_tree(r) else r for r in rows]
        result = self.stack_items(made, out)
        return self.emit(out, target, Copy(result)) if target is not None else result

    def stack_items(self, items, out):
        """np.stack(items) of numbers or arrays of one shape, along a new first axis."""
        items = [self.prim(out, "expand_dims_any", (i, Const(0)), hint="item") for i in items]
        result = items[0]
        for item in items[1:]:
            result = self.prim(out, "concatenate2", (result, item, Const(0)), hint="joined")
        return result

    def split(self, node: cst.Call, out):
        """np.split(x, n) / np.split(x, [i, j]) along axis 0: a tuple of slices."""
        if len(node.args) != 2 or node.args[1].keyword is not None:
            raise self.err(node, "np.split(x, sections) is supported along axis 0")
        x = self.expr(node.args[0].value, out)
        spec = node.args[1].value
        if isinstance(spec, (cst.List, cst.Tuple)):
            cuts = [Const(self.static_key(e.value)) for e in spec.elements]
            bounds = [None] + cuts + [None]
        else:
            sections = self.static_key(spec)
            n = self.prim(out, "len", (x,), hint="n")
            step = self.prim(out, "floordiv", (n, Const(sections)), hint="part")
            bounds = [None] + [self.prim(out, "mul", (step, Const(k)), hint="cut") for k in range(1, sections)] + [None]
        return tuple(self.emit(out, self.temp(f"{x.name}_part"), Load(x, (Slice(lo, hi, None),)))
                     for lo, hi in zip(bounds[:-1], bounds[1:]))


def _gufunc_layout(fn) -> tuple[list, list] | None:
    """The core axes of a numba gufunc's inputs and outputs, from its layout `(n),()->(n)`; None for other objects."""
    layout = getattr(fn, "signature", None)
    if type(fn).__name__ != "GUFunc" or not isinstance(layout, str) or "->" not in layout:
        return None

    def operands(part):
        return [tuple(d.strip() for d in group.split(",") if d.strip()) for group in re.findall(r"\(([^)]*)\)", part)]

    ins, outs = layout.replace(" ", "").split("->")
    return operands(ins), operands(outs)


def _gufunc_operand_types(fn) -> tuple | None:
    """The numba types a gufunc's first signature declares for its operands (a `()` operand may be declared a
    number, `float64`, or an array of one item, `intp[:]`), or None where numba keeps them elsewhere."""
    try:
        return tuple(fn.gufunc_builder._sigs[0].args)
    except (AttributeError, IndexError, TypeError):
        return None


TRIANGLES = (np.triu_indices, np.tril_indices, np.triu_indices_from, np.tril_indices_from)


_SHAPED_LIKE = {np.zeros_like: np.zeros, np.ones_like: np.ones, np.empty_like: np.empty, np.full_like: np.full}

FRESH_OUTPUTS = (np.zeros_like, np.ones_like, np.empty_like, np.full_like, np.zeros, np.ones, np.empty, np.full, np.array,
                 np.copy)


def _output_argument(call: cst.Call, fn) -> cst.Arg | None:
    """The argument a NumPy call writes its result into: `out=`, a ufunc's operand after its inputs
    (`np.add(a, b, c)`), or the one NumPy's signature puts after the inputs (`np.dot(a, b, out)`,
    `np.clip(a, lo, hi, out)`)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "out":
            return a
    positional = [a for a in call.args if a.keyword is None and not a.star]
    inputs = fn.nin if isinstance(fn, np.ufunc) or _numba_ufunc(fn) else _OUT_AFTER.get(fn)
    return positional[inputs] if inputs is not None and len(positional) > inputs else None


def _numba_ufunc(fn) -> bool:
    """A `@numba.vectorize` function, a ufunc of numba's: `f(x, y, out)` writes into `out`, as NumPy's do."""
    return isinstance(getattr(getattr(fn, "_dispatcher", None), "py_func", None), types.FunctionType) \
        and _gufunc_layout(fn) is None and isinstance(getattr(fn, "nin", None), int)


_SUMS_ORDS = (1, -1, np.inf, -np.inf)  # the matrix norms of np.linalg.norm that are sums of absolute values


def _norm_ord(node: cst.Call, leading: list):
    """The expression np.linalg.norm's call gives `ord` by, or None."""
    given = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "ord"]
    positional = [a.value for a in node.args if a.keyword is None][1 - len(leading):]
    return (given + positional[:1] + [None])[0]


def _is_dtype_type(func) -> bool:
    """Is `func` written `<expression>.dtype.type`, the constructor of an array's numbers?"""
    return isinstance(func, cst.Attribute) and func.attr.value == "type" and isinstance(func.value, cst.Attribute) \
        and func.value.attr.value == "dtype"


ACCUMULATES_IN_DTYPE = frozenset({np.sum, np.prod, np.mean, np.var, np.std, np.cumsum, np.cumprod, np.trace, np.nansum,
                                  np.nanprod, np.nanmean, np.nanvar, np.nanstd, np.nancumsum, np.nancumprod})

_OUT_AFTER = {np.dot: 2, np.clip: 3}  # NumPy functions (not ufuncs) whose output argument may come by position


def _keywords_not_taken(rule, kwargs) -> str | None:
    """The first keyword the runtime function generated code calls for `rule` has no parameter for, or None."""
    if not kwargs or rule.print_as is None:
        return None
    import s2sad.runtime as runtime

    called = getattr(runtime, rule.print_as, None)
    if called is None:
        return None
    parameters = inspect.signature(called).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return next((name for name, _ in kwargs if name not in parameters), None)


_KEYWORD_HINT = "arrange the operands so that the call needs the keyword's default (np.moveaxis, a slice, a cast)"
_KEYWORD_HINTS = {"where": "reduce the items kept instead: np.std(x[mask]) for a 1-D x"}


_LAYOUT_KEYWORDS = frozenset({"dtype", "kind", "casting", "subok", "copy", "like", "device", "order"})


def _keywords_its_derivative_ignores(fn, rule, kwargs) -> str | None:
    """A keyword generated code passes on to the NumPy function itself, which the rule's derivative does not
    read, given a value other than NumPy's default (`np.linalg.cholesky(a, upper=True)`):
    the value would follow it and the derivative would not. Keywords of dtype and memory layout change no value."""
    if not kwargs or not rule.differentiable or rule.print_as is not None:
        return None
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    read = set(rule.template().params)
    for name, value in kwargs:
        default = parameters[name].default if name in parameters else inspect.Parameter.empty
        if name not in read and name not in _LAYOUT_KEYWORDS and not _is_value(value, default):
            return name
    return None


def _is_value(atom, value) -> bool:
    """Is `atom` the constant `value` (of its type: `upper=0` is not `upper=False`'s default)?"""
    return isinstance(atom, Const) and type(atom.value) is type(value) and atom.value == value


def _one_sided_clip(node: cst.Call, leading: int) -> cst.Call:
    """np.clip's bounds as a_min and a_max (NumPy 2 also names them min and max), a bound not given being None."""
    args = [a.with_changes(keyword=cst.Name(f"a_{a.keyword.value}"))
            if a.keyword is not None and a.keyword.value in ("min", "max") else a for a in node.args]
    named = {a.keyword.value for a in args if a.keyword is not None}
    given = leading + sum(1 for a in args if a.keyword is None)
    for position, bound in ((1, "a_min"), (2, "a_max")):
        if given <= position and bound not in named:
            args.append(cst.Arg(cst.Name("None"), keyword=cst.Name(bound)))
    return node.with_changes(args=args)


def _pad_mode(node: cst.Call, leading):
    """The expression np.pad's call gives its mode by, or None (mode='constant')."""
    positional = [a for a in node.args if a.keyword is None]
    given = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "mode"]
    given += [a.value for a in positional[2 - len(leading):3 - len(leading)]]
    return given[0] if given else None


_ORDER_POSITION = {np.ravel: 1, np.reshape: 2}  # where a call gives `order` by position, the array counted


def _without_axis(kwargs) -> bool:
    """`np.squeeze(x)`, or `np.squeeze(x, axis=None)` as a logsumexp passes its `axis` on: every unit axis."""
    return not kwargs or kwargs == [("axis", Const(None))]


def _keywords_in_place(t, args: list, kwargs: list) -> tuple[list, list]:
    """Keyword operands a rule differentiates (`norm.logpdf(x, loc=mu, scale=s)`) become positional, with
    the defaults of any skipped before them: only positional operands get derivatives."""
    params, named = t.params[2:], dict(kwargs)
    moved = [i for i in t.differentiable_positions() if i >= len(args) and params[i] in named]
    if not moved:
        return args, kwargs
    for param in params[len(args):max(moved) + 1]:
        args = args + [named.pop(param) if param in named else Const(t.defaults[param])]
    return args, [(k, v) for k, v in kwargs if k in named]


def _names_a_shape(node) -> bool:
    """`x.shape`, or an item or slice of it (`x.shape[:2]`), as written."""
    while isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Attribute) and node.attr.value == "shape"


def _pairwise_einsums(spec: str, n_operands: int) -> list[tuple[str, tuple[int, ...]]]:
    """Explicit einsum subscripts ('ij,jk,k->i') as contractions of at most two operands, each with the
    positions it takes from the operands left; its result takes the first one's place. Each step contracts
    the pair whose result keeps the fewest indices (then the leftmost pair), as NumPy's greedy path does
    when the sizes are unknown; a pair keeps the indices that a later operand or the output names."""
    inputs, arrow, output = spec.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) != n_operands:
        raise ValueError(f"np.einsum's subscripts name {len(terms)} operands; it is given {n_operands}")
    if not arrow:
        named = inputs.replace(",", "")
        output = "".join(sorted(c for c in set(named) if named.count(c) == 1))
    steps = []
    while len(terms) > 2:
        pairs = [(i, j) for i in range(len(terms)) for j in range(i + 1, len(terms))]
        i, j = min(pairs, key=lambda p: (len(_kept_indices(terms, *p, output)), p))
        result = _kept_indices(terms, i, j, output)
        steps.append((f"{terms[i]},{terms[j]}->{result}", (i, j)))
        terms = [result if k == i else t for k, t in enumerate(terms) if k != j]
    return steps + [(",".join(terms) + "->" + output, tuple(range(len(terms))))]


def _kept_indices(terms: list[str], i: int, j: int, output: str) -> str:
    """The indices of terms i and j that another term or the output names, in their order."""
    others = "".join(t for k, t in enumerate(terms) if k not in (i, j)) + output
    return "".join(dict.fromkeys(c for c in terms[i] + terms[j] if c in others))


def _ellipsis_lettered(spec: str, ranks: list[int]) -> str:
    """Einsum subscripts with each '...' replaced by letters free in `spec`: the axes an operand's subscripts
    leave over, aligned from the right as NumPy broadcasts them. Without '->', the output is the '...' axes,
    then the letters named once in alphabetical order, as in NumPy."""
    inputs, arrow, output = spec.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"np.einsum's subscripts name {len(terms)} operands; it is given {len(ranks)}")
    widths = [rank - len(t.replace("...", "")) for t, rank in zip(terms, ranks)]
    if any(w < 0 or w > 0 and "..." not in t for t, w in zip(terms, widths)):
        raise ValueError("np.einsum's subscripts do not match the ranks of its operands")
    n = max(widths)
    if arrow and n and "..." not in output:
        raise ValueError("np.einsum's output has no '...' for the axes its operands' '...' stand for")
    free = "".join(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in spec)[:n]
    terms = [t.replace("...", free[n - w:]) for t, w in zip(terms, widths)]
    if not arrow:
        named = inputs.replace("...", "").replace(",", "")
        output = "..." + "".join(sorted(c for c in set(named) if named.count(c) == 1))
    return ",".join(terms) + "->" + output.replace("...", free)


def _static_dtype_arg(lowerer, node: cst.Call):
    """The dtype `np.asarray(x, dtype)` asks for where it is known when the code is generated, else None."""
    given = [a.value for a in node.args[1:] if a.keyword is None or a.keyword.value == "dtype"]
    if any(a.star for a in node.args) or len(given) != 1 or node.args[0].keyword is not None:
        return None
    return lowerer.static_dtype(given[0])
