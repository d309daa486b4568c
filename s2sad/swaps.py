"""Double buffers that swap names become copies, so that every array written in place has one name.

Stencil and time-stepping code keeps two arrays and exchanges them after each step:

    for t in range(steps):
        un[1:-1] = u[1:-1] + alpha * (u[2:] - 2 * u[1:-1] + u[:-2])
        u, un = un, u            # or: tmp = u; u = un; un = tmp

The next step then writes into the array the previous one read, under another name. Generated code
follows values, not memory, so this pass rewrites the exchange as `u = np.copy(un_old)` and
`un = np.copy(u_old)`. That computes the same values wherever no third name sees the memory: each
exchanged name holds an array of its own (an argument, or made fresh: never a view or another
name's array; derivative code never writes into an argument, so a copy keeps it as it came), the
temporaries of the exchange are read nowhere else, and a view of one of the
arrays is made and read on the same side of the exchange, in the same loop body. Anything else is
left as written, and the aliasing checks that follow refuse it with their own message.
"""

from __future__ import annotations

from s2sad import ir, rules
from s2sad.ir import Assign, Copy, Load, Prim, Store, Var
from s2sad.sharing import may_share, view_source


def copy_swapped_buffers(fn: ir.Function) -> None:
    """Rewrite, in place, each exchange of arrays that `fn` writes into as copies (see the module text)."""
    where = _positions(fn.body, ())
    written = {s.base for s, _, _ in ir.walk(fn.body) if isinstance(s, Store)} | {
        s.target for s, _, _ in ir.walk(fn.body) if isinstance(s, Assign) and s.in_place}
    swaps = [swap for block in _blocks(fn.body) for swap in _exchanges(block)]
    in_swaps = {id(s) for block, start, stop, _ in swaps for s in block[start:stop]}
    for block, start, stop, sources in swaps:
        exchanged = [name for name in sources if sources[name] != name and name in set(sources.values())]
        if not set(exchanged) & written or not _owned(fn, exchanged, in_swaps):
            continue
        temps = set(sources) - set(exchanged)
        if any(not _inside(where[id(s)], block, start, stop) for name in temps for s in _readers(fn, name)):
            continue
        if not all(_views_stay_on_one_side(fn, name, block, start, stop, where) for name in exchanged):
            continue
        for i in range(stop - 1, start - 1, -1):
            s = block[i]
            if s.target in exchanged and s.target not in {t.target for t in block[i + 1:stop]}:
                block[i] = Assign(s.target, Prim(rules.lookup("copy"), (s.value.value,)), s.loc)


def drop_round_trips(fn: ir.Function) -> None:
    """Drop, in place, each run of renames after which every name that outlives it holds the array it
    held before (`out = u; u = out`: an inlined `u = boundary(u)` whose helper returns its argument),
    where the run's other names are read nowhere after it: the array keeps its one name."""
    where = _positions(fn.body, ())
    dropped = []
    for block, start, stop, sources in _runs(fn.body):
        passing = [name for name, held in sources.items() if held != name]
        if set(passing) & set(fn.outputs):
            continue
        if all(_inside(where[id(r)], block, start, stop) for name in passing for r in _readers(fn, name)):
            dropped.append((block, start, stop))
    for block, start, stop in reversed(dropped):
        del block[start:stop]


def _runs(body: list):
    for block in _blocks(body):
        yield from _exchanges(block)


def _blocks(body: list):
    yield body
    for s, _, _ in ir.walk(body):
        yield from ir.children(s)


def _exchanges(block: list):
    """(block, start, stop, {name: the name whose array it holds after the run}) for each run of plain
    name copies in `block` that leaves some name holding another one's array."""
    start = 0
    while start < len(block):
        stop = start
        while stop < len(block) and _renames(block[stop]):
            stop += 1
        if stop - start >= 2:
            sources: dict = {}
            for s in block[start:stop]:
                read = s.value.value.name
                sources[s.target] = sources.get(read, read)
            yield block, start, stop, sources
        start = stop + 1


def _renames(s) -> bool:
    return isinstance(s, Assign) and not s.in_place and isinstance(s.value, Copy) and isinstance(s.value.value, Var)


def _owned(fn: ir.Function, names: list, in_swaps: set) -> bool:
    """Is each name bound only to arrays of its own, outside exchanges?"""
    for s, _, _ in ir.walk(fn.body):
        if isinstance(s, Assign) and s.target in names and id(s) not in in_swaps and may_share(s.value):
            return False
    return True


def _readers(fn: ir.Function, name: str):
    return [s for s, _, _ in ir.walk(fn.body) if name in ir.stmt_reads(s)]


def _views_stay_on_one_side(fn, name, block, start, stop, where) -> bool:
    """Is every view of `name` (or other name for its array) made and read in `block`, all before the
    exchange at block[start:stop] or all after it?"""
    for s, _, _ in ir.walk(fn.body):
        if not (isinstance(s, Assign) and _view_of(s, name, fn)) or _inside(where[id(s)], block, start, stop):
            continue
        sides = {_side(where[id(r)], block, start, stop) for r in [s, *_readers(fn, s.target)]}
        if None in sides or len(sides) > 1:
            return False
    return True


def _view_of(s: Assign, name: str, fn: ir.Function) -> bool:
    if view_source(s.value) == name or s.value == Copy(Var(name)):
        return True
    return isinstance(s.value, Load) and s.value.base.name == name and s.target in fn.arrays


def _positions(block: list, path: tuple) -> dict:
    """id(stmt) -> ((id(block), index), ...) from the function body down to the statement."""
    found = {}
    for i, s in enumerate(block):
        here = path + ((id(block), i),)
        found[id(s)] = here
        for child in ir.children(s):
            found.update(_positions(child, here))
    return found


def _index_in(path: tuple, block: list) -> int | None:
    return next((i for b, i in path if b == id(block)), None)


def _inside(path, block, start, stop) -> bool:
    i = _index_in(path, block)
    return i is not None and start <= i < stop


def _side(path, block, start, stop) -> str | None:
    i = _index_in(path, block)
    if i is None or start <= i < stop:
        return None
    return "before" if i < start else "after"
