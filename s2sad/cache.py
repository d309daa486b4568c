"""Where generated modules live on disk, and how they get there safely.

Writes are atomic (readers see the old file or the whole new one); a damaged file is rewritten
with a `CacheWarning`; a cache directory that cannot be written turns into no disk cache at all
(generated code then lives in memory only) with one warning. `cache_info` and `clear_cache` are
what `s2sad cache info|clear` show and do.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

OWN_PREFIX = "s2sad_gen_"  # every file s2sad (or numba, for s2sad's modules) writes starts with it
_TMP_GRACE_S = 3600.0  # a temporary file younger than this may be a write in progress elsewhere

_usable: set[Path] = set()
_unusable: set[Path] = set()
_lock = threading.Lock()


class CacheWarning(UserWarning):
    """The disk cache was damaged or unusable; s2sad recovered (recompiled, or cached nothing)."""


def configured_cache_dir() -> Path:
    """`$S2SAD_CACHE_DIR`, else the user cache dir (`$XDG_CACHE_HOME/s2sad`, ~/Library/Caches, %LOCALAPPDATA%)."""
    env = os.environ.get("S2SAD_CACHE_DIR")
    if env:
        return Path(env)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "s2sad"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "s2sad" / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "s2sad"


def cache_dir() -> Path | None:
    """The configured cache dir, created if needed; None when it cannot be created or written."""
    path = configured_cache_dir()
    if path in _usable and path.is_dir():  # removed meanwhile: made again below
        return path
    if path in _unusable:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()  # os.access is wrong for root and read-only mounts
    except OSError as exc:
        mark_unusable(path, exc)
        return None
    _usable.add(path)
    return path


def mark_unusable(path: Path, error: OSError) -> None:
    """Stop using `path` in this process, saying so once."""
    with _lock:
        _usable.discard(path)
        if path in _unusable:
            return
        _unusable.add(path)
    warnings.warn(f"s2sad cannot write its cache dir {path} ({error}); generated code is kept in memory "
                  "only and compiled anew in each process. Set S2SAD_CACHE_DIR to a writable directory.",
                  CacheWarning, stacklevel=3)


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
    """Make `path` hold exactly `text`, rewriting a damaged copy (with a warning)."""
    try:
        found = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        found = None
    except (OSError, UnicodeDecodeError) as exc:
        found = f"<unreadable: {exc}>"
    if found == text:
        return
    if found is not None:
        warnings.warn(f"s2sad cache file {path} was damaged (its content does not match its name); rewritten",
                      CacheWarning, stacklevel=3)
    write_atomic(path, text)


def _own_files(root: Path) -> list[Path]:
    """s2sad's files in `root`: generated modules, numba's index/data files for them, temp files of writes."""
    found = []
    for folder in (root, root / "__pycache__"):
        try:
            found += [p for p in folder.iterdir() if p.name.startswith(OWN_PREFIX)]
        except OSError:  # missing, or not a directory
            pass
    return found


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:  # removed meanwhile by another process
        return None


def cache_info() -> dict:
    """Where the cache is, how many generated modules (entries) and files it holds, and their total bytes."""
    path = cache_dir()
    files = _own_files(path) if path is not None else []
    sizes = [s for s in map(_size, files) if s is not None]
    entries = sum(1 for p in files if p.parent == path and p.suffix == ".py")
    return {"path": str(path) if path is not None else None, "entries": entries, "files": len(sizes),
            "bytes": sum(sizes)}


def clear_cache() -> int:
    """Remove s2sad's files from the cache dir (nothing else); returns how many were removed.

    Safe while other processes use the cache: they hold what they loaded in memory, and a recent
    temporary file (a write in progress) is left alone.
    """
    path = cache_dir()
    if path is None:
        return 0
    removed = 0
    for file in _own_files(path):
        if ".tmp" in file.name and _is_recent(file):
            continue
        try:
            file.unlink()
            removed += 1
        except OSError:  # another clear got it first, or not a plain file
            pass
    return removed


def _is_recent(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime < _TMP_GRACE_S
    except OSError:
        return False
