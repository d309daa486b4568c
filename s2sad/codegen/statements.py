"""Lines of generated code as parsed statements: what the clean-up passes (prune.py, fuse.py) inspect.

A pass reads a line's node, never its text: which names it binds, reads or changes in place. Each
distinct line is parsed once within `parsed_once`, so passes that run one after another over the
same body share the parse. A line a pass does not change keeps its text exactly.
"""

from __future__ import annotations

import ast
import functools
import threading
from contextlib import contextmanager
from functools import cached_property

MODULES = frozenset({"np", "math"})
_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


class Line:
    """One line of a generated function body: `text` as written, its indentation, and its statement.

    `node` is None for a comment, a blank line and a header with no expression (`else:`); a block
    header (`for i in range(n):`) is parsed as that statement with `pass` for its body."""

    def __init__(self, text: str, code: str, node: ast.stmt | None, opens_block: bool):
        self.text, self.code, self.node, self.opens_block = text, code, node, opens_block
        self.indent = len(text) - len(text.lstrip())

    @property
    def top_level(self) -> bool:
        return self.indent == 4

    @cached_property
    def _name_nodes(self) -> list[ast.Name]:
        return name_nodes(self.node) if self.node else []

    @cached_property
    def names(self) -> frozenset[str]:
        """Every name the line mentions, read or bound (for a header, in the header)."""
        return frozenset(n.id for n in self._name_nodes)

    @cached_property
    def bound(self) -> frozenset[str]:
        """Names the line gives a new value: `x = ...`, `x, y = ...`, `for i in ...:`."""
        if isinstance(self.node, ast.Assign):
            return frozenset(n for t in self.node.targets for n in _target_names(t))
        if isinstance(self.node, ast.For):
            return frozenset(_target_names(self.node.target))
        return frozenset()

    @cached_property
    def reads(self) -> frozenset[str]:
        """Names the line reads: all it mentions but the names it binds (an augmented target is read)."""
        if isinstance(self.node, ast.AugAssign):
            return self.names
        return frozenset(n.id for n in self._name_nodes if isinstance(n.ctx, ast.Load))

    @cached_property
    def changes(self) -> frozenset[str]:
        """Names whose arrays the line changes in place: `x += ...`, `x[i] = ...`, `x = add_at(x, ...)`."""
        node = self.node
        if isinstance(node, ast.AugAssign):
            return frozenset(filter(None, [base_name(node.target)]))
        if isinstance(node, ast.Assign):
            changed = {base_name(t) for t in node.targets if isinstance(t, (ast.Subscript, ast.Attribute))}
            if call_args(node.value, "add_at") is not None:
                changed |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            return frozenset(changed - {None})
        return frozenset()

    @cached_property
    def binding(self) -> tuple[str, ast.expr] | None:
        """(name, value) for `name = value`, a single name bound, at any depth."""
        node = self.node
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id, node.value
        return None

    @cached_property
    def memory(self) -> frozenset[str]:
        """For a binding: the names whose arrays its value may share (`memory_of`)."""
        return memory_of(self.binding[1]) if self.binding else frozenset()

    @property
    def comment(self) -> str:
        """A comment after a simple statement (`x = 1  # why`), or ''."""
        if self.node is None or self.opens_block:
            return ""
        rest = self.code.encode()[self.node.end_col_offset:].decode().strip()
        return rest if rest.startswith("#") else ""

    def segment(self, node: ast.AST) -> str:
        """The text of `node`, one of this line's nodes, as written."""
        return ast.get_source_segment(self.code, node)


_shared = threading.local()


@contextmanager
def parsed_once():
    """Within it, each distinct line is parsed once, for all the passes over one generated function. The
    trees go at its end: kept for the next function, they would make every later garbage collection slower."""
    outer = getattr(_shared, "lines", None)
    _shared.lines = {} if outer is None else outer
    try:
        yield
    finally:
        _shared.lines = outer


def parse(text: str) -> Line:
    """`text`, one line of a generated function body (indented, maybe a block header), parsed."""
    memo = getattr(_shared, "lines", None)
    if memo is None:
        return _parse(text)
    line = memo.get(text)
    if line is None:
        line = memo[text] = _parse(text)
    return line


