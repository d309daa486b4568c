"""Questions asked of libcst syntax trees: walks, the names a function binds, reads and writes,
targets and parameters, and a lambda as the `def` it stands for.
"""

from __future__ import annotations

import collections
import functools

import libcst as cst

from s2sad.frontend import Parsed


# Fields of libcst nodes that hold only punctuation, whitespace and comments: no walk below asks about them.
_PUNCTUATION = frozenset({
    "asynchronous", "colon", "comma", "comment", "dot", "empty_lines", "equal", "first_colon", "footer", "header",
    "lbrace", "lbracket", "leading_lines", "lines_after_decorators", "lpar", "newline", "operator", "posonly_ind",
    "rbrace", "rbracket", "rpar", "second_colon", "semicolon", "trailing_comma", "trailing_whitespace"})


@functools.cache
def _syntax_fields(node_type: type) -> tuple[str, ...]:
    return tuple(f for f in node_type.__dataclass_fields__
                 if f not in _PUNCTUATION and not f.startswith("whitespace"))


@functools.cache
def _is_node(value_type: type) -> bool:
    return issubclass(value_type, cst.CSTNode)  # an ABC: isinstance on each value costs more than the lookup


@functools.lru_cache(maxsize=512)
def _walk(node: cst.CSTNode, skip: tuple = ()) -> tuple:
    """`node` and every node under it, in source order, not going inside nodes of the types in `skip`
    (other than `node` itself), nor into whitespace and punctuation. A walk over the dataclass fields:
    a libcst visitor rebuilds each node it passes. Normalize asks several such questions of every
    function (names, assignments, yields, returns, writes), and libcst's nodes are immutable and hashed
    by identity: one walk of a tree serves them all."""
    return tuple(_nodes_under(node, skip))


def _nodes_under(node: cst.CSTNode, skip: tuple):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if n is not node and isinstance(n, skip):
            continue
        children = []
        for name in _syntax_fields(type(n)):
            value = getattr(n, name)
            value_type = type(value)
            if value_type is tuple or value_type is list:
                children.extend(v for v in value if _is_node(type(v)))
            elif _is_node(value_type):
                children.append(value)
        stack.extend(reversed(children))


def user_names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in _walk(node) if isinstance(n, cst.Name)}


def _assign_targets(node: cst.CSTNode) -> list[cst.AssignTarget]:
    return [n for n in _walk(node) if isinstance(n, cst.AssignTarget)]


def assigned_names(func: cst.FunctionDef) -> set[str]:
    """Names Python treats as local: parameters and every assignment/loop target."""
    params = {p.name.value for p in func.params.params + func.params.kwonly_params}
    return params | _bound_by(func, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr))


def _bound_by(func: cst.FunctionDef, statements: tuple) -> set[str]:
    """The names the targets of these kinds of statement bind (a nested function's names are its own)."""
    return set().union(*(_target_names(n.target) for n in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda))
                         if isinstance(n, statements)))


def bound_once(func: cst.FunctionDef, name: str) -> bool:
    """Is `name` bound by one statement of `func`'s own body, and not a parameter?"""
    if name in {p.name.value for p in func.params.params + func.params.kwonly_params + func.params.posonly_params}:
        return False
    kinds = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)
    return sum(name in _target_names(n.target) for n in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda))
               if isinstance(n, kinds)) == 1


def reads_a_rank(node) -> bool:
    """`x.ndim`, `np.ndim(x)` or `len(x.shape)`."""
    if isinstance(node, cst.Attribute):
        return node.attr.value == "ndim"
    if not isinstance(node, cst.Call) or len(node.args) != 1:
        return False
    if isinstance(node.func, cst.Attribute):
        return node.func.attr.value == "ndim"
    operand = node.args[0].value
    return isinstance(node.func, cst.Name) and node.func.value == "len" and isinstance(operand, cst.Attribute) \
        and operand.attr.value == "shape"


def _lambda_def(node: cst.Lambda, parsed: Parsed):
    """`lambda t: e` as `def lambda_<line>(t): return e`, and positions that place its made nodes where
    the lambda is."""
    line = parsed.where(node)[0]
    statement = cst.Return(value=node.body)
    simple = cst.SimpleStatementLine(body=[statement])
    block = cst.IndentedBlock(body=[simple])
    made = cst.FunctionDef(name=cst.Name(f"lambda_{line}"), params=node.params, body=block)
    where = parsed.positions[node]
    return made, collections.ChainMap({n: where for n in (statement, simple, block, made, made.name)}, parsed.positions)


