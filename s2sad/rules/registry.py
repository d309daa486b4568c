"""The primitive registry: which Python callables s2sad knows, and how each differentiates.

A rule's adjoint is a small template function written in plain Python:

    @defrule(np.tanh, math.tanh)
    def tanh(g, out, x):
        return g * (1.0 - out * out)

`g` is the adjoint of the result, `out` the result, then the primitive's operands (keyword
operands such as `axis` by name). It returns one contribution per positional operand, `None`
where the operand is not differentiable. Code generation reads the template's source and
inlines it with names substituted; the template is never called at run time.

The tangent (forward mode) template has the same signature, but `g` is the tangent of one
operand and each result is that operand's contribution to the result's tangent (J_i @ g).
An elementwise rule's Jacobians are diagonal, so its adjoint template *is* its tangent
template; other rules pass `tangent=` to `defrule`.
"""

from __future__ import annotations

import functools
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable

import libcst as cst
import numpy as np

RULES_VERSION = "2"

# operator key -> (printed operator, precedence); higher binds tighter
OPERATORS = {
    "or": ("or", 1), "and": ("and", 2), "not": ("not", 3),
    "lt": ("<", 4), "le": ("<=", 4), "gt": (">", 4), "ge": (">=", 4), "eq": ("==", 4), "ne": ("!=", 4),
    "bitor": ("|", 5), "bitxor": ("^", 6), "bitand": ("&", 7),
    "add": ("+", 8), "sub": ("-", 8),
    "mul": ("*", 9), "truediv": ("/", 9), "floordiv": ("//", 9), "mod": ("%", 9), "matmul": ("@", 9),
    "neg": ("-", 10), "pos": ("+", 10), "invert": ("~", 10),
    "pow": ("**", 11),
}


@dataclass(frozen=True)
class Check:
    """A call the registry test differentiates: `expr` over operands a, b, c."""

    expr: str
    domain: str = "real"  # real | positive | unit (|x| < 1) | nonzero
    shapes: tuple = ((), (3,), (2, 3))  # per case: one shape for all operands, or a tuple of shapes
    step: float = 1e-6  # the finite differences' step: a rule rounding to float32 (linear) takes a long one