def _parse(text: str) -> Line:
    code = text.strip()
    if not code or code.startswith("#"):
        return Line(text, code, None, False)
    try:
        body = ast.parse(code).body
    except SyntaxError:
        body = None
    if body is not None and len(body) == 1:
        return Line(text, code, body[0], False)
    try:  # a block header: `for i in range(n):`, `if c:`, `while c:`
        return Line(text, code, ast.parse(code + "\n    pass").body[0], True)
    except SyntaxError:
        pass
    header = code.partition("#")[0].strip()
    if header in ("else:", "try:", "finally:") or header.startswith("except") and header.endswith(":"):
        return Line(text, code, None, True)
    raise ValueError(f"a generated line that is not one statement or block header: {text!r}")


def print_line(indent: int, node: ast.stmt, comment: str = "") -> str:
    """A statement built by a pass, printed: its parentheses are those Python's precedence needs."""
    return " " * indent + ast.unparse(node) + (f"  {comment}" if comment else "")


def name_nodes(node: ast.AST) -> list[ast.Name]:
    """The Name nodes in `node` (ast.walk, four times faster: the passes ask this of every line)."""
    found, stack = [], [node]
    while stack:
        n = stack.pop()
        if type(n) is ast.Name:
            found.append(n)
        elif isinstance(n, ast.AST):
            for field in n._fields:
                value = getattr(n, field, None)
                if type(value) is list:
                    stack.extend(value)
                elif isinstance(value, ast.AST):
                    stack.append(value)
    return found


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def base_name(node: ast.expr) -> str | None:
    """`x` of `x`, `x[i]`, `x.a[i]`."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def call_args(node: ast.AST, name: str, count: int | None = None) -> list[ast.expr] | None:
    """The positional arguments of `node` when it is a call of the bare name `name` (with `count` of
    them, if given) and no keywords."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name \
            and not node.keywords and (count is None or len(node.args) == count):
        return node.args
    return None


def name_loads(node: ast.AST, name: str) -> tuple[int, list[ast.Name]]:
    """How many times `node` mentions `name`, and the reads of it outside comprehensions and lambdas
    (which may bind a name of their own, and run an expression more than once)."""
    count, outside = 0, []

    def visit(n, inside: bool):
        nonlocal count
        if isinstance(n, ast.Name) and n.id == name:
            count += 1
            if isinstance(n.ctx, ast.Load) and not inside:
                outside.append(n)
        for child in ast.iter_child_nodes(n):
            visit(child, inside or isinstance(n, _SCOPES))

    visit(node, False)
    return count, outside


# Calls whose result may be (a view of) their first argument besides the rules with `views`: adjoint helpers
# that hand back `g` itself where the shapes agree (`views` on them would make sharing.py take their results
# for views, for certain, in the derivative of a derivative), and NumPy functions that have no rule.
_ALSO_VIEWS = {"unbroadcast", "reshape_like", "np.asanyarray", "np.fliplr", "np.flipud", "np.real", "np.imag"}
NEW_ARRAY_CALLS = {"matmul_adjoint_a", "matmul_adjoint_b", "einsum_into"}  # runtime helpers that allocate


@functools.cache
def _view_calls() -> tuple[frozenset, frozenset]:
    """The names called bare (runtime helpers) and the np.<name>s whose result may be their first argument."""
    from s2sad.rules import all_rules
    from s2sad.rules.registry import spellings

    names = set(_ALSO_VIEWS).union(*(spellings(r) | {r.print_as} for r in all_rules() if r.views)) - {None}
    return (frozenset(n for n in names if "." not in n),
            frozenset(n.removeprefix("np.") for n in names if n.startswith("np.") and n.count(".") == 1))


def memory_of(node: ast.expr) -> frozenset[str]:
    """The names whose arrays an expression's value may share memory with: none for arithmetic or an
    allocating helper, the first argument's for a helper that may hand it back, every name read for
    anything else."""
    if isinstance(node, ast.Name):
        return frozenset([node.id])
    if isinstance(node, (ast.Constant, ast.BinOp, ast.UnaryOp)):
        return frozenset()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in NEW_ARRAY_CALLS | {"zeros_like_adj", "copy_adj", "sum_expand"}:
            return frozenset()
        if node.func.id in _view_calls()[0] and node.args:
            return memory_of(node.args[0])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id in MODULES and node.func.attr not in _view_calls()[1]:
        return frozenset()  # a ufunc's or math's result: a new array or a number
    return frozenset(m.id for m in name_nodes(node) if m.id not in MODULES)
