"""Whom the disk cache trusts: only files and folders the user alone could have written are loaded.

Code planted in the cache would run in the user's process, so a cache dir (or numba's folder for it)
that is not the user's, or that group or others may write, is not used at all (one CacheWarning,
compiled in memory); a single such file is not read but made again; and nothing is unpickled before
its checksum is verified. "Another user" is simulated by mode bits (and, as root, by chown).
"""

import builtins
import importlib.util
import json
import os
import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import api, backend, cache, ir
from s2sad.cache import CacheWarning
from s2sad.gencache import Summary

pytestmark = pytest.mark.usefixtures("numba_caches")  # these tests read what numba wrote to disk

SOURCE = """
import numpy as np


def f(x, w):
    return np.sin(x) * w * x
"""

X, W = 0.3, 1.1
EXPECTED = (np.cos(X) * W * X + np.sin(X) * W, np.sin(X) * X)
OTHER_UID = 65534  # nobody


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache dir, nothing generated or compiled held in memory, nothing yet said about any folder."""
    path = tmp_path / "cache"
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(path))
    forget_trust(monkeypatch)
    return path


def forget_loaded_modules(monkeypatch):
    monkeypatch.setattr(backend, "_LOADED", {})
    monkeypatch.setattr(backend, "_JITTED", set())


def forget_trust(monkeypatch):
    """A new process: what this one concluded about folders is forgotten too."""
    forget_loaded_modules(monkeypatch)
    for name in ("_usable", "_unusable", "_foreign_seen"):
        monkeypatch.setattr(cache, name, set())


@pytest.fixture
def user_f(tmp_path, monkeypatch):
    path = tmp_path / "trust_mod.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("trust_mod", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "trust_mod", module)
    spec.loader.exec_module(module)
    return module.f


def checked_grad(f):
    """A new grad of `f` (numba), checked against the closed form; its transform."""
    g = s2sad.grad(f, argnums=(0, 1))
    np.testing.assert_allclose(g(X, W), EXPECTED, rtol=1e-12)
    return g.__s2sad_transform__


def disk_stats(transform):
    stats = transform.vjp_fn.stats
    return sum(stats.cache_hits.values()), sum(stats.cache_misses.values())


def planted(transform) -> bool:
    return transform.vjp_fn.py_func.__globals__.get("PLANTED") is True


def plant_compiled_text(root: Path) -> Path:
    """Append a marker to the saved compiled text, keeping its checksum right: s2sad runs it if it loads it
    (as it does the module source a .gen holds)."""
    (path,) = [p for p in root.glob("s2sad_gen_f_*.compiled") if p.stem.count("_") == 3]  # not a signature's
    text = cache.read_checked(path)
    cache.write_checked(path, text + "\nPLANTED = True\n")
    return path


def plant_generated(path: Path) -> None:
    """Add a marker to the module source a .gen holds, keeping its checksum right."""
    saved = json.loads(cache.read_checked(path))
    text = json.dumps(saved).replace("def f_grad(", "PLANTED = True\\n\\n\\ndef f_grad(", 1)
    assert text != json.dumps(saved)
    cache.write_checked(path, text)


def cache_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


# ---- folders ----------------------------------------------------------------------------------------


def test_the_cache_dir_is_made_private_and_so_is_everything_written_there(fresh_cache, user_f):
    checked_grad(user_f)
    numba_folder = cache.numba_dir(fresh_cache)
    assert (fresh_cache.stat().st_mode & 0o777) == 0o700 and (numba_folder.stat().st_mode & 0o777) == 0o700
    written = [p for folder in (fresh_cache, numba_folder) for p in folder.iterdir() if p.is_file()]
    assert {p.suffix for p in written} >= {".py", ".gen", ".compiled", ".nbi", ".nbc"}
    assert all((p.stat().st_mode & 0o077) == 0 for p in written), [oct(p.stat().st_mode) for p in written]


def test_a_cache_dir_others_can_write_is_not_loaded_from(fresh_cache, user_f, monkeypatch):
    checked_grad(user_f)
    plant_compiled_text(fresh_cache)
    forget_trust(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        control = checked_grad(user_f)  # the user's own dir: what is there is loaded (the marker ran)
    assert planted(control) and not isinstance(control.generated.fn, ir.Function)

    fresh_cache.chmod(0o777)
    forget_trust(monkeypatch)
    with pytest.warns(CacheWarning) as caught:
        first = checked_grad(user_f)
        second = checked_grad(user_f)
    (message,) = cache_warnings(caught)  # once for the folder
    assert f"s2sad's cache dir {fresh_cache} is writable by group and others (mode 0777)" in message
    assert "not loading from it" in message and f"chmod go-w {fresh_cache}" in message
    for t in (first, second):
        assert not planted(t)
        assert isinstance(t.generated.fn, ir.Function)  # generated here, not read from a .gen
        assert t.vjp_fn.stats.cache_path is None  # numba compiled in memory
    assert cache.cache_info()["path"] is None


@pytest.mark.parametrize("where", ["__pycache__", "NUMBA_CACHE_DIR"])
def test_a_numba_folder_others_can_write_is_not_loaded_from(fresh_cache, user_f, monkeypatch, tmp_path, where):
    from numba.core import config as numba_config

    numba_cache_dir = str(tmp_path / "numba") if where == "NUMBA_CACHE_DIR" else ""
    monkeypatch.setenv("NUMBA_CACHE_DIR", numba_cache_dir)  # numba reads it again when a NUMBA_ variable changes
    monkeypatch.setattr(numba_config, "CACHE_DIR", numba_cache_dir)  # what it set when numba was imported
    checked_grad(user_f)
    folder = cache.numba_dir(fresh_cache)
    assert list(folder.glob("*.nbi")) and (folder.parent == fresh_cache) == (where == "__pycache__")
    folder.chmod(0o757)
    forget_trust(monkeypatch)
    with pytest.warns(CacheWarning) as caught:
        t = checked_grad(user_f)
    (message,) = cache_warnings(caught)
    assert f"numba's cache folder {folder} is writable by others (mode 0757)" in message
    assert t.vjp_fn.stats.cache_path is None  # numba compiled in memory
    assert not isinstance(t.generated.fn, ir.Function)  # s2sad's own dir is still fine


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to give a folder away")
def test_a_cache_dir_of_another_user_is_not_loaded_from(fresh_cache, user_f, monkeypatch):
    checked_grad(user_f)
    os.chown(fresh_cache, OTHER_UID, -1)
    forget_trust(monkeypatch)
    with pytest.warns(CacheWarning, match=rf"belongs to uid {OTHER_UID}, not to you \(uid 0\)"):
        t = checked_grad(user_f)
    assert isinstance(t.generated.fn, ir.Function) and t.vjp_fn.stats.cache_path is None


# ---- single files -----------------------------------------------------------------------------------


def swap_in(path: Path, mode: int, owner: int | None) -> None:
    """What another user's file looks like: other mode bits, or (as root) another owner."""
    path.chmod(mode)
    if owner is not None:
        os.chown(path, owner, -1)