@dataclass
class Rule:
    name: str
    adjoint: Callable | None  # None: not differentiable (zero derivative)
    operator: str | None = None  # key into OPERATORS for infix/prefix printing
    elementwise: bool = True  # adjoint is linear in g elementwise (g may be broadcast-bigger)
    cheap: bool = True  # cheap enough to recompute in the reverse sweep instead of taping
    costly: bool = False  # a libm call: loop values are popped off a tape, not recomputed (see analyze)
    checks: tuple = ()
    spelled: str | None = None  # default name in generated code (first registered object)
    print_as: str | None = None  # a runtime stand-in generated code calls instead (numba lacks the original)
    print_plain: bool = False  # ...except for a plain one-operand call, which numba has (np.sum(x))
    tangent: Callable | None = None  # forward-mode template; None: the adjoint (elementwise rules)
    tangent_error: str | None = None  # why this rule has no forward mode (custom_vjp)
    reduces: bool = False  # a NumPy reduction, f(x, axis=None, ..., keepdims=False): its rank follows from those
    fuses: bool = False  # a NumPy ufunc of one operand: codegen fuses `np.<name>(x)` into loops like arithmetic
    vmath: str | None = None  # the runtime.vmath kernel numba compiles for `np.<name>(x)` (its loops vectorize)
    cuda: str | None = None  # its CUDA device form on scalars: a callee ("math.asinh") or a format ("{0} * {0}")
    singular: bool = False  # its derivative is infinite or nan somewhere on the reals: np.where guards its operands
    views: bool = False  # NumPy may return its first operand, or a view of it: a write into one shows in the other
    shape_only: tuple = ()  # operand positions read only for their shapes: a later write there changes no result
    fresh: bool = False  # its result is always a new array, never an operand or a view of one
    fills: float | None = None  # it allocates an array whose every element starts at this value (np.zeros: 0.0)
    int_result: bool = False  # its result is an integer (a length, an index), whatever its operands
    bool_result: bool = False  # its result is a boolean (a test, a mask), whatever its operands
    reads_tape: bool = False  # takes a value off a tape (its first operand): each mode differentiates it itself
    shaped_like: int | None = None  # the operand whose shape its result has (unbroadcast(g, like): 1)
    shape_arg: int | None = None  # the operand that is its result's shape (np.zeros(shape): 0, np.reshape(x, shape): 1)
    precision_of: int | None = None  # the operand whose dtype its result has (np.zeros_like(x): x's; unbroadcast(g, like): like's)
    # it makes an array whose dtype is its `dtype=`, else that of these operands' values (np.full(n, v): (1,)),
    # else float64 (np.zeros(n): ())
    dtype_from: tuple | None = None
    keeps_int: bool = False  # of integer operands, an integer (n + 1, i // 2): an index computed from indices
    attribute: bool = False  # a call of one operand prints as the attribute of its name (np.shape(x): `x.shape`)
    siblings: list = field(default_factory=list)  # (name, source) of functions its templates call (custom rules)
    _template: Any = field(default=None, repr=False)
    _tangent_template: Any = field(default=None, repr=False)

    @property
    def differentiable(self) -> bool:
        return self.adjoint is not None

    def template(self) -> "Template":
        if self._template is None:
            self._template = Template.parse(self.adjoint)
        return self._template

    def tangent_template(self) -> "Template":
        if self._tangent_template is None:
            if self.tangent_error:
                raise TypeError(self.tangent_error)
            if self.tangent is None and not self.elementwise:
                raise TypeError(f"rule {self.name!r} is not elementwise and has no tangent template")
            t = Template.parse(self.tangent) if self.tangent else self.template()
            if t.statements:
                raise TypeError(f"rule {self.name!r}: a tangent template must be a single `return` (no locals)")
            self._tangent_template = t
        return self._tangent_template


@dataclass
class Opaque(Rule):
    """A call with no rule, kept as the user wrote it while none of its operands is differentiated
    (`math.lgamma(n + 1.0)`, `np.random.normal(0.0, 1.0, n)`, `x.astype(np.int64)`, `x.dtype`).
    Made per call site, never registered: `refusal` is the located error the analysis raises where the
    result depends on a differentiated input after all."""

    adjoint: Callable | None = None
    elementwise: bool = False  # nothing is known of its shapes
    cheap: bool = False  # never recomputed in the reverse sweep: a random draw must not run twice
    refusal: str = ""
    impure: bool = False  # a random draw: it runs where the user wrote it even when nothing reads it
    form: str = "call"  # "call" f(a, b); "method" a.f(b); "attribute" a.f


@dataclass
class Template:
    params: list[str]
    defaults: dict[str, Any]
    statements: list[cst.BaseSmallStatement]  # local assignments before the return
    results: list[cst.BaseExpression | None]  # one per positional operand

    @staticmethod
    def parse(fn: Callable) -> "Template":
        sig = inspect.signature(fn)
        defaults = {k: p.default for k, p in sig.parameters.items() if p.default is not p.empty}
        return Template.from_source(textwrap.dedent(inspect.getsource(fn)), defaults)

    @staticmethod
    def from_source(text: str, defaults: dict | None = None) -> "Template":
        """A template from the text of a `def` (rules made at run time, e.g. for custom_jvp)."""
        module = cst.parse_module(text)
        func = next(n for n in module.body if isinstance(n, cst.FunctionDef))
        params = [p.name.value for p in func.params.params]
        defaults = defaults or {}
        statements, results = [], []
        for line in func.body.body:
            for small in line.body:
                if isinstance(small, cst.Return):
                    value = small.value
                    items = value.elements if isinstance(value, cst.Tuple) else [value]
                    for item in items:
                        expr = item.value if isinstance(item, cst.Element) else item
                        is_none = isinstance(expr, cst.Name) and expr.value == "None"
                        results.append(None if is_none else expr)
                else:
                    statements.append(small)
        return Template(params, defaults, statements, results)

    def differentiable_positions(self) -> list[int]:
        return [i for i, r in enumerate(self.results) if r is not None]


