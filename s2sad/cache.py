"""Where generated modules live on disk, and how they get there safely (atomic writes)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    """`$S2SAD_CACHE_DIR`, else the user cache dir (`$XDG_CACHE_HOME/s2sad`, ~/Library/Caches, %LOCALAPPDATA%)."""
    env = os.environ.get("S2SAD_CACHE_DIR")
    if env:
        path = Path(env)
    elif sys.platform == "darwin":
        path = Path.home() / "Library" / "Caches" / "s2sad"
    elif os.name == "nt":
        path = Path(os.environ.get("LOCALAPPDATA", Path.home())) / "s2sad" / "cache"
    else:
        path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "s2sad"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` so readers see either the old file or the whole new one, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def ensure_file(path: Path, text: str) -> None:
    """Make `path` hold exactly `text` (rewriting a stale or damaged copy)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    write_atomic(path, text)