OWNERS = [None] + ([OTHER_UID] if hasattr(os, "getuid") and os.getuid() == 0 else [])


@pytest.mark.parametrize("owner", OWNERS, ids=lambda o: "other-owner" if o else "mode")
@pytest.mark.parametrize("suffix", [".compiled", ".gen", ".nbi", ".nbc"])
def test_a_file_someone_else_could_have_written_is_not_loaded(fresh_cache, user_f, monkeypatch, suffix, owner):
    checked_grad(user_f)
    folder = fresh_cache if suffix in (".compiled", ".gen") else cache.numba_dir(fresh_cache)
    path = plant_compiled_text(fresh_cache) if suffix == ".compiled" else sorted(folder.glob(f"*{suffix}"))[0]
    if suffix == ".gen":
        plant_generated(path)
    swap_in(path, 0o664, owner)
    forget_trust(monkeypatch)
    with pytest.warns(CacheWarning) as caught:
        t = checked_grad(user_f)
    (message,) = cache_warnings(caught)
    why = f"belongs to uid {OTHER_UID}, not to you (uid 0)" if owner else "is writable by group (mode 0664)"
    assert f"s2sad's cache file {path} {why}, so someone else could have written it; not loading it" in message
    assert not planted(t)
    if suffix == ".gen":
        assert isinstance(t.generated.fn, ir.Function) and "PLANTED" not in t.generated.source
    if suffix in (".nbi", ".nbc"):
        assert disk_stats(t) == (0, 1)
    assert (path.stat().st_mode & 0o077) == 0 and path.stat().st_uid == os.getuid()  # made again, privately

    forget_trust(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        again = checked_grad(user_f)  # the new file is the user's: loaded, silently
    assert disk_stats(again) == (1, 0) and not isinstance(again.generated.fn, ir.Function)


# ---- content ----------------------------------------------------------------------------------------


def reverse(f):
    """A new transform (python backend: nothing compiled), its gradient checked."""
    t = api._Reverse(f, (0, 1), False, "python", "grad")
    np.testing.assert_allclose(t.gradient((X, W)), EXPECTED, rtol=1e-12)
    return t


def test_the_gen_format_is_json_that_keeps_every_container_kind():
    from s2sad.gencache import _from_json, _to_json
    from s2sad.normalize import Record

    value = {"shape": (None, [None, {"a": None, 3: (None,)}], Record([None, None], ("x", "y")), Record([None], None)),
             "places": [ir.Loc("f.py", 3, 4, "y = x * 2")], "values": (1, 2.5, True, "s", float("inf"))}
    back = _from_json(json.loads(json.dumps(_to_json(value))))
    assert back == value and type(back["shape"][1]) is list and type(back["places"][0]) is ir.Loc
    assert [type(r) for r in back["shape"][2:]] == [Record, Record]
    assert [r.names for r in back["shape"][2:]] == [("x", "y"), None]
    for unsaved in (np.float64(1.0), object(), {1, 2}):
        with pytest.raises(TypeError):
            _to_json(unsaved)


def test_a_tampered_gen_file_is_not_trusted(fresh_cache, user_f):
    assert isinstance(reverse(user_f).generated.fn, ir.Function)
    (path,) = fresh_cache.glob("*.gen")
    good = path.read_text()
    assert isinstance(reverse(user_f).generated.fn, Summary)  # loaded from it

    digest, _, body = good.partition("\n")
    path.write_text(digest + "\n" + body.replace("np.sin", "np.tan"))  # edited: the checksum no longer matches
    t = reverse(user_f)
    assert isinstance(t.generated.fn, ir.Function) and "np.tan" not in t.generated.source
    assert path.read_text() == good  # generated again and rewritten


class _Bomb:
    def __reduce__(self):
        return exec, ("import builtins; builtins.s2sad_trust_unpickled = True",)


@pytest.fixture
def bomb():
    yield pickle.dumps(_Bomb())
    assert not hasattr(builtins, "s2sad_trust_unpickled"), "a planted pickle was unpickled"


def test_a_gen_file_is_never_unpickled(fresh_cache, user_f, bomb):
    reverse(user_f)
    (path,) = fresh_cache.glob("*.gen")
    path.write_bytes(bomb)
    assert isinstance(reverse(user_f).generated.fn, ir.Function)
    cache.write_checked(path, bomb.decode("latin-1"))  # with a right checksum: still not a pickle reader
    assert isinstance(reverse(user_f).generated.fn, ir.Function)


def test_numbas_index_is_verified_before_anything_in_it_is_unpickled(fresh_cache, user_f, monkeypatch, bomb):
    checked_grad(user_f)
    (index,) = cache.numba_dir(fresh_cache).glob("*.f_grad-*.nbi")
    index.write_bytes(bomb + index.read_bytes())  # numba's own reader unpickles a version header first
    forget_trust(monkeypatch)
    with pytest.warns(CacheWarning, match="damaged"):
        t = checked_grad(user_f)
    assert disk_stats(t) == (0, 1)