class Custom:
    """A function the user gave its own derivative rule (s2sad.custom_jvp / custom_vjp). Lowering calls it
    as one primitive with `rule()`, made on first use by `make_rule`. The subclasses in custom.py write
    `make_rule`: it lowers and differentiates the user's rule, so they sit above lowering and code
    generation, which know these functions by this class alone."""

    def __init__(self, fun: Callable):
        self.fun = fun
        self.params = list(inspect.signature(fun).parameters)
        self.name = fun.__name__
        self._rule: Rule | None = None
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)

    def rule(self) -> Rule:
        if self._rule is None:
            self._rule = self.make_rule()
        return self._rule

    def make_rule(self) -> Rule:
        raise NotImplementedError


_BY_OBJECT: dict[Any, tuple[Rule, str]] = {}
_BY_NAME: dict[str, Rule] = {}


_SPELLED: dict[Any, str] = {}  # objects whose name cannot be read off them (SciPy's ufuncs, norm.cdf)
_NAMESPACES: list = []  # objects whose attributes are read when code is generated, like a module's (scipy.stats.norm)


def spell_as(obj: Any, text: str) -> None:
    """Name `obj` `text` in error messages and in the README's table."""
    _SPELLED[obj] = text


def add_namespace(obj: Any) -> None:
    """Let programs call `obj.method(...)` where `obj.method` has a rule (as for a module's functions)."""
    _NAMESPACES.append(obj)


def spelling(obj: Any) -> str:
    """How generated code names `obj` (it imports numpy as np, and math)."""
    if obj in _SPELLED:
        return _SPELLED[obj]
    name = obj.__name__
    if obj is abs:
        return "np.abs"  # numba's builtin abs() refuses arrays; np.abs takes scalars and arrays
    if isinstance(obj, np.ufunc):
        return "np." + name
    module = getattr(obj, "__module__", None) or ""
    if module == "math":
        return "math." + name
    if module in ("builtins", "operator") or module.startswith(("s2sad.runtime", "numba.typed")):
        return name
    if module.startswith("numpy"):
        sub = module.split(".")[1:]
        sub = [s for s in sub if not s.startswith("_")]
        return ".".join(["np", *sub, name])
    qualname = getattr(obj, "__qualname__", name)
    if module and "<" not in qualname:  # a third-party function: generated code imports its module
        return f"{module}.{qualname}"
    raise ValueError(f"cannot name {obj!r} in generated code: register a module-level function")


def import_of(spelled: str) -> str | None:
    """The `import` a generated module needs for a spelled callee (None for numpy, math, runtime)."""
    if "." not in spelled or spelled.split(".")[0] in ("np", "math"):
        return None
    return "import " + spelled.rsplit(".", 1)[0]


def register(rule: Rule, *objects: Any) -> Rule:
    """Make `rule` the rule for each of `objects` (Python callables) and for its name."""
    if rule.name in _BY_NAME:
        raise ValueError(f"a rule named {rule.name!r} is already registered")
    _BY_NAME[rule.name] = rule
    if objects and rule.spelled is None:
        rule.spelled = spelling(objects[0])
    for obj in objects:
        _BY_OBJECT[obj] = (rule, spelling(obj))
    return rule


def defrule(*objects, name=None, operator=None, elementwise=True, cheap=True, checks=(), print_as=None,
            tangent=None, print_plain=False, costly=False, reduces=False, fuses=False, vmath=None, cuda=None,
            singular=False, views=False, shape_only=(), fresh=False, keeps_int=False, shaped_like=None,
            shape_arg=None, precision_of=None, dtype_from=None):
    """Decorator: register the decorated adjoint template for `objects` (or an operator).

    `tangent` is the forward-mode template (same signature); elementwise rules may omit it. A plain Python
    function among `objects` needs no `@numba.njit`: numba compiles it where generated code calls it.
    """

    def deco(adjoint):
        rule = Rule(name or adjoint.__name__, adjoint, operator, elementwise, cheap, costly, tuple(checks),
                    print_as=print_as, tangent=tangent, print_plain=print_plain, reduces=reduces, fuses=fuses,
                    vmath=vmath, cuda=cuda, singular=singular, views=views, shape_only=tuple(shape_only),
                    fresh=fresh, keeps_int=keeps_int, shaped_like=shaped_like, shape_arg=shape_arg,
                    precision_of=precision_of, dtype_from=dtype_from)
        if tangent is None and not elementwise:
            raise TypeError(f"rule {rule.name!r} is not elementwise: give it a tangent= template")
        register(rule, *objects)
        if print_as is None:
            for obj in objects:
                _callable_from_numba(obj)
        return rule

    return deco


