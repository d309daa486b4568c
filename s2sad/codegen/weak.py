"""NumPy's promotion of Python numbers (NEP 50), decided per value of a function compiled with float32 arguments.

NumPy reads a Python float or int as "weak": it takes the dtype of the array or NumPy scalar it meets, so
`x * 0.5`, `1.0 - x`, `x[i] * i` and `lam * x` (a Python float `lam`) keep a float32 `x` float32. Python
numbers among themselves compute as Python numbers (float64), and a NumPy function of one is a strong
np.float64 (`np.sqrt(T)`), which widens what it meets. numba has no weak numbers: it types a Python float,
a loop index and `np.sqrt(T)` alike, as float64 or int64, and promotes float32 with them to float64.

So each value of the function gets the class NumPy would give it:

    "int", "float"   a weak Python int or float (literals, `range` indices, shapes, Python float
                     arguments, arithmetic and `math` functions of those)
    "f32", "f64"     a float32 or float64 array or NumPy scalar
    "i64"            an integer array or NumPy integer
    "shape"          a tuple of weak ints (`x.shape`)
    "other"          anything else (booleans, tuples, lists, strings)

A variable's class joins those of all its definitions (a loop accumulator `s = 0.0` that adds float32
values is float32). The rewrite then writes `np.float32(w)` where a weak float or int `w` meets a float32
value in arithmetic, a NumPy call or a runtime helper whose result is float32, or is stored into a float32
variable or tape. Everything else stays as written, so weak numbers among themselves and a weak number
meeting float64 compute exactly as NumPy computes them.
"""

from __future__ import annotations

import functools

import libcst as cst
from numba.core import types

from s2sad.rules import all_rules
from s2sad.rules.registry import spellings

WEAK = ("int", "float")
STRONG_FLOATS = ("f32", "f64")
ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power,
              cst.MatrixMultiply)
AUGMENTED = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
             cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide, cst.ModuloAssign: cst.Modulo,
             cst.PowerAssign: cst.Power, cst.MatrixMultiplyAssign: cst.MatrixMultiply}
CONSTANTS = {"pi", "e", "tau", "inf", "nan"}  # math.pi, np.inf, ...: Python floats
# What rules say of NumPy functions (`dtype_from`, `int_result`, `bool_result`), for those generated code
# calls as the user wrote them, which have no rule: np.array is lowered before code is generated where it
# is differentiated, np.isclose and np.allclose are inlined, the others are never differentiated.
UNRULED_CREATORS = {"array": (0,), "logspace": (), "geomspace": ()}
UNRULED_INT_RESULTS = {"argsort", "searchsorted", "count_nonzero", "nonzero", "flatnonzero", "digitize", "bincount"}
UNRULED_BOOLS = {"isclose", "allclose", "array_equal", "signbit", "any", "all"}
# Python's math functions whose result is an int (math.floor(2.5) is 2, where np.floor(2.5) is 2.0): one
# rule covers both spellings, so this is a fact of the math module, not of the rule
MATH_INTS = {"floor", "ceil", "trunc", "factorial", "comb", "perm", "gcd", "isqrt"}
DTYPE_CLASS = {"float32": "f32", "single": "f32", "float64": "f64", "double": "f64", "float": "f64",
               "float_": "f64", "int64": "i64", "int32": "i64", "intp": "i64", "int": "i64"}


@functools.cache
def _numpy_rules() -> dict[str, object]:
    """The rule of each NumPy function generated code may call, by its spelling there (np.linalg.inv)."""
    return {s: r for r in all_rules() for s in spellings(r) if s.startswith("np.")}


def numpy_rule(name: str | None):
    """The rule of the NumPy function a call names (`np.zeros`, `numpy.zeros`), or None."""
    if name is None or not name.startswith(("np.", "numpy.")):
        return None
    return _numpy_rules().get("np." + name.partition(".")[2])


@functools.cache
def creators() -> dict[str, tuple]:
    """NumPy functions that make an array of the dtype of their `dtype=` or their values, by last name:
    the operands whose values give the dtype (`Rule.dtype_from`)."""
    made = {s.rpartition(".")[2]: r.dtype_from for s, r in _numpy_rules().items() if r.dtype_from is not None}
    return {**UNRULED_CREATORS, **made}


@functools.cache
def _adjoint_of() -> dict[str, int]:
    """Runtime helpers whose result has an operand's precision (adjoint helpers): name -> that operand's position."""
    return {s: r.precision_of for r in all_rules() if r.precision_of is not None
            for s in spellings(r) | {r.print_as} if s and "." not in s}


