"""Lower a parsed function to the normalized IR (see ir.py).

One primitive per statement with fresh temporaries; `x += e` made explicit; tuple unpacking,
conditional expressions and short-circuit `and`/`or` turned into plain statements and `If`s;
`break`, `continue` and early `return` turned into boolean flags that guard the rest of their
block, so every block has a single exit; calls to other user functions inlined.

lowerer.py holds the Lowerer, which combines one mixin per kind of syntax: statements.py,
assignments.py, iteration.py, expressions.py, pytrees.py, static.py, calls.py and inactive.py. They
share state.py (what lowering keeps besides the IR), syntax.py (questions asked of libcst trees),
facts.py (what an assignment tells of its target) and tables.py.
"""

from __future__ import annotations

from s2sad import ir
from s2sad.decided import decide_constant_branches
from s2sad.frontend import parse_function, written_by_s2sad
from s2sad.names import Names
from s2sad.ir import Record
from s2sad.swaps import copy_swapped_buffers, drop_round_trips
from s2sad.normalize.calls import TRANSFORMATIONS, register_transformations
from s2sad.normalize.lowerer import Lowerer
from s2sad.normalize.pytrees import flatten, unflatten
from s2sad.normalize.state import ChangesAtRunTime, HiddenParams, UnknownKinds
from s2sad.normalize.static import calls_its_call_method
from s2sad.normalize.syntax import assigned_names, user_names
from s2sad.normalize.tables import ATTRIBUTES, METHODS, SEQUENCE_CALLS

__all__ = [  # what other modules import from s2sad.normalize
    "ATTRIBUTES", "METHODS", "Record", "SEQUENCE_CALLS", "TRANSFORMATIONS", "calls_its_call_method",
    "flatten", "normalize", "register_transformations", "unflatten",
]


def normalize(fn, plain: frozenset = frozenset(), arg_trees: dict | None = None,
              arg_kinds: dict | None = None, copy_arguments: bool = True) -> ir.Function:
    """Lower `fn`; calls to the custom functions in `plain` are inlined as their primal code.

    `copy_arguments`: the body works on copies of the arguments it writes into (what derivatives need);
    False for the function as written, which writes into its caller's arrays as NumPy does.

    `arg_trees` maps parameters that receive pytrees to their structure: the lowered function
    takes their leaves instead, and the code is specialized to that structure. `arg_kinds` maps
    the other parameters to (ndim, type) of their arguments, for code that asks (`x.ndim`,
    `isinstance`); without it such code raises TypesNeeded, and the caller specializes.
    """
    varying: set = set()
    while True:
        try:
            return _normalize(fn, plain, arg_trees, arg_kinds, copy_arguments, varying)
        except ChangesAtRunTime as again:
            varying.update(again.keys)


def _normalize(fn, plain, arg_trees, arg_kinds, copy_arguments, varying: set) -> ir.Function:
    from s2sad import runtime

    parsed = parse_function(fn)
    # Generated code also calls numpy, math, the tape type and the runtime helpers: never shadow them.
    reserved = set(runtime.__all__) | {"np", "math", "List"}
    names = Names(user_names(parsed.node) | reserved)
    temps: set = set()
    own = assigned_names(parsed.node) | reserved
    outside = HiddenParams(names, user_names(parsed.node) - own, own, varying=varying)
    lw = Lowerer(parsed, names, temps, [parsed.fn], plain=plain, arg_trees=arg_trees or {}, hidden=outside,
                 copy_arguments=copy_arguments, kinds=dict(arg_kinds) if arg_kinds is not None else UnknownKinds())
    body: list = []
    outputs = lw.lower_body(None, body)
    function = ir.Function(
        name=parsed.name, params=lw.params + list(outside.params.values()), body=body, outputs=outputs,
        hidden=outside.listed(), copied=tuple(lw.copied), fixes_unit_axes=outside.pins_units,
        filename=parsed.filename, firstline=parsed.line, source_hash=parsed.source_hash, user_names=set(names.taken) - temps,
        temps=temps, returns_tuple=lw.ret.is_tuple, output_shape=lw.ret.shape, spelled=lw.spelled,
        generated=written_by_s2sad(parsed.fn), asks_types=isinstance(lw.kinds, UnknownKinds) and lw.kinds.asked,
        arrays=frozenset(lw.arrays | {p for p, kind in (arg_kinds or {}).items() if kind and kind[0] > 0}),
        elements=frozenset(lw.elements), typed=arg_kinds is not None,
        exits=frozenset(lw.exits),
    )
    decide_constant_branches(function)
    drop_round_trips(function)
    if copy_arguments:  # derivatives follow values: a double buffer's exchange becomes copies
        copy_swapped_buffers(function)
    return function
