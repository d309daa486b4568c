"""Inactive code: code that touches no differentiated value needs no rule and stays in the primal as
written: expression statements, print, raise and assert, calls and attributes with no rule (refused
where a derivative turns out to need them), `.astype`.
"""

from __future__ import annotations

import builtins
import inspect
import types
from typing import Any

import libcst as cst
import numpy as np

from s2sad import rules
from s2sad.errors import UnsupportedError
from s2sad.frontend import unwrap
from s2sad.hidden import RANDOM_GENERATORS
from s2sad.ir import Const, Copy, Effect, If, Prim, Slice, Store, Var
from s2sad.rules import inlined
from s2sad.rules.registry import Custom, Opaque, spelling
from s2sad.normalize.calls import _gufunc_layout, _output_argument
from s2sad.normalize.state import _NOT_STATIC, RaisesHere
from s2sad.normalize.static import _draws, _evaluate, _module_of, _pure
from s2sad.normalize.syntax import _dotted, _fills, _sorts_array
from s2sad.normalize.tables import BUILTIN_HINTS, DRAW_HINT, FLAT_RESULTS, HINT_RULE, STAND_IN_HINT


class InactiveMixin:
    # ----------------------------------------------------------- inactive code
    # Code that does not touch a differentiated value needs no rule: it stays in the primal as written.
    def expression_statement(self, node: cst.Expr, out):
        """`print(x)`, `np.random.seed(0)`: a call made for its effect runs as written."""
        call = node.value if isinstance(node.value, cst.Call) else None
        fn = self.static_value(call.func) if call is not None else _NOT_STATIC
        if fn is print:
            return self.print_call(call, out)
        if fn is _NOT_STATIC and _fills(call):  # `arr.fill(v)`: `arr[:] = v`, every item (numba indexes no `...`)
            every = cst.Subscript(call.func.value, [cst.SubscriptElement(cst.Slice(None, None))])
            return self.assign_to(every, call.args[0].value, out)
        if fn is _NOT_STATIC and _sorts_array(call) and self.tree_of(call.func.value) is None:
            return self.sort_in_place(call, out)
        if _module_of(fn) in DIAGNOSTICS:  # `logger.debug(f"...")`: no part of the computation
            return
        if fn is np.copyto:
            return self.copy_into(call, out)
        if fn is np.fill_diagonal:
            return self.fill_diagonal(call, out)
        if getattr(fn, "__name__", None) == "at" and getattr(fn, "__self__", None) in (np.add, np.subtract):
            return self.add_at(call, fn.__self__, out)
        if fn is not _NOT_STATIC and _output_argument(call, fn) is not None:
            self.value(call, out)  # `np.sqrt(d, d)`: it writes into `d`
            return
        if fn is not _NOT_STATIC and _gufunc_layout(fn) is not None:  # `move_mean(x, 3, out)`: refused there
            self.value(call, out)
            return
        if fn is _NOT_STATIC and self.draws_from_generator(call):  # `rng.shuffle(order)`
            self.draw(call, out, None)
            out.append(Effect(out.pop().value, self.loc))
            return
        if fn is not _NOT_STATIC and self.runs_as_written(fn) and self.builtin_name(fn) not in BUILTIN_HINTS:
            value = self.opaque_call(call, fn, out, None, effect=True)
            out.append(Effect(out.pop().value, self.loc))  # the call opaque_call emitted, without a result
            return
        raise self.err(node, "an expression statement has no effect s2sad can differentiate",
                       self.unused_hint(call, fn))

    def sort_in_place(self, call: cst.Call, out):
        """`x.sort(axis=-1)` is the write `x[:] = np.sort(x, axis)`: the items in order, each carrying its
        derivative to where it goes."""
        base = self.array_base(call.func.value, out)
        ordered = self.inline(call, inlined.sort, [Var(base)], out, None)
        out.append(Store(base, (Slice(None, None, None),), ordered, self.loc))

    def unused_hint(self, call, fn) -> str:
        if fn is not _NOT_STATIC and self.builtin_name(fn) in BUILTIN_HINTS:
            return BUILTIN_HINTS[self.builtin_name(fn)]
        if call is None or fn is _NOT_STATIC and isinstance(call.func, cst.Attribute):
            return ("assign the result of a NumPy function instead of changing an array by a method "
                    "(`x = np.sort(x)` for `x.sort()`), or remove the line")
        if isinstance(unwrap(fn), types.FunctionType):
            name = unwrap(fn).__name__
            return (f"s2sad differentiates the values functions return: make `{name}` return the array it fills "
                    f"and assign it (`out = {name}(...)`)")
        return "its value is unused: assign it (`y = ...`) or remove the line"

    @staticmethod
    def runs_as_written(fn) -> bool:
        """A callee with no rule that is not a Python function s2sad inlines: kept as a call."""
        return rules.lookup_object(fn) is None and not isinstance(fn, Custom) and callable(fn) \
            and not isinstance(unwrap(fn), types.FunctionType)

    def print_call(self, call: cst.Call, out):
        """`print(a, f"x = {x}")` as numba prints: positional operands; an f-string as its pieces."""
        args = []
        for a in call.args:
            if a.keyword is not None or a.star:
                raise self.err(a, "print takes only positional arguments here (numba has no sep=, end=, file=)",
                               "print the pieces as positional arguments: print(a, b)")
            if isinstance(a.value, cst.FormattedString):
                for part in a.value.parts:
                    if isinstance(part, cst.FormattedStringText):  # print puts the spaces back
                        args += [Const(part.value.strip())] if part.value.strip() else []
                    else:
                        args.append(self.expr(part.expression, out))
            else:
                args.append(self.expr(a.value, out))
        out.append(Effect(Prim(Opaque("print", spelled="print"), tuple(args), (), "print"), self.loc))

    def raise_stmt(self, node: cst.Raise, out):
        """`raise ValueError("...")` runs as written; numba raises only constant messages, so a message
        made at run time (an f-string, a variable) is its source text."""
        if node.exc is None:
            raise self.err(node, "a bare `raise` (re-raising an exception) is not supported",
                           'raise a new exception: raise ValueError("...")')
        call = node.exc if isinstance(node.exc, cst.Call) else None
        cls = self.static_value(call.func if call is not None else node.exc)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise self.err(node.exc, "only an exception class, or a call of one, can be raised here",
                           'raise ValueError("...") or another exception class')
        if call is not None and any(a.keyword is not None or a.star for a in call.args):
            raise self.err(call, "exception arguments must be positional", 'raise ValueError("message")')
        args = tuple(Const(self.message(a.value)) for a in call.args) if call is not None else ()
        if cls is NotImplementedError and self.stand_in_call and not self.nested and args:
            caller, at = self.stand_in_call  # what s2sad writes the call out as always refuses it: say so now
            raise caller.err(at, f"{args[0].value.removeprefix('s2sad: ')} is not supported", STAND_IN_HINT)
        rule = self.exception_rule(node.exc, cls)
        out.append(Effect(Prim(rule, args, (), rule.spelled), self.loc, raises=True))

    def assert_stmt(self, node: cst.Assert, out):
        """`assert test, "message"` as `if not test: raise AssertionError("message")`."""
        test = self.expr(node.test, out)
        failed = self.prim(out, "not", (test,), hint="failed")
        args = (Const(self.message(node.msg)),) if node.msg is not None else ()
        rule = self.exception_rule(node, AssertionError)
        out.append(If(failed, [Effect(Prim(rule, args, (), rule.spelled), self.loc, raises=True)], [], self.loc))

    def none_operand(self, node: cst.BinaryOperation, out, target):
        """Arithmetic on None (`ylast * (1 - alpha)` where `ylast=None`): Python raises TypeError. On a path
        that runs conditionally that is what generated code does there (numba compiles every path)."""
        what = cst.Module([]).code_for_node(node)
        if not self.conditional():
            raise self.err(node, f"`{what}` computes with None: Python raises TypeError here",
                           "give the value a number before this line")
        rule = self.exception_rule(node, TypeError)
        out.append(Effect(Prim(rule, (Const(f"unsupported operand None in `{what}`"),), (), rule.spelled),
                          self.loc, raises=True))
        raise RaisesHere()

    def exception_rule(self, node, cls) -> Opaque:
        if getattr(builtins, cls.__name__, None) is cls:
            return Opaque(cls.__name__, spelled=cls.__name__)
        if cls.__module__ in ("__main__", "builtins") or "<" in cls.__qualname__:
            raise self.err(node, f"the exception class `{cls.__qualname__}` cannot be named from generated code",
                           "define it at module level in an importable module, or raise a built-in exception")
        return Opaque(cls.__name__, spelled=f"{cls.__module__}.{cls.__qualname__}")

    @staticmethod
    def message(node) -> Any:
        """A constant exception argument: a literal as it is, anything else as its source text."""
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
            value = node.evaluated_value
            if value is not None:
                return value
        if isinstance(node, cst.FormattedString):
            return "".join(p.value if isinstance(p, cst.FormattedStringText)
                           else "{" + cst.Module([]).code_for_node(p.expression) + "}" for p in node.parts)
        return cst.Module([]).code_for_node(node)

    def opaque_call(self, node: cst.Call, fn, out, target, effect=False, leading=()):
        """A call with no rule runs as written while its result does not depend on a differentiated
        input (the analysis refuses it otherwise); on constants, a pure one is evaluated now."""
        if fn is isinstance:
            return self.type_test(node, out, target)
        refusal = self.refusal(node, fn)
        if not self.runs_as_written(fn) or self.builtin_name(fn) in BUILTIN_HINTS or \
                isinstance(fn, type) and not (fn.__module__ or "").startswith("numpy"):
            raise UnsupportedError(refusal)
        spelled = self.callee_spelling(node.func, fn)
        if spelled is None:
            raise UnsupportedError(refusal)
        args = list(leading) + [self.prim_arg(a.value, out) for a in node.args if a.keyword is None]  # a method's array
        kwargs = [(a.keyword.value, self.prim_arg(a.value, out)) for a in node.args if a.keyword is not None]
        args, kwargs = _positional(fn, args, kwargs)
        if not effect and _pure(fn) and all(isinstance(a, Const) for a in args + [v for _, v in kwargs]):
            folded = _evaluate(fn, args, kwargs)
            if folded is not None:
                return self.expr_target(folded, out, target)
        rule = Opaque(spelled, refusal=refusal, impure=_draws(fn), spelled=spelled)
        name = target or self.temp(spelled.rsplit(".", 1)[-1])
        result = self.emit(out, name, Prim(rule, tuple(args), tuple(kwargs), spelled))
        if any(fn is f for f in FLAT_RESULTS) and not kwargs:  # its rank decides the code after it
            self.ranks[name] = 1
        return result

    def draws_from_generator(self, node: cst.Call | None) -> bool:
        """Is this `rng.normal(...)` of a generator the function makes (`rng = np.random.default_rng(0)`) or
        takes as an argument?"""
        if node is None or not isinstance(node.func, cst.Attribute) or not isinstance(node.func.value, cst.Name):
            return False
        name = self.scope.get(node.func.value.value)
        if name is None or name in self.generators:
            return name is not None
        kind = self.kind_of(Var(name), required=name in self.arguments)
        return kind is not None and isinstance(kind[1], type) and issubclass(kind[1], RANDOM_GENERATORS)

    def draw(self, node: cst.Call, out, target, receiver: Var | None = None):
        """`rng.normal(0.0, 1.0, n)`: a draw from the user's generator runs as written, where it is written."""
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else getattr(self.static_value(node.func),
                                                                                             "__name__", "")
        if not any(callable(getattr(kind, method, None)) for kind in RANDOM_GENERATORS):
            raise self.err(node, f"a random generator has no method `{method}`")
        if any(a.star for a in node.args):
            raise self.err(node, "`*args` / `**kwargs` in calls are not supported")
        receiver = receiver or self.expr(node.func.value, out)
        args = [receiver] + [self.prim_arg(a.value, out) for a in node.args if a.keyword is None]
        kwargs = [(a.keyword.value, self.prim_arg(a.value, out)) for a in node.args if a.keyword is not None]
        what = cst.Module([]).code_for_node(node.func)
        refusal = self.message_at(node, f"`{what}` draws random numbers from differentiated parameters", DRAW_HINT)
        rule = Opaque(method, refusal=refusal, impure=True, form="method", spelled=method)
        return self.emit(out, target or self.temp(method), Prim(rule, tuple(args), tuple(kwargs), method))

    def message_at(self, node, message, hint="") -> str:
        """The located text of `self.err(node, message, hint)`, for an error raised later (errors.Located)."""
        return self.err(node, message, hint).args[0]

    def expr_target(self, atom, out, target):
        return self.emit(out, target, Copy(atom)) if target is not None else atom

    def refusal(self, node: cst.Call, fn) -> str:
        """The error for a call with no rule whose result turns out to depend on a differentiated input."""
        name = getattr(fn, "__name__", None)
        if name is None:  # a callable object
            what = cst.Module([]).code_for_node(node.func)
            if type(fn).__name__ == "StencilFunc":
                return self.message_at(node, f"`{what}` is a numba @stencil, which s2sad does not differentiate",
                                       "write its loop out: `out = np.zeros_like(a)`, then `out[i, j] = ...` over "
                                       "the interior, reading `a[i, j + 1]` for the stencil's `a[0, 1]`")
            return self.message_at(node, f"no derivative rule for `{what}`, a {type(fn).__name__} object", HINT_RULE)
        if self.builtin_name(fn):
            return self.message_at(node, f"the builtin `{name}` has no derivative rule",
                                   BUILTIN_HINTS.get(name, "use a NumPy or math function with a rule, or arithmetic"))
        if not callable(fn) or isinstance(fn, type) and not (fn.__module__ or "").startswith("numpy"):
            return self.message_at(node, f"cannot call `{name}` here",
                                   "call NumPy/math functions or plain Python functions")
        if _draws(fn):
            return self.message_at(node, f"`{name}` draws random numbers from differentiated parameters", DRAW_HINT)
        spelled = cst.Module([]).code_for_node(node.func)
        called = f", called as `{spelled}`" if spelled != name else ""  # `np.ma.array` is not NumPy's `array`
        return self.message_at(node, f"no derivative rule for `{name}`{called}", HINT_RULE)

    @staticmethod
    def builtin_name(fn) -> str:
        name = getattr(fn, "__name__", None)
        return name if name and getattr(builtins, name, None) is fn else ""

    def callee_spelling(self, func, fn) -> str | None:
        """How generated code names a callee with no rule: the user's dotted path from a module
        (`np.random.normal`, `scipy.special.gammaln`), else the function's own module and name."""
        root = func
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and root is not func:
            module = self.static_value(root)
            if isinstance(module, types.ModuleType):
                path = module.__name__ + _dotted(func)[len(root.value):]
                return "np" + path[len("numpy"):] if path.startswith("numpy.") else path
        if isinstance(getattr(fn, "__self__", None), np.random.RandomState):
            return "np.random." + fn.__name__
        try:
            return spelling(fn)
        except (ValueError, AttributeError):
            return None

    def opaque_attribute(self, node: cst.Attribute, base, out, target):
        """`x.dtype`, `np.finfo(d).eps`: an attribute with no rule is read as written, on inactive values."""
        attr = node.attr.value
        refusal = self.message_at(node, f"attribute `.{attr}` has no derivative rule",
                                  "on differentiated values s2sad reads .shape, .size, .ndim and .T")
        rule = Opaque(f"attribute {attr}", refusal=refusal, form="attribute", spelled=attr)
        hint = f"{base.name}_{attr}" if isinstance(base, Var) else attr
        return self.emit(out, target or self.temp(hint), Prim(rule, (base,), (), attr))

    def astype(self, node: cst.Call, out, target):
        """`x.astype(float)` and `x.astype(np.float32)` are differentiable copies; other dtypes are read as
        written, on inactive values. `copy=False` gives `x` itself where its dtype is the one asked for."""
        positional = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        if any(a.star for a in node.args) or len(positional) > 1 or set(keywords) - {"dtype", "copy"} or \
                len(positional) + ("dtype" in keywords) != 1:
            raise self.err(node, "write .astype(dtype) with the dtype alone, or with copy=False",
                           "x.astype(np.float64)")
        copy = self.static_value(keywords["copy"]) if "copy" in keywords else True
        if not isinstance(copy, bool):
            raise self.err(node, "`copy=` of .astype must be True or False when the code is generated")
        x = self.expr(node.func.value, out)
        dtype = self.prim_arg(positional[0].value if positional else keywords["dtype"], out)
        return self.cast(node, x, dtype, copy, out, target)

    def cast(self, node: cst.Call, x, dtype, copy: bool, out, target):
        """`x` converted to `dtype`. A copy, or (`copy=False`, np.asarray) `x` itself where its dtype is
        that one already: NumPy decides at run time, so the result is taken to share `x`'s memory, and a
        write through either name that the other reads past is refused (sharing.py)."""
        floats = (Const(np.dtype(np.float64)), Const(np.dtype(np.float32)))
        if dtype in floats and copy:
            return self.prim(out, "as_float" if dtype == floats[0] else "as_float32", (x,), target=target)
        if dtype in floats:
            return self.prim(out, "asarray", (x,), (("dtype", dtype),), target=target)
        method = isinstance(node.func, cst.Attribute) and node.func.attr.value == "astype"
        code = cst.Module([]).code_for_node
        what = "`.astype`" if method else f"`{code(node.func)}`"
        operand = node.func.value if method else node.args[0].value
        constant = node.deep_replace(operand, cst.parse_expression(f"s2sad.stop_gradient({code(operand)})"))
        refusal = self.message_at(node, f"{what} to a dtype other than float64 or float32 has no derivative here",
                                  f"to use the converted values as constants, convert a constant: `{code(constant)}`; "
                                  "differentiated values stay floats (.astype(float), .astype(np.float32))")
        rule = Opaque("astype", refusal=refusal, form="method", spelled="astype", views=not copy)
        hint = f"{x.name}_cast" if isinstance(x, Var) else "cast"
        return self.emit(out, target or self.temp(hint), Prim(rule, (x, dtype), (), "astype"))


DIAGNOSTICS = frozenset({"logging", "warnings", "_warnings"})  # statements calling these are left out of generated code


def _positional(fn, args: list, kwargs: list) -> tuple[list, list]:
    """Keyword operands as positional ones, defaults filled in before them (`np.random.normal(size=n)`
    as `np.random.normal(0.0, 1.0, n)`): numba's versions of many NumPy functions take no keywords."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    names = [p.name for p in params]
    given = dict(kwargs)
    if not kwargs or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params) or \
            not set(given) <= set(names[len(args):]):
        return args, kwargs
    last = max(names.index(k) for k in given)
    filled = list(args)
    for p in params[len(args):last + 1]:
        if p.name in given:
            filled.append(given[p.name])
        elif p.default is not p.empty and isinstance(p.default, (int, float, bool, type(None))):
            filled.append(Const(p.default))
        else:
            return args, kwargs
    return filled, []