@functools.cache
def _stand_ins() -> frozenset:
    """Runtime names generated code calls in place of a NumPy or SciPy function."""
    from s2sad.codegen.vmath import REPLACED
    from s2sad.rules import all_rules
    from s2sad.runtime import elementwise, special

    spelled = {r.print_as for r in all_rules() if r.print_as and (r.spelled or "").startswith("np.")}
    return frozenset(spelled | set(REPLACED.values()) | set(special.__all__) | set(elementwise.__all__))


def promote(a: str | None, b: str | None) -> str | None:
    """The class of a result of `a` and `b` under NumPy's promotion (None: not known yet)."""
    if a is None or b is None:
        return b if a is None else a
    if "other" in (a, b) or "shape" in (a, b):
        return "other"
    if a in WEAK and b in WEAK:
        return "float" if "float" in (a, b) else "int"
    if a in WEAK:
        a, b = b, a
    if b in WEAK:  # a weak number takes the other's dtype; a Python float meeting integers is float64
        return "f64" if a == "i64" and b == "float" else a
    return a if a == b else "f64"


def join(classes) -> str | None:
    """The class of a value that may be any of `classes` (None: none known yet)."""
    return functools.reduce(promote, classes, None)


def param_class(t, weak_float: bool) -> str:
    """The class of an argument of numba type `t`; `weak_float`: a float64 scalar given as a Python float."""
    if isinstance(t, types.Array):
        dtype = t.dtype
        return "f32" if dtype == types.float32 else "f64" if dtype == types.float64 else \
            "i64" if isinstance(dtype, types.Integer) else "other"
    if t == types.float32:
        return "f32"
    if t == types.float64:
        return "float" if weak_float else "f64"
    if isinstance(t, types.Integer):
        return "int"
    return "other"


def _dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def called(func: cst.BaseExpression) -> tuple[str | None, str | None]:
    """("np" | "math" | None, the function's last name) of a call's function."""
    name = _dotted(func)
    if name is None:
        return None, None
    head, _, last = name.rpartition(".")
    if head in ("np", "numpy", "np.linalg", "numpy.linalg", "np.random", "np.fft"):
        return "np", last
    if head == "math":
        return "math", last
    return None, name


