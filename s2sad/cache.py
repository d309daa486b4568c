"""Where generated modules live on disk, and how they get there safely.

Writes are atomic (readers see the old file or the whole new one) and private (mode 0600); a
damaged file is rewritten with a `CacheWarning`; a cache directory that cannot be written, or that
someone else could have written (not the user's, or writable by group or others), turns into no disk
cache at all (generated code then lives in memory only) with one warning. A single file in the
cache that someone else could have written is never read: it is made again. `cache_info` and
`clear_cache` are what `s2sad cache info|clear` show and do.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

OWN_PREFIX = "s2sad_gen_"  # every file s2sad (or numba, for s2sad's modules) writes starts with it
_TMP_GRACE_S = 3600.0  # a temporary file younger than this may be a write in progress elsewhere

_usable: set[Path] = set()
_unusable: set[Path] = set()
_foreign_seen: set[Path] = set()  # folders where a file someone else could have written was already reported
_lock = threading.Lock()


class CacheWarning(UserWarning):
    """The disk cache was damaged, unusable or not safe to load from; s2sad recovered (recompiled, or
    cached nothing)."""


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
    """The configured cache dir, created (mode 0700) if needed; None when it cannot be created or
    written, or when it is not the user's alone to write."""
    path = configured_cache_dir()
    if path in _usable and path.is_dir():  # removed meanwhile: made again below
        return path
    if path in _unusable:
        return None
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        why = distrust(path.stat())
        if why is not None:
            _refuse(path, why, "s2sad's cache dir", "generated code is kept in memory only and compiled anew in each "
                    "process", "S2SAD_CACHE_DIR")
            return None
        tempfile.TemporaryFile(dir=path).close()  # os.access is wrong for root and read-only mounts
    except OSError as exc:
        mark_unusable(path, exc)
        return None
    _usable.add(path)
    return path


def distrust(st: os.stat_result) -> str | None:
    """Why someone other than the user could have written a file or directory with status `st`
    (it is not theirs, or group or others may write it); None when only they (or root) could have.

    Not checked on Windows, whose mode bits say nothing about who may write."""
    if os.name == "nt":
        return None
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if st.st_mode & bit]
    if writers:
        return f"is writable by {' and '.join(writers)} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _refuse(path: Path, why: str, what: str, instead: str, variable: str) -> None:
    """Stop using the folder `path` because of `why` (from `distrust`), saying so once."""
    remedy = f"chown {os.getuid()} {path}" if why.startswith("belongs") else f"chmod go-w {path}"
    _stop_using(path, f"{what} {path} {why}; not loading from it, since code planted there would run in this "
                      f"process: {instead}. {remedy}, or set {variable} to a directory only you can write.")


def numba_dir(root: Path) -> Path:
    """Where numba keeps its index and data files for the modules in `root`, as numba's own locators
    place them: under `$NUMBA_CACHE_DIR` when it is set (numba's CACHE_DIR: numba reads the variable when
    imported, and again before a compile when some NUMBA_ variable changed), else in root/__pycache__."""
    from numba.core import caching, config

    locator = caching.UserProvidedCacheLocator if config.CACHE_DIR else caching.InTreeCacheLocator
    # a locator reads only the file's path and the function's first line number; neither touches the disk
    return Path(locator(numba_dir, str(root / f"{OWN_PREFIX}module.py")).get_cache_path())


def trusted_numba_dir(folder: Path) -> bool:
    """May numba load what it finds in `folder`, its cache folder for s2sad's modules? Says once when not."""
    if folder in _usable:
        return True
    if folder in _unusable:
        return False
    try:
        why = distrust(folder.stat())
    except OSError as exc:
        why = f"cannot be read ({exc})"
    if why is None:
        _usable.add(folder)
        return True
    _refuse(folder, why, "numba's cache folder", "numba compiles s2sad's code anew in each process",
            "NUMBA_CACHE_DIR")
    return False


def mark_unusable(path: Path, error: OSError) -> None:
    """Stop using `path` in this process, saying so once."""
    _stop_using(path, f"s2sad cannot write its cache dir {path} ({error}); generated code is kept in memory "
                      "only and compiled anew in each process. Set S2SAD_CACHE_DIR to a writable directory.")


def _stop_using(path: Path, message: str) -> None:
    with _lock:
        _usable.discard(path)
        if path in _unusable:
            return
        _unusable.add(path)
    warnings.warn(message, CacheWarning, stacklevel=4)


def read_private(path: Path) -> bytes | None:
    """`path`'s bytes; None when it is missing, or when someone else could have written it (said once
    per folder). Other errors (a directory, no permission) raise OSError."""
    try:
        with open(path, "rb") as f:
            why = distrust(os.fstat(f.fileno()))  # the file opened, not whatever the path names later
            if why is None:
                return f.read()
    except FileNotFoundError:
        return None
    _report_foreign(path, why)
    return None


def _report_foreign(path: Path, why: str) -> None:
    with _lock:
        if path.parent in _foreign_seen:
            return
        _foreign_seen.add(path.parent)
    warnings.warn(f"s2sad's cache file {path} {why}, so someone else could have written it; not loading it (nor "
                  f"any other such file in {path.parent}): s2sad makes it again. s2sad writes its files with mode "
                  f"0600: check who else writes to {path.parent}.", CacheWarning, stacklevel=4)


@contextmanager
def replacing(path: Path):
    """A new private (mode 0600) binary file that replaces `path` whole when the block ends without error."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` so readers see either the old file or the whole new one, never a part."""
    with replacing(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def write_checked(path: Path, text: str) -> None:
    """`text` after a line with its SHA-256 (damage shows; trust comes from who may write the file)."""
    write_atomic(path, hashlib.sha256(text.encode()).hexdigest() + "\n" + text)


def read_checked(path: Path) -> str | None:
    """The text `write_checked` saved; None when missing, damaged, unreadable or not the user's alone."""
    try:
        raw = read_private(path)
        if raw is None:
            return None
        digest, _, text = raw.decode("utf-8").partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    return text if hashlib.sha256(text.encode()).hexdigest() == digest else None


def ensure_file(path: Path, text: str) -> None:
    """Make `path` hold exactly `text`, rewriting a damaged copy (with a warning) or one someone else
    could have written."""
    try:
        found = read_private(path)
    except OSError as exc:
        found = f"<unreadable: {exc}>".encode()
    if found == text.encode():
        return
    if found is not None:
        warnings.warn(f"s2sad cache file {path} was damaged (its content does not match its name); rewritten",
                      CacheWarning, stacklevel=3)
    write_atomic(path, text)


def _own_files(root: Path) -> list[Path]:
    """s2sad's files for `root`: generated modules, numba's index/data files for them (in `numba_dir`),
    temp files of writes."""
    found = []
    for folder in (root, numba_dir(root)):
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
    """Where the cache is (and numba's files for it), how many generated modules (entries) and files it
    holds, and their total bytes."""
    path = cache_dir()
    files = _own_files(path) if path is not None else []
    sizes = [s for s in map(_size, files) if s is not None]
    entries = sum(1 for p in files if p.parent == path and p.suffix == ".py")
    return {"path": str(path) if path is not None else None,
            "numba_path": str(numba_dir(path)) if path is not None else None,
            "entries": entries, "files": len(sizes), "bytes": sum(sizes)}


def clear_cache() -> int:
    """Remove s2sad's files from the cache dir and numba's folder for it (nothing else); returns how many were removed.

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