def _bind_parameters(func: cst.FunctionDef, args: list, kwargs: dict) -> dict:
    """A nested function's parameters bound like Python binds them; an unpassed default stays its expression."""
    p = func.params
    if p.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or p.star_kwarg is not None:
        raise TypeError("*args and **kwargs parameters are not supported")
    positional = list(p.posonly_params) + list(p.params)
    if len(args) > len(positional):
        raise TypeError(f"takes {len(positional)} positional arguments but {len(args)} were given")
    bound = {q.name.value: a for q, a in zip(positional, args)}
    for q in positional[len(args):] + list(p.kwonly_params):
        name = q.name.value
        if name in kwargs:
            bound[name] = kwargs.pop(name)
        elif q.default is not None:
            bound[name] = q.default
        else:
            raise TypeError(f"missing argument `{name}`")
    if kwargs:
        raise TypeError(f"unexpected argument(s) {', '.join(kwargs)}")
    return bound


def _gathering_params(func: cst.FunctionDef) -> list[cst.Param]:
    """The `*args` and `**kwargs` parameters of `func`."""
    return [p for p in (func.params.star_arg, func.params.star_kwarg) if isinstance(p, cst.Param)]


def _params_in_order(func: cst.FunctionDef, with_gathering: bool) -> list[cst.Param]:
    """`func`'s parameters in the order its signature lists them; `*args` and `**kwargs` (which the
    transformed function takes as a tuple and a dict) only `with_gathering`."""
    star, star_kwarg = func.params.star_arg, func.params.star_kwarg
    gathering = with_gathering and isinstance(star, cst.Param)
    return (list(func.params.params) + ([star] if gathering else []) + list(func.params.kwonly_params)
            + ([star_kwarg] if with_gathering and star_kwarg is not None else []))


def _plain_lambda(node, arity: int) -> bool:
    """A `lambda a, b: ...` of `arity` positional parameters, without defaults, stars or keywords."""
    if not isinstance(node, cst.Lambda):
        return False
    params = node.params
    return len(params.params) == arity and all(p.default is None for p in params.params) and not (
        params.posonly_params or params.kwonly_params or isinstance(params.star_arg, cst.Param)
        or params.star_kwarg)


def _target_of(names: list) -> cst.BaseAssignTargetExpression:
    return names[0] if len(names) == 1 else cst.Tuple([cst.Element(n) for n in names])


def _spelled(operator: cst.CSTNode) -> str:
    """How an operator node reads in source: `is not`, `<<`, `&=`."""
    return cst.Module([]).code_for_node(operator).strip()


def _reads_a_tape(node) -> bool:
    """`restore(t, x)` or `t.pop()`: a line of generated code, read again for a higher derivative. Its
    reverse has to run in step with the tape's pushes even where nothing reads the value, so the name
    it assigns keeps its variable (not `new_version`): the analysis then sees an overwrite."""
    if not isinstance(node, cst.Call):
        return False
    f = node.func
    return (isinstance(f, cst.Name) and f.value == "restore") or \
        (isinstance(f, cst.Attribute) and f.attr.value == "pop" and not node.args)


def _param_names(func: cst.FunctionDef) -> set[str]:
    return {p.name.value for p in func.params.params + func.params.kwonly_params}


def _parts(target, n: int) -> list:
    """The sub-targets of a tuple target with n items (None where it has no such parts)."""
    if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == n:
        return [e.value for e in target.elements]
    return [None] * n