class Classes(cst.CSTVisitor):
    """The class of every variable of one function: the join over its definitions, to a fixed point."""

    def __init__(self, params: dict[str, str]):
        self.defs: dict[str, list] = {name: [lambda c=c: c] for name, c in params.items()}
        self.of: dict[str, str | None] = {}
        self.root = None

    def solve(self) -> dict[str, str | None]:
        for _ in range(50):
            changed = False
            for name, defs in self.defs.items():
                joined = join(define() for define in defs)
                if joined != self.of.get(name):
                    self.of[name], changed = joined, True
            if not changed:
                break
        return self.of

    def define(self, name: str, make) -> None:
        self.defs.setdefault(name, []).append(make)

    def visit_FunctionDef(self, node):
        if self.root is None:
            self.root = node
            return True
        return False  # a function defined inside this one

    def visit_Lambda(self, node):
        return False

    def visit_Assign(self, node):
        for target in node.targets:
            self._bind(target.target, node.value)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._bind(node.target, node.value)

    def visit_AugAssign(self, node):
        if isinstance(node.target, cst.Name):
            name, op = node.target.value, AUGMENTED.get(type(node.operator))
            self.define(name, lambda: self.in_place(self.of.get(name), op, self.classify(node.value)))

    def visit_For(self, node):
        if isinstance(node.target, cst.Name):
            ranged = isinstance(node.iter, cst.Call) and _dotted(node.iter.func) == "range"
            self.define(node.target.value, (lambda: "int") if ranged else (lambda: self.element(node.iter)))

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value == "append" \
                and len(node.args) == 1:
            self.define(func.value.value, lambda: self.classify(node.args[0].value))

    def _bind(self, target, value) -> None:
        if isinstance(target, cst.Name):
            self.define(target.value, lambda: self.classify(value))
        elif isinstance(target, (cst.Tuple, cst.List)):
            items = value.elements if isinstance(value, (cst.Tuple, cst.List)) and \
                len(value.elements) == len(target.elements) else None
            for k, element in enumerate(target.elements):
                if items is not None:
                    self._bind(element.value, items[k].value)
                elif isinstance(element.value, cst.Name):
                    self.define(element.value.value, lambda: self.element(value))

    def element(self, value) -> str | None:
        """The class of an item of `value` (unpacked, or iterated over)."""
        c = self.classify(value)
        return "int" if c == "shape" else c if c in ("f32", "f64", "i64") else "other"

    # ------------------------------------------------------------------ expressions
    def classify(self, node) -> str | None:
        if isinstance(node, cst.Float):
            return "float"
        if isinstance(node, cst.Integer):
            return "int"
        if isinstance(node, cst.Name):
            if node.value in self.defs:
                return self.of.get(node.value)  # None until solved: the join only rises
            return "other"  # a global, True, None
        if isinstance(node, cst.Attribute):
            return self.attribute(node)
        if isinstance(node, cst.Subscript):
            c = self.classify(node.value)
            return "int" if c == "shape" else c if c in ("f32", "f64", "i64") else "other"
        if isinstance(node, cst.UnaryOperation):
            return "other" if isinstance(node.operator, cst.Not) else self.classify(node.expression)
        if isinstance(node, cst.BinaryOperation):
            return self.binary(self.classify(node.left), type(node.operator), self.classify(node.right))
        if isinstance(node, cst.IfExp):
            return promote(self.classify(node.body), self.classify(node.orelse))
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.List) and not node.elements:
            return None  # an empty list: its appends say what it holds
        return "other"

    def attribute(self, node: cst.Attribute) -> str | None:
        attr, base = node.attr.value, node.value
        if isinstance(base, cst.Name) and base.value in ("math", "np", "numpy"):
            return "float" if attr in CONSTANTS else "other"
        if attr == "shape":
            return "shape"
        if attr in ("size", "ndim"):
            return "int"
        if attr in ("T", "real", "imag", "flat"):
            return self.classify(base)
        return "other"

    @classmethod
    def in_place(cls, target, op, value) -> str | None:
        """`target op= value`: an array keeps its dtype, a float32 scalar widens (numba unifies scalars itself)."""
        result = cls.binary(target, op, value)
        return "f32" if target == "f32" and result == "f64" else result

    @staticmethod
    def binary(left, op, right) -> str | None:
        if op not in ARITHMETIC:
            return "other" if None not in (left, right) else None
        result = promote(left, right)
        if op is cst.Divide and result in ("int", "i64"):
            return "float" if result == "int" else "f64"
        return result

    def call(self, node: cst.Call) -> str | None:
        name = _dotted(node.func)
        module, last = called(node.func)
        args = [a for a in node.args if a.keyword is None]
        dtype = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "dtype"), None)
        if module is None and name in ("float", "int", "len", "abs", "min", "max", "round"):
            if name in ("float", "int", "len"):
                return "float" if name == "float" else "int"
            joined = join(self.classify(a.value) for a in args)
            return "int" if name == "round" and len(args) == 1 else joined
        if module == "math":
            return "int" if last in MATH_INTS else "other" if last.startswith("is") else "float"
        if module == "np":
            return self.numpy_call(last, args, dtype, numpy_rule(name))
        if isinstance(node.func, cst.Attribute) and name is not None and not name.startswith(("np.", "numpy.")):
            return self.method(node.func, args)
        return self.helper(name, args)

    def numpy_call(self, last: str, args: list, dtype, rule=None) -> str | None:
        """A call of the NumPy function `last` (its rule: `rule`, None where it has none)."""
        if last in ("float32", "single"):
            return "f32"
        if last in ("float64", "double"):
            return "f64"
        if last in ("int64", "int32", "intp"):
            return "i64"
        if dtype is not None:
            return self.dtype_class(dtype)
        if rule is not None and rule.precision_of is not None:  # np.zeros_like(x): x's dtype
            return self.classify(args[rule.precision_of].value) if len(args) > rule.precision_of else "other"
        made = rule.dtype_from if rule is not None else UNRULED_CREATORS.get(last)
        if made is not None:
            return self.created(made, args)
        if rule.bool_result if rule is not None else last in UNRULED_BOOLS:
            return "other"
        if rule is not None and rule.attribute and len(args) == 1:  # np.shape(x) is x.shape
            return self.attribute(cst.Attribute(args[0].value, cst.Name(last)))
        classes = [self.classify(a.value) for a in args]
        if None in classes:
            return None
        if rule.int_result if rule is not None else last in UNRULED_INT_RESULTS:
            return "i64"
        strong = [c for c in classes if c in ("f32", "f64", "i64")]  # (a condition or a tuple says nothing)
        if not strong:  # a NumPy function of Python numbers is a NumPy scalar
            return "f64" if "float" in classes else "i64" if classes else "f64"
        return join(strong)

    def created(self, dtype_from: tuple, args: list) -> str | None:
        """np.zeros(n), np.full(n, v), np.array([...]), np.arange(...): the dtype of the values at the
        positions `dtype_from`, float64 where there are none."""
        if not dtype_from:
            return "f64"
        values = [args[k] for k in dtype_from if k < len(args)]
        items = [e.value for a in values
                 for e in (a.value.elements if isinstance(a.value, (cst.List, cst.Tuple)) else [a])]
        joined = join(self.classify(item) for item in items)
        return {"float": "f64", "int": "i64", None: "f64"}.get(joined, joined)

    def dtype_class(self, dtype) -> str:
        if isinstance(dtype, cst.Attribute) and dtype.attr.value == "dtype":
            c = self.classify(dtype.value)
            return c if c in ("f32", "f64", "i64") else "other"
        if isinstance(dtype, cst.SimpleString):
            return DTYPE_CLASS.get(dtype.evaluated_value, "other")
        name = _dotted(dtype)
        return DTYPE_CLASS.get(name.rpartition(".")[2], "other") if name else "other"

    def method(self, func: cst.Attribute, args: list) -> str | None:
        base, attr = self.classify(func.value), func.attr.value
        if attr == "astype" and args:
            return self.dtype_class(args[0].value)
        if attr in ("pop", "copy", "sum", "prod", "max", "min", "mean", "reshape", "ravel", "flatten",
                    "transpose", "cumsum", "cumprod", "squeeze", "dot", "clip", "item"):
            return base if base in ("f32", "f64", "i64", "float", "int") else "other"
        if attr in ("argmax", "argmin"):
            return "i64"
        return "other"

    def helper(self, name: str | None, args: list) -> str | None:
        """A runtime helper or a generated function. A stand-in for a NumPy or SciPy function (`vlog`,
        `sp_gammaln`) makes a NumPy scalar of Python numbers; an adjoint helper takes the precision of the
        value whose adjoint it makes (`unbroadcast(g, like)`: like's); any other follows its float operands
        (an integer array there indexes, as in `add_at(x_bar, idx, g)`)."""
        classes = [self.classify(a.value) for a in args]
        if None in classes:
            return None
        if name in _stand_ins():
            return self.numpy_call(name, args, None)
        if name in _adjoint_of() and len(classes) > _adjoint_of()[name]:
            c = classes[_adjoint_of()[name]]
            return {"int": "float", "i64": "f64"}.get(c, c)
        joined = join(c for c in classes if c in ("float",) + STRONG_FLOATS)  # (integers index or count)
        return joined if joined is not None else "other"


