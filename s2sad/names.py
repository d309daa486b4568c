"""Fresh names for generated code. Lowering makes its temporaries with them and code generation the
derivative's, so they sit below both (ir's layer): neither reaches the other to name a variable."""

from __future__ import annotations

import keyword


class Names:
    """Fresh, deterministic, readable names that never collide with the user's."""

    def __init__(self, taken=()):
        self.taken = set(taken)

    def fresh(self, hint: str) -> str:
        hint = "".join(c if c.isalnum() or c == "_" else "_" for c in hint).strip("_") or "t"
        if hint[0].isdigit():
            hint = "t" + hint
        if keyword.iskeyword(hint):
            hint += "_"
        name, n = hint, 1
        while name in self.taken:
            n += 1
            name = f"{hint}{n}" if not hint[-1].isdigit() else f"{hint}_{n}"
        self.taken.add(name)
        return name