def _target_names(target) -> set[str]:
    """The names a loop or comprehension target binds: `i`, `(a, (b, c))`."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_target_names(e.value) for e in target.elements))
    return set()


def bound_to_an_int(func: cst.FunctionDef, name: str) -> int | None:
    """The int a local name is bound to where its one binding in `func` is `name = <int literal>` (`axis = -1`),
    else None."""
    if name in _param_names(func):
        return None
    kinds = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.WithItem,
             cst.Global, cst.Nonlocal)
    bindings = [n for n in _walk(func.body) if isinstance(n, kinds) and name in _binds(n)]
    if len(bindings) != 1 or not isinstance(bindings[0], cst.AssignTarget) or \
            not isinstance(bindings[0].target, cst.Name):
        return None
    assign = next(n for n in _walk(func.body) if isinstance(n, cst.Assign) and bindings[0] in n.targets)
    value = assign.value
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and \
            isinstance(value.expression, cst.Integer):
        return -value.expression.evaluated_value
    return value.evaluated_value if isinstance(value, cst.Integer) else None


def _binds(node) -> set[str]:
    if isinstance(node, (cst.Global, cst.Nonlocal)):
        return {n.name.value for n in node.names}
    if isinstance(node, cst.WithItem):
        return _target_names(node.asname.name) if node.asname else set()
    return _target_names(node.target)


def _count_names(node, name) -> int:
    return sum(isinstance(n, cst.Name) and n.value == name for n in _walk(node))


def _find_yields(func) -> list:
    return [n for n in _walk(func, skip=(cst.FunctionDef, cst.Lambda)) if isinstance(n, cst.Yield)]


def _find_returns(func):
    return [n for n in _walk(func, skip=(cst.FunctionDef,)) if isinstance(n, cst.Return)]


def _fills(call) -> bool:
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "fill" \
        and len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star


def _sorts_array(call) -> bool:
    """`x.sort()`, `x.sort(axis)`, `x.sort(axis=0, kind=...)`: ndarray.sort's spellings (a list's sort takes
    `key=` and `reverse=`)."""
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "sort" \
        and not any(a.star for a in call.args) and len(call.args) <= 3 \
        and all(a.keyword is None or a.keyword.value in ("axis", "kind", "order") for a in call.args)


def _written_at_run_time(func: cst.FunctionDef) -> set[str]:
    """Names whose items are set in a branch or loop (`t[0] = v` under `if`), or updated (`t[k] += v`):
    bound to a list, such a name is an array (a list's items are fixed when the code is generated)."""
    found = set()
    for node in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda)):
        if isinstance(node, (cst.If, cst.For, cst.While, cst.Try, cst.With)):
            found |= {_subscripted_name(t.target) for t in _walk(node, skip=(cst.FunctionDef, cst.Lambda))
                      if isinstance(t, cst.AssignTarget)}
        elif isinstance(node, cst.AugAssign):
            found.add(_subscripted_name(node.target))
    return found - {None}


def _subscripted_name(target) -> str | None:
    """`t` of a target `t[i]` or `t[i][j]`; None for any other target."""
    if not isinstance(target, cst.Subscript):
        return None
    while isinstance(target, cst.Subscript):
        target = target.value
    return target.value if isinstance(target, cst.Name) else None


def _through_transpose(target: cst.Subscript) -> bool:
    return isinstance(target.value, cst.Attribute) and target.value.attr.value == "T"


def _updated_only(func: cst.FunctionDef) -> set[str]:
    """Names the function only updates in place (`x += ...`), never binds anew."""
    updated = {n.target.value for n in _walk(func.body, skip=(cst.FunctionDef, cst.Lambda))
               if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name)}
    return updated - _bound_by(func, (cst.AssignTarget, cst.AnnAssign, cst.For))


def _unpacked(target) -> list:
    """The targets an assignment target names: itself, or those of a tuple or list, however nested."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [t for el in target.elements for t in _unpacked(el.value)]
    return [target]


def _deletes_only_names(target) -> bool:
    """`del t` or `del a, b`: unbinding locals, not removing items or attributes."""
    if isinstance(target, cst.Tuple):
        return all(_deletes_only_names(element.value) for element in target.elements)
    return isinstance(target, cst.Name)


def _dotted(node) -> str:
    """`np.linalg.norm` for the attribute chain naming it."""
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value


class _OwnBreaks(cst.CSTTransformer):
    """`break`s of one loop (not of the loops and functions inside it) as `flag = False; break`; `placed`
    gives each node it rebuilds the position of the node it replaces."""

    def __init__(self, flag: str, positions):
        self.flag, self.depth, self.positions, self.placed = flag, 0, positions, {}

    def visit_For(self, node) -> bool:
        self.depth += 1
        return self.depth == 1

    def leave_For(self, original, updated):
        self.depth -= 1
        return updated

    visit_While, leave_While = visit_For, leave_For

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_Lambda(self, node) -> bool:
        return False

    def leave_Break(self, original, updated):
        cleared = cst.Assign([cst.AssignTarget(cst.Name(self.flag))], cst.Name("False"))
        self.placed[cleared] = self.positions[original]
        return cst.FlattenSentinel([cleared, updated])

    def on_leave(self, original, updated):
        result = super().on_leave(original, updated)
        if isinstance(result, cst.CSTNode) and result is not original and original in self.positions:
            self.placed[result] = self.positions[original]
        return result


def loop_without_else(loop: cst.For | cst.While, flag: str, positions) -> tuple[list[cst.BaseStatement], dict]:
    """`for ... else` / `while ... else` as Python runs it: `flag = True`, the loop with each of its own
    `break`s clearing the flag, then `if flag:` and the else block. Also the positions of the nodes made."""
    rewrite = _OwnBreaks(flag, positions)
    start = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(flag))], cst.Name("True"))])
    body = loop.with_changes(orelse=None).visit(rewrite)
    then = cst.If(cst.Name(flag), loop.orelse.body)
    where = positions[loop]
    return [start, body, then], {**rewrite.placed, start: where, start.body[0]: where, body: where, then: where}