WIDEN = "as_float"  # runtime.shapes: float64 of an array or a scalar
WIDEN_IMPORT = "from s2sad.runtime.shapes import as_float"

# NumPy functions that broadcast their operands elementwise: a weak int among them is a value, not an axis
ELEMENTWISE = {"maximum", "minimum", "fmax", "fmin", "where", "clip", "add", "subtract", "multiply", "divide",
               "true_divide", "floor_divide", "power", "float_power", "arctan2", "hypot", "copysign", "logaddexp",
               "logaddexp2", "fmod", "remainder", "mod", "heaviside"}
# the runtime's stand-ins the rules of those print instead (np_where for np.where): the same kind of call
STAND_INS = {r.print_as for r in all_rules() if r.name in ELEMENTWISE and r.print_as and "." not in r.print_as}


def float32_of(value: cst.BaseExpression) -> cst.Call:
    """`np.float32(value)`."""
    return cst.Call(cst.Attribute(cst.Name("np"), cst.Name("float32")), [cst.Arg(value)])


class Weak(cst.CSTTransformer):
    """`np.float32(w)` where a weak number `w` meets a float32 value in one function (see the module's
    docstring); a weak argument that the function makes float32 is converted on entry."""

    def __init__(self, function: str, classes: Classes, weak_params: dict[str, str], text: str):
        self.function, self.classes, self.weak_params, self.text = function, classes, weak_params, text
        self.root = None
        self.count = 0
        self.widened = False  # WIDEN is called: the module imports it

    # ------------------------------------------------------------------ scope
    def visit_FunctionDef(self, node):
        if self.root is None and node.name.value == self.function:
            self.root = node
            return True
        return False  # other functions, and functions defined inside this one

    def leave_FunctionDef(self, original, updated):
        if original is not self.root:
            return updated
        params, entry = list(updated.params.params), []
        for k, param in enumerate(params):
            name = param.name.value
            if name in self.weak_params and self.classes.of.get(name) == "f32":
                given = name + "_float64"
                while given in self.text:
                    given += "_"
                params[k] = param.with_changes(name=cst.Name(given))
                entry.append(cst.parse_statement(f"{name} = np.float32({given})"))
        if not entry:
            return updated
        self.count += len(entry)
        body = updated.body.with_changes(body=[*entry, *updated.body.body])
        return updated.with_changes(params=updated.params.with_changes(params=params), body=body)

    def visit_Lambda(self, node):
        return False

    # ------------------------------------------------------------------ where weak numbers meet float32
    def _cast(self, original, updated, ints: bool = True):
        """`updated` as float32 if `original` is a weak number (ints too unless `ints` is False)."""
        if self.classes.classify(original) in (("int", "float") if ints else ("float",)):
            self.count += 1
            return float32_of(updated)
        return updated

    def leave_BinaryOperation(self, original, updated):
        if type(original.operator) not in ARITHMETIC:
            return updated
        of = self.classes.classify
        if Classes.binary(of(original.left), type(original.operator), of(original.right)) != "f32":
            return updated
        power = isinstance(original.operator, cst.Power)  # an integer exponent stays an integer
        return updated.with_changes(left=self._cast(original.left, updated.left),
                                    right=self._cast(original.right, updated.right, ints=not power))

    def leave_Call(self, original, updated):
        func = original.func
        if isinstance(func, cst.Attribute) and func.attr.value == "append" and len(original.args) == 1:
            if self.classes.classify(func.value) == "f32":
                arg = updated.args[0]
                return updated.with_changes(args=[arg.with_changes(value=self._cast(original.args[0].value, arg.value))])
            return updated
        module, last = called(func)
        if module == "math" or (module is None and last in ("float", "int", "len", "range", "abs", "min", "max",
                                                            "round", "print")):
            return updated
        if module == "np" and (last in creators() or last in ("float32", "float64")):
            return updated  # their numbers set the dtype of the array they make
        if self.classes.classify(original) != "f32":
            return updated
        ints = module == "np" and last in ELEMENTWISE or module is None and last in STAND_INS
        args = [a if a.keyword is not None else a.with_changes(value=self._cast(o.value, a.value, ints))
                for o, a in zip(original.args, updated.args)]
        return updated.with_changes(args=args)

    def leave_Assign(self, original, updated):
        targets = original.targets
        if len(targets) != 1 or not isinstance(targets[0].target, cst.Name):
            return updated
        kind = self.classes.of.get(targets[0].target.value)
        if kind == "f32":
            return updated.with_changes(value=self._cast(original.value, updated.value))
        if kind == "f64" and self.classes.classify(original.value) == "f32":
            # rebound to float64 later (NumPy changes its dtype): numba needs one dtype per variable
            self.count += 1
            self.widened = True
            return updated.with_changes(value=cst.Call(cst.Name(WIDEN), [cst.Arg(updated.value)]))
        return updated

    def leave_AugAssign(self, original, updated):
        if isinstance(original.target, cst.Name) and self.classes.of.get(original.target.value) == "f32":
            power = isinstance(original.operator, cst.PowerAssign)
            return updated.with_changes(value=self._cast(original.value, updated.value, ints=not power))
        return updated


def weak_text(text: str, function: str, param_types: dict[str, object], weak_floats: set[str]) -> str:
    """The module `text` with NumPy's promotion of Python numbers written out in `function`, whose
    parameters have the numba types `param_types`; `weak_floats`: the float64 ones given as Python floats."""
    module = cst.parse_module(text)
    fn = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == function)
    params = {name: param_class(t, name in weak_floats) for name, t in param_types.items()}
    classes = Classes(params)
    fn.visit(classes)
    classes.solve()
    weak_params = {name: c for name, c in params.items() if c in WEAK}
    rewrite = Weak(function, classes, weak_params, text)
    changed = module.visit(rewrite)
    if not rewrite.count:
        return text
    if rewrite.widened:
        changed = changed.with_changes(body=[cst.parse_statement(WIDEN_IMPORT), *changed.body])
    return changed.code
