"""Contractions with constant subscripts, written out as loop nests (what einsum_op and einsum_into
compile to under numba when the subscripts are a string constant).

The generic kernel in linalg.py walks every combination of subscript values with strides it looks up
at run time, which costs many times a plain loop. When the subscripts are known while typing, this
module writes the loop nest a person would write for them and compiles it once per subscripts:

    einsum('kij,nkj->nki', L, X)  ->  for n: for k: for i: acc = 0.0; for j: acc += L[k,i,j] * X[n,k,j]
                                                                       out[n, k, i] += acc

Loop order: a label that indexes the last axes of the arrays goes inside (so the inner loop walks
memory with stride 1), and a run of innermost labels that the output lacks sums into a scalar, four
output elements side by side (`JAM`). Where the output's last label would run innermost, a short run
of it (under `SHORT_RUN`, known only at run time) moves outside the summed labels instead. Where the
summed labels run outside some output labels ('nki,nkj->kij': n outermost), operands small enough to
stay in cache (under `SMALL_OPERANDS` elements in all, known at run time) are summed innermost instead.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_KERNELS: dict = {}


def parse_spec(spec: str) -> tuple[list[str], str]:
    """(operand subscripts, output subscripts) of letter subscripts; without '->' the output is the
    labels that appear once, in code-point order (as NumPy does). Raises ValueError when malformed."""
    text = spec.replace(" ", "")
    if text.count("->") > 1 or ("-" in text.replace("->", "")) or (">" in text.replace("->", "")):
        raise ValueError("einsum: malformed subscripts")
    ins, arrow, out = text.partition("->")
    operands = ins.split(",")
    if len(operands) > 2:
        raise ValueError("einsum: s2sad supports one or two operands")
    for subs in [*operands, out]:
        if not all(c.isascii() and c.isalpha() for c in subs):
            raise ValueError("einsum: subscripts must be letters (s2sad does not support '...')")
    if not arrow:
        labels = "".join(operands)
        out = "".join(sorted(c for c in set(labels) if labels.count(c) == 1))
    return operands, out


def swap_text(spec: str, k: int) -> str:
    """The subscripts of operand k's adjoint: the output's subscripts take operand k's place, and
    operand k's become the output's ('ij,jk->ik', 0 gives 'ik,jk->ij')."""
    operands, out = parse_spec(spec)
    if k == 0:
        return ",".join([out, *operands[1:]]) + "->" + operands[0]
    if k == 1 and len(operands) == 2:
        return operands[0] + "," + out + "->" + operands[1]
    raise ValueError("einsum_swap: no such operand")


def specialisable(spec: str, ndims: tuple[int, ...], into: bool) -> bool:
    """Whether `kernel` covers these subscripts and operand ranks; otherwise the generic kernel runs
    (and raises NumPy's errors). einsum_op (into=False) keeps NumPy's output rules: output labels
    unique and each in some operand. ndims: the operands' ranks, then (into) the output's."""
    try:
        operands, out = parse_spec(spec)
    except ValueError:
        return False
    if into:
        return len(ndims) == len(operands) + 1 and ndims[-1] == len(out) and len(out) > 0 and \
            all(len(s) == n for s, n in zip(operands, ndims))
    seen = "".join(operands)
    return (len(ndims) == len(operands) and all(len(s) == n for s, n in zip(operands, ndims))
            and len(set(out)) == len(out) and all(c in seen for c in out))


def kernel(spec: str, into: bool, dtype: str = "float64"):
    """The compiled loop nest for `spec`: kernel(x[, y]) -> result, or (into) kernel(like, x[, y]), a
    result of NumPy dtype `dtype` (its sums start in that precision: float32 products stay float32)."""
    key = (spec, into, dtype)
    if key not in _KERNELS:
        namespace = {"np": np}
        exec(kernel_source(spec, into, dtype), namespace)  # noqa: S102 - our own text, built from letters
        if "small" in namespace:
            namespace["small"] = njit(namespace["small"])
        _KERNELS[key] = njit(namespace["kernel"])
    return _KERNELS[key]


def kernel_source(spec: str, into: bool, dtype: str = "float64") -> str:
    operands, out = parse_spec(spec)
    typed = _Typed(dtype)
    names = ["x", "y"][:len(operands)]
    params = ", ".join((["like"] if into else []) + names)
    sizes: list[str] = []
    sized: set[str] = set()
    for name, subs in zip(names, operands):
        sizes += _sizes(name, subs, sized)
    if into:
        sizes += _sizes("like", out, sized)
    shape = "like.shape" if into else f"({''.join(f'n_{c}, ' for c in out)})"
    order = _loop_order(operands, out)
    product = list(zip(names, operands))
    lines = [f"def kernel({params}):", *sizes]
    swapped = _summed_inside(order, out)
    if swapped:  # short last axis of the output: sum into registers instead of updating it in place
        lines.append(f"    if n_{order[-1]} < {SHORT_RUN}:")
        lines += ["    " + ln for ln in _nest(swapped, out, product, shape, typed)]
    registers = _summed_last(order, out)
    small = []
    if registers and not swapped:  # small operands: each output element summed in registers, set once
        # a function of its own: inlined, its loops would slow the other nest
        small = [f"def small({params}):", *sizes, *_nest(registers, out, product, shape, typed, (JAM, 2)), ""]
        lines.append(f"    if {' + '.join(f'{n}.size' for n in names)} < {SMALL_OPERANDS}:")
        lines.append(f"        return small({params})")
    lines += _nest(order, out, product, shape, typed)
    return "\n".join(small + lines) + "\n"


class _Typed:
    """How the text of a kernel with results of NumPy dtype `dtype` spells a zero sum and a new array;
    float64 as NumPy's defaults do (`0.0`, `np.zeros(shape)`)."""

    def __init__(self, dtype: str):
        self.zero = "0.0" if dtype == "float64" else f"np.{dtype}(0.0)"
        self.dtype = "" if dtype == "float64" else f", np.{dtype}"

    def new(self, allocate: str, shape: str) -> str:
        return f"{allocate}({shape}{self.dtype})"


JAM = 4  # output elements summed side by side (independent additions; shared loads)
SHORT_RUN = 16  # below this, a loop over the output's last axis does not pay for vector code
SMALL_OPERANDS = 1 << 15  # elements (256 KiB of float64s): strided reads across them still hit the cache


def _summed_last(order: list[str], out: str) -> list[str] | None:
    """The order with every summed label moved innermost, or None where they are innermost already
    (or the output repeats a label).

    'nki,nkj->kij' runs n outermost, so that both operands stream through memory, and adds into
    out[k, i, j] on every step: over GMM's d = 2 the innermost loop runs twice and its overhead
    dominates. Summing over n innermost reads the operands with a stride but sets each output element
    once, which is cheaper while the operands fit in the cache; over operands that outgrow it the
    strided reads cost more than the extra additions save, so the kernel chooses at run time."""
    if len(set(out)) != len(out):
        return None
    registers = [c for c in order if c in out] + [c for c in order if c not in out]
    return registers if registers != order else None


def _summed_inside(order: list[str], out: str) -> list[str] | None:
    """The order with the innermost output label moved inside the run of summed labels just before it
    ('ij,jk->ik': i,j,k -> i,k,j), or None where that run is empty or the output repeats a label.

    `out[i, k] += x[i, j] * y[j, k]` over a long k vectorizes; over a short one (GMM's d = 10)
    the read-modify-write of out dominates, and summing over j in registers avoids it."""
    if len(set(out)) != len(out) or len(order) < 2 or order[-1] not in out:
        return None
    run = len(order) - 1
    while run > 0 and order[run - 1] not in out:
        run -= 1
    if run == len(order) - 1 or any(c not in out for c in order[:run]):
        return None
    return [*order[:run], order[-1], *order[run:-1]]


def _nest(order: list[str], out: str, product: list[tuple[str, str]], shape: str, typed: _Typed,
          steps: tuple[int, ...] = (JAM,)) -> list[str]:
    """Lines that allocate `out`, run the loops in `order` and return `out` (or the sum, for a
    scalar output); `steps`: how many output elements a register sum covers side by side."""
    summed = 0  # innermost labels the output lacks: they sum into a scalar
    while summed < len(order) and order[len(order) - 1 - summed] not in out:
        summed += 1
    # Each output element is set once when every label it lacks sums inside and none repeats (no
    # diagonal with zeros off it): no zero fill, and no read of what is there.
    once = len(set(out)) == len(out) and summed == sum(c not in out for c in order)
    lines = [f"    out = {typed.new('np.empty' if once else 'np.zeros', shape)}"] if out else []
    if once and summed and out:
        return lines + _jammed(order[:-summed], order[-summed:], out, product, typed, steps)
    target = _element("out", out)
    term = " * ".join(_element(n, s) for n, s in product)
    depth = 1
    for pos, c in enumerate(order):
        if pos == len(order) - summed:
            lines.append("    " * depth + f"acc = {typed.zero}")
        lines.append("    " * depth + f"for i_{c} in range(n_{c}):")
        depth += 1
    assign = "=" if once else "+="
    if summed:
        lines.append("    " * depth + f"acc += {term}")
        if out:
            lines.append("    " * (len(order) - summed + 1) + f"{target} {assign} acc")
    else:
        lines.append("    " * depth + f"{target} {assign} {term}")
    if not out:
        lines.append("    return acc" if order else f"    return {term}")
    else:
        lines.append("    return out")
    return lines


def _jammed(outer: list[str], summed: list[str], out: str, product: list[tuple[str, str]], typed: _Typed,
            steps: tuple[int, ...]) -> list[str]:
    """Loops over `outer` (output labels; the last one steps through `steps`, e.g. 4 then 2 at a
    time) around sums over `summed`: that many accumulators side by side, then the remainder one at
    a time."""
    lines, depth = [], 1
    for c in outer[:-1]:
        lines.append("    " * depth + f"for i_{c} in range(n_{c}):")
        depth += 1
    c = outer[-1]
    ind = "    " * depth
    lines.append(f"{ind}i_{c} = 0")
    for step in steps:
        lines.append(f"{ind}while i_{c} + {step} <= n_{c}:")
        lines += _sums(summed, c, range(step), out, product, typed, depth + 1)
        lines.append(f"{ind}    i_{c} += {step}")
    lines.append(f"{ind}while i_{c} < n_{c}:")
    lines += _sums(summed, c, range(1), out, product, typed, depth + 1)
    lines.append(f"{ind}    i_{c} += 1")
    return lines + ["    return out"]


def _sums(summed: list[str], c: str, shifts, out: str, product: list[tuple[str, str]], typed: _Typed,
          depth: int) -> list[str]:
    """acc<u> = the sum over `summed` of the product at i_c + u, stored to out, for each u in shifts."""
    ind = "    " * depth
    lines = [f"{ind}acc{u} = {typed.zero}" for u in shifts]
    for pos, s in enumerate(summed):
        lines.append("    " * (depth + pos) + f"for i_{s} in range(n_{s}):")
    inner = "    " * (depth + len(summed))
    lines += [f"{inner}acc{u} += {' * '.join(_element(n, s, c, u) for n, s in product)}" for u in shifts]
    lines += [f"{ind}{_element('out', out, c, u)} = acc{u}" for u in shifts]
    return lines


def _element(name: str, subs: str, shifted: str = "", by: int = 0) -> str:
    """`name[i_a, i_b, ...]`, with label `shifted` read `by` further on."""
    index = [f"i_{c} + {by}" if c == shifted and by else f"i_{c}" for c in subs]
    return f"{name}[{', '.join(index) or '()'}]"


def _sizes(name: str, subs: str, sized: set[str]) -> list[str]:
    """Lines naming each new label's size from `name`'s shape and checking the ones already named."""
    lines = []
    for axis, c in enumerate(subs):
        if c in sized:
            lines.append(f"    if {name}.shape[{axis}] != n_{c}:")
            lines.append("        raise ValueError('einsum: a subscript has two different sizes')")
        else:
            lines.append(f"    n_{c} = {name}.shape[{axis}]")
            sized.add(c)
    return lines


def _loop_order(operands: list[str], out: str) -> list[str]:
    """Labels from outer to inner loop: a label's weight is how far it sits from the last axis, summed
    over the arrays it indexes, so labels of last axes end up inside. Ties go to the label that leads
    more arrays ('nki,nkj->kij' runs n outside k: both big operands then stream through memory)."""
    arrays = [*operands, out]
    first = list(dict.fromkeys("".join(arrays)))
    weight = {c: sum(len(s) - 1 - s.rindex(c) for s in arrays if c in s) for c in first}
    leads = {c: sum(s[:1] == c for s in arrays) for c in first}
    return sorted(first, key=lambda c: (-weight[c], -leads[c], first.index(c)))
