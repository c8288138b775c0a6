"""A model directory: the one place that names its files (layout in docs/ARCHITECTURE.md).

ModelPaths(d).int8          # d/model_int8.tflite ... every artifact by role
load_model_dir(d)           # the trained Keras model + config + calibration (ModelDir)
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from snapuq.errors import ModelFormatError, SnapuqError
from snapuq.formats import read_config
from snapuq.io import check_out_dir, write_text


def _lock_staging(path: Path, busy: str, clear: bool):
    """Create the staging folder `path`, hold an exclusive flock on path/.lock (refused in one line, `busy`,
    when another command holds it) and, with `clear`, remove what a killed run left there."""
    import fcntl

    path.mkdir(exist_ok=True)
    lock = open(path / ".lock", "w")  # noqa: SIM115 (held until close)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise SnapuqError(f"{busy} (lock {path}/.lock)") from None
    if clear:
        for p in path.iterdir():
            if p.name != ".lock":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    return lock

@dataclass(frozen=True)
class ModelPaths:
    """Every file of a model directory, by role. `snapuq train` writes config, keras, calib and
    baselines; `snapuq export` writes int8, float_tflite, manifest, c_source and c_header;
    `snapuq micropython blob` writes blob; each writer records them in `parts` (MANIFEST.sha256)."""

    root: Path

    CONFIG = "config.json"
    KERAS = "model.keras"
    CALIB = "calib.json"
    BASELINES = "baselines"
    INT8 = "model_int8.tflite"
    FLOAT = "model_float.tflite"
    MANIFEST = "snapuq.json"
    C_SOURCE = "snapuq_model.c"
    C_HEADER = "snapuq_model.h"
    BLOB = "model.snapuq"
    PARTS = "MANIFEST.sha256"  # the sha256 of every part and what each was made from (check_parts)

    def __init__(self, root: str | Path) -> None:
        object.__setattr__(self, "root", Path(root))

    config = property(lambda self: self.root / self.CONFIG)
    keras = property(lambda self: self.root / self.KERAS)
    calib = property(lambda self: self.root / self.CALIB)
    baselines = property(lambda self: self.root / self.BASELINES)
    int8 = property(lambda self: self.root / self.INT8)
    float_tflite = property(lambda self: self.root / self.FLOAT)
    manifest = property(lambda self: self.root / self.MANIFEST)
    c_source = property(lambda self: self.root / self.C_SOURCE)
    c_header = property(lambda self: self.root / self.C_HEADER)
    blob = property(lambda self: self.root / self.BLOB)
    parts = property(lambda self: self.root / self.PARTS)

    def need_export(self) -> None:
        """One-line error unless `snapuq export` has written the int8 model and the manifest."""
        for p in (self.int8, self.manifest):
            if not p.is_file():
                raise SnapuqError(f"{p}: missing (run `snapuq export {self.root}` first)")


# the parts of a model directory (MANIFEST.sha256 records them in this order) and what each is made from,
# all the way back: a part records the sha256 of these when it is written, and check_parts refuses it
# once one of them is another file (a recalibration without `snapuq export`, a file copied in by hand)
_K, _C, _I, _M = ModelPaths.KERAS, ModelPaths.CALIB, ModelPaths.INT8, ModelPaths.MANIFEST
MADE_FROM: dict[str, tuple[str, ...]] = {
    ModelPaths.CONFIG: (), _K: (), _C: (_K,),
    _I: (_K,), ModelPaths.FLOAT: (_K,), _M: (_K, _C, _I),
    ModelPaths.C_SOURCE: (_K, _C, _I, _M), ModelPaths.C_HEADER: (_K, _C, _I, _M),
    ModelPaths.BLOB: (_K, _C, _I, _M),
}  # fmt: skip
TRAIN_PARTS = (ModelPaths.CONFIG, ModelPaths.KERAS, ModelPaths.CALIB)

# what `snapuq train` makes; anything else a user keeps in --out (a README, notes) moves to the new directory
TRAIN_ARTIFACTS = frozenset({
    ModelPaths.CONFIG, ModelPaths.KERAS, ModelPaths.CALIB, ModelPaths.BASELINES, ModelPaths.INT8,
    ModelPaths.FLOAT, ModelPaths.MANIFEST, ModelPaths.C_SOURCE, ModelPaths.C_HEADER, ModelPaths.BLOB,
    "backbone.keras", "data.npz", "eval", "variants", "checkpoint", "MANIFEST.sha256",
})  # fmt: skip


class ModelStage:
    """A model directory built as one unit: everything is written into the staging folder `.NAME.train`
    beside NAME (locked against a second run), and `commit()` swaps it in whole, so a failed, killed or
    concurrent run never leaves a new model.keras beside an old calibration or a stale export. The
    checkpoint of an interrupted run stays in the staging folder for `--resume`."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self.path = self.out.parent / f".{self.out.name}.train"
        self._lock = None

    def open(self, resume: bool) -> Path:
        check_out_dir(self.out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        ck = self.path / "checkpoint" / "state.json"
        if self.path.exists() and not resume:
            if ck.is_file():
                raise SnapuqError(
                    f"{self.path}: holds an interrupted run's checkpoint; add --resume to continue it, or "
                    f"remove the folder to start over"
                )
        busy = f"{self.out}: another `snapuq train` is writing it"
        self._lock = _lock_staging(self.path, busy, clear=not resume)  # fresh: nothing of a failed run
        return self.path

    def commit(self, made: tuple[str, ...] = TRAIN_PARTS) -> Path:
        """Swap the staged directory in as `out` (the checkpoint is dropped; the user's own files kept).
        `made`: the parts this run wrote (recorded afresh in MANIFEST.sha256; the others keep their
        record)."""
        shutil.rmtree(self.path / "checkpoint", ignore_errors=True)
        stage = ModelPaths(self.path)
        rec = plan_parts(lambda n: stage.root / n if (stage.root / n).is_file() else None,
                         read_parts(self.path), set(made))
        if rec is None:
            with contextlib.suppress(FileNotFoundError):
                stage.parts.unlink()
        else:
            write_text(stage.parts, format_parts(rec))
        with commit_lock(self.out.parent):
            if self.out.exists():
                for p in self.out.iterdir():
                    if p.name not in TRAIN_ARTIFACTS and not (self.path / p.name).exists():
                        os.replace(p, self.path / p.name)
                old = self.out.parent / f".{self.out.name}.old"
                shutil.rmtree(old, ignore_errors=True)
                os.replace(self.out, old)
                self._unlock()
                os.replace(self.path, self.out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                self._unlock()
                os.replace(self.path, self.out)
        with contextlib.suppress(OSError):
            (self.out / ".lock").unlink()
        return self.out

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def close(self) -> None:
        self._unlock()


# ----------------------------------------------------------------------------------------------
# MANIFEST.sha256: the parts of a model directory, and what each was made from

PARTS_HEADER = (
    "# snapuq model directory: the sha256 of each part (check: `sha256sum -c MANIFEST.sha256` here, or\n"
    "# `snapuq parts DIR`); a '#< PART NAME=SHA256 ...' line lists the parts PART was made from.\n"
)


@dataclass(frozen=True)
class Part:
    sha256: str
    made_from: dict[str, str] = field(default_factory=dict)  # part name -> its sha256 when this was made


def sha256_file(p: str | Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _is_sha(s: str) -> bool:
    return len(s) == 64 and all(c in "0123456789abcdef" for c in s)


def read_parts(d: str | Path) -> dict[str, Part] | None:
    """The record of D/MANIFEST.sha256 (part -> Part), None when D has none (a directory written by an older
    snapuq); a damaged file is a one-line SnapuqError naming its line."""
    p = ModelPaths(d).parts
    try:
        text = p.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise SnapuqError(f"{p}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    shas: dict[str, str] = {}
    froms: dict[str, dict[str, str]] = {}
    for i, line in enumerate(text.splitlines(), 1):
        bad = SnapuqError(f"{p}: line {i} is neither 'SHA256  PART' nor '#< PART NAME=SHA256 ...' "
                          f"({line[:60]!r}); re-export (`snapuq export {p.parent}`) or remove it")
        if line.startswith("#<"):
            name, *pairs = line[2:].split()
            got = dict(x.split("=", 1) for x in pairs if "=" in x)
            if not name or len(got) != len(pairs) or not all(_is_sha(v) for v in got.values()):
                raise bad
            froms[name] = got
        elif line.startswith("#") or not line.strip():
            continue
        else:
            sha, sep, name = line.partition("  ")
            if not sep or not _is_sha(sha) or not name or name in shas:
                raise bad
            shas[name] = sha
    stray = sorted(set(froms) - set(shas))
    if stray:
        raise SnapuqError(f"{p}: '#<' line for {stray[0]}, which it does not list; re-export or remove it")
    return {n: Part(s, froms.get(n, {})) for n, s in shas.items()}


def format_parts(rec: dict[str, Part]) -> str:
    order = [n for n in MADE_FROM if n in rec] + sorted(n for n in rec if n not in MADE_FROM)
    lines = [PARTS_HEADER.rstrip("\n")]
    for n in order:
        lines.append(f"{rec[n].sha256}  {n}")
        if rec[n].made_from:
            lines.append(f"#< {n} " + " ".join(f"{a}={s}" for a, s in rec[n].made_from.items()))
    return "\n".join(lines) + "\n"


def plan_parts(locate, old: dict[str, Part] | None, made: set[str]) -> dict[str, Part] | None:
    """The record a writer leaves: the parts in `made` (just written) with their sha256 and those of the parts
    they are made from; every other part as `old` recorded it (a part changed by hand keeps the record it
    no longer matches, and an unrecorded one stays unrecorded: consumers refuse both). `locate(name)` is the
    part's file after the write, or None. Returns None where the directory had no record and nothing of what
    it holds is made from what changed (a blob added to, or baselines retrained in, a directory written by
    an older snapuq): it stays without one rather than vouch for parts nobody checked."""
    files = {n: p for n in MADE_FROM if (p := locate(n)) is not None}
    sha = {n: sha256_file(p) for n, p in files.items()}
    carried = [n for n in files if n not in made]
    if old is None:
        derived = [n for n in carried if n not in TRAIN_PARTS]
        if derived and not any(m in MADE_FROM[n] for n in derived for m in made):
            return None
    rec: dict[str, Part] = {}
    for n in files:
        if n in made or (old is None and n in TRAIN_PARTS):
            rec[n] = Part(sha[n], {a: sha[a] for a in MADE_FROM[n] if a in sha})
        elif old is not None and n in old:
            rec[n] = old[n]
    return rec


def _remedy(d: Path, name: str) -> str:
    if name in (ModelPaths.CONFIG, ModelPaths.KERAS):
        extra = f" (after a deliberate edit: `snapuq parts {d} --write`)" if name == ModelPaths.CONFIG else ""
        return f"retrain: `snapuq train --out {d}`{extra}"
    if name == ModelPaths.CALIB:
        return f"run `snapuq calibrate {d}`"
    if name == ModelPaths.BLOB:
        return f"run `snapuq micropython blob {d}`"
    return f"run `snapuq export {d}`"


_LEGACY_NOTED: set[str] = set()


def legacy_note(d: Path) -> None:
    """One line per directory and process, on an interactive stderr (a script's or a test's error output
    stays one line): D has no MANIFEST.sha256, so its parts are taken as they are."""
    import sys

    key = str(Path(d).resolve())
    if key in _LEGACY_NOTED or not getattr(sys.stderr, "isatty", lambda: False)():
        return
    _LEGACY_NOTED.add(key)
    print(f"snapuq: note: {d}: no {ModelPaths.PARTS} (written by an older snapuq), its parts are not checked "
          f"against each other; `snapuq parts {d} --write` checks and records them", file=sys.stderr)


def part_problem(d: Path, rec: dict[str, Part], name: str, sha: dict[str, str | None]) -> str | None:
    """Why part `name` of D must not be used (one line naming it and the remedy), or None. `sha`: a memo of
    the parts' file hashes (None: absent)."""
    def h(n: str) -> str | None:
        if n not in sha:
            p = d / n
            sha[n] = sha256_file(p) if p.is_file() else None
        return sha[n]

    p, cur, fix = d / name, h(name), _remedy(d, name)
    if cur is None:
        return f"{p}: missing ({fix})"
    r = rec.get(name)
    if r is None:
        return (f"{p}: not recorded in {d / ModelPaths.PARTS} (written by an older snapuq, or left from "
                f"before its model or calibration changed); {fix}")
    if r.sha256 != cur:
        return (f"{p}: changed since snapuq wrote it (sha256 {cur[:12]}, {ModelPaths.PARTS} records "
                f"{r.sha256[:12]}); {fix}")
    for a, s in r.made_from.items():
        now = h(a)
        if now is not None and now != s:  # an absent one (a deployment copy without model.keras) is no mix
            return f"{p}: made from another {a} (sha256 {s[:12]}; {d / a} is {now[:12]}); {fix}"
    return None


def check_parts(d: str | Path, need: tuple[str, ...] = (), also: tuple[str, ...] = ()) -> dict | None:
    """Refuse, in one line naming the part, a model directory whose parts do not belong together: each part
    in `need` (and each in `also` that is present) must be there, have the sha256 MANIFEST.sha256 records
    and be made from the parts of D as they are now (not from a calib.json since refitted, a model.keras
    since retrained). Every consumer calls it (eval, export, verify, harness, bench, micropython blob/push).
    A directory without MANIFEST.sha256 (written by an older snapuq) passes, with a one-line note on a
    terminal (legacy_note); returns its record, or None for such a directory."""
    d = Path(d)
    rec = read_parts(d)
    if rec is None:
        if d.is_dir():
            legacy_note(d)
        return None
    sha: dict[str, str | None] = {}
    for n in list(need) + [n for n in also if n not in need and (d / n).is_file()]:
        why = part_problem(d, rec, n, sha)
        if why:
            raise ModelFormatError(why)
    return rec


@contextlib.contextmanager
def commit_lock(parent: Path):
    """Held while a writer swaps parts into (or a whole directory over) a model directory in `parent`: the
    swaps of `snapuq train`, `export`, `calibrate` and `micropython blob` never interleave."""
    import fcntl

    fd = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class PartsUpdate:
    """Parts of an existing model directory rewritten as one unit (`snapuq export`, `snapuq calibrate` with
    its export refresh, `snapuq micropython blob`): every new part is written into the staging folder
    `.NAME.update` beside NAME (locked against a second writer) and hashed there, then `commit()` swaps
    them in one by one (each old part kept as a hard link, so an error during the swap puts every one
    back), removes the parts that would be stale, and writes MANIFEST.sha256 last. A failure before (a full
    disk, an exception, Ctrl-C) leaves NAME exactly as it was; a process killed mid-swap leaves parts that
    MANIFEST.sha256 does not record, which every consumer refuses by name.

        with PartsUpdate(d) as up:
            write_bytes(up.path / ModelPaths.INT8, ...)
            up.commit(made=(...))
    """

    def __init__(self, d: str | Path) -> None:
        self.d = Path(d)
        real = self.d.resolve()  # beside the directory itself (a link to it may be on another file system)
        self.path = real.parent / f".{real.name}.update"
        self.old: dict[str, Part] | None = None
        self._lock = None
        self._removed: set[str] = set()
        self._seen: tuple[int, bytes | None] | None = None

    def __enter__(self) -> PartsUpdate:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> Path:
        if not self.d.is_dir():
            raise SnapuqError(f"{self.d}: no such model directory")
        check_out_dir(self.d, "model directory")
        self._lock = _lock_staging(self.path, f"{self.d}: another snapuq command is writing it", clear=True)
        self.old = read_parts(self.d)
        self._seen = self._state()
        return self.path

    def _state(self) -> tuple[int, bytes | None]:
        pp = ModelPaths(self.d).parts
        return os.stat(self.d).st_ino, pp.read_bytes() if pp.is_file() else None

    def remove(self, name: str) -> None:
        """Drop part `name` from D at commit (a part this write makes stale and does not rewrite)."""
        self._removed.add(name)

    def commit(self, made: tuple[str, ...] | set[str] = ()) -> None:
        staged = [n for n in MADE_FROM if (self.path / n).is_file()]
        gone = [n for n in MADE_FROM if n in self._removed and n not in staged and (self.d / n).exists()]

        def locate(n: str) -> Path | None:
            if n in staged:
                return self.path / n
            return None if n in self._removed or not (self.d / n).is_file() else self.d / n

        rec = plan_parts(locate, self.old, set(made) | set(staged))
        names = list(staged)
        if rec is not None:
            write_text(self.path / ModelPaths.PARTS, format_parts(rec))
            names.append(ModelPaths.PARTS)
        with commit_lock(self.path.parent):
            if not self.d.is_dir() or self._state() != self._seen:
                raise SnapuqError(f"{self.d}: replaced or changed by another snapuq command while this one "
                                  "ran (`snapuq train`?); nothing written, run this again")
            backup = self.path / ".old"
            backup.mkdir()
            done: list[str] = []
            try:
                for n in gone + names:  # MANIFEST.sha256 last
                    dst = self.d / n
                    if dst.exists():
                        try:
                            os.link(dst, backup / n)
                        except OSError:  # a file system without hard links
                            shutil.copy2(dst, backup / n)
                    done.append(n)
                    if n in gone:
                        dst.unlink()
                    else:
                        os.replace(self.path / n, dst)
                _fsync_dir(self.d)
            except BaseException:
                for n in reversed(done):
                    if (backup / n).exists():
                        os.replace(backup / n, self.d / n)
                    else:
                        with contextlib.suppress(FileNotFoundError):
                            (self.d / n).unlink()
                raise

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None
            shutil.rmtree(self.path, ignore_errors=True)


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def record_parts(d: str | Path, made: tuple[str, ...]) -> None:
    """MANIFEST.sha256 for a writer that wrote `made` in place (the library's `Snap.save`, which `snapuq train
    --model` calls): the same record PartsUpdate.commit leaves."""

    d = Path(d)
    try:
        old = read_parts(d)
    except SnapuqError:
        old = {}  # a damaged record vouches for nothing: every part not rewritten now is unrecorded
    rec = plan_parts(lambda n: d / n if (d / n).is_file() else None, old, set(made))
    if rec is not None:
        write_text(ModelPaths(d).parts, format_parts(rec))


def default_data_dir(model_dir: str | Path | None, given: str | None) -> str | None:
    """--data-dir as given, else the one `snapuq train` recorded in the model's config.json."""
    if given is not None or model_dir is None:
        return given

    cfg = Path(model_dir) / "config.json"
    if not cfg.is_file():
        return None
    v = read_config(cfg, need=()).get("data_dir")
    return str(v) if v else None