_OVERLOADED: set = set()


def _callable_from_numba(obj: Any) -> None:
    """Let numba-compiled generated code call `obj`, a plain Python function of another package (an
    `@numba.njit` one already is; NumPy's and s2sad's runtime have numba implementations): numba compiles
    it where it is called, as for `numba.extending.register_jitable`. The function object is unchanged."""
    module = getattr(obj, "__module__", None) or ""
    if not inspect.isfunction(obj) or module.split(".")[0] in ("s2sad", "numpy") or obj in _OVERLOADED:
        return
    from numba.extending import register_jitable

    register_jitable(error_model="numpy")(obj)  # divisions give inf and nan, as in the rest of generated code
    _OVERLOADED.add(obj)


def alias(name: str, *objects: Any) -> Rule:
    """Make the registered rule `name` also the rule for `objects` (e.g. a runtime stand-in)."""
    rule = _BY_NAME[name]
    for obj in objects:
        _BY_OBJECT[obj] = (rule, spelling(obj))
    return rule


def nondiff(*objects, name: str, operator: str | None = None, print_as: str | None = None,
            cuda: str | None = None, shape_only: tuple = (), fresh: bool = False, fills: float | None = None,
            int_result: bool = False, reads_tape: bool = False, keeps_int: bool = False,
            shaped_like: int | None = None, shape_arg: int | None = None, precision_of: int | None = None,
            attribute: bool = False, bool_result: bool = False, dtype_from: tuple | None = None) -> Rule:
    """Register primitives whose derivative is zero (comparisons, shapes, integer ops)."""
    return register(Rule(name, None, operator, print_as=print_as, cuda=cuda, shape_only=tuple(shape_only), fresh=fresh,
                         fills=fills, int_result=int_result, reads_tape=reads_tape, keeps_int=keeps_int,
                         shaped_like=shaped_like, shape_arg=shape_arg, precision_of=precision_of,
                         attribute=attribute, bool_result=bool_result, dtype_from=dtype_from), *objects)


def lookup_object(obj: Any) -> tuple[Rule, str] | None:
    try:
        found = _BY_OBJECT.get(obj)
    except TypeError:  # unhashable
        return None
    if found is None and _load_optional_for(obj):
        found = _BY_OBJECT.get(obj)
    return found


def is_namespace(obj: Any) -> bool:
    _load_optional_for(obj)
    return any(obj is n for n in _NAMESPACES)


def _load_optional_for(obj: Any) -> bool:
    """Load the SciPy rules the first time a program names a SciPy object (or generated code one of its
    runtime stand-ins): s2sad itself does not import SciPy, whose import is slow. True when rules were added."""
    from s2sad import rules

    if rules.optional_loaded() or not _from_scipy(obj):
        return False
    rules.load_optional()
    return True


def _from_scipy(obj: Any) -> bool:
    if isinstance(obj, np.ufunc):  # ufuncs carry no module: SciPy's are the ones NumPy lacks
        return getattr(np, obj.__name__, None) is not obj
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and module.startswith(("scipy.", "s2sad.runtime.special"))


def spellings(rule: Rule) -> set[str]:
    """Every name generated code may call `rule` by (np.abs and np.absolute, say)."""
    return {spelled for r, spelled in _BY_OBJECT.values() if r is rule}


def lookup(name: str) -> Rule:
    return _BY_NAME[name]


def all_rules() -> list[Rule]:
    return list(_BY_NAME.values())
