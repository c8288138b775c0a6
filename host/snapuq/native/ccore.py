"""The C core (firmware/core) on the host: built once into a shared library with the host C
compiler and called through ctypes, so the host computes exactly the integers the device does.

The C sources ship inside the package (``snapuq/c`` is the core folder; in a checkout a link to
``firmware/core``); the list of files to compile is the core's own ``core.mk``. The library is
rebuilt whenever a source, a header, the flags or the compiler change (the file name carries a
hash of all of them) and cached under ``build/ccore`` in a checkout, else ``~/.cache/snapuq``
(override with ``SNAPUQ_CCORE_DIR``; the compiler with ``CC``).

    m = CoreModel(tflite_bytes)
    outs = m.predict(x_int8)                  # name -> (N, *shape) for every output
    s = CoreSnap(tflite_bytes, manifest)      # SNAP constants through the core's blob reader
    r = s.score(outs)                 # ebar16, s16, S16, F16, m16, P16, A16, Z16, U16, pred, flag
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import resources
from snapuq.errors import ModelFormatError, SnapuqError
from snapuq.native.blob import write_blob

CORE_DIR = resources.PACKAGE / "c"  # firmware/core (a link in a checkout, package data in a wheel)
HOST_SHIM = resources.PACKAGE / "ccore_host.c"
CFLAGS = ("-std=c99", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra")
_DTYPES = {0: np.float32, 2: np.int32, 3: np.uint8, 4: np.int64, 7: np.int16, 9: np.int8}


class CCoreError(SnapuqError):
    """The C core could not be built or loaded on this host."""


# ----------------------------------------------------------------------------------------------
# building


def core_sources(core: Path = CORE_DIR) -> list[Path]:
    """The core's C files, in the order core.mk lists them (every build of the core reads it)."""
    mk = core / "core.mk"
    if not mk.is_file():
        raise CCoreError(f"{mk} is missing: it lists the core's sources")
    names: list[str] = []
    for line in mk.read_text().splitlines():
        m = re.match(r"^SNAPUQ_CORE_[A-Z]+_SRC\s*\+=\s*(\S+\.c)\s*$", line)
        if m and m.group(1) not in names:
            names.append(m.group(1))
    if not names:
        raise CCoreError(f"{mk}: lists no .c files")
    missing = [n for n in names if not (core / n).is_file()]
    if missing:
        raise CCoreError(f"{mk}: names {', '.join(missing)}, not found in {core}")
    return [core / n for n in names]


def _compiler() -> str:
    cc = os.environ.get("CC") or "gcc"
    exe = shutil.which(cc)
    if exe is None:
        raise CCoreError(
            f"C compiler '{cc}' not found: the host runs the C core through a library built with it "
            "(install gcc, e.g. apt-get install gcc, or set CC)"
        )
    return exe


def _build_dir() -> Path:
    env = os.environ.get("SNAPUQ_CCORE_DIR")
    if env:
        return Path(env)
    return resources.work_dir("ccore")


def _include_dirs(core: Path) -> list[Path]:
    return sorted({p.parent for p in core.rglob("*.h")} | {core})


def library_path(core: Path = CORE_DIR) -> Path:
    """Path of the cached shared library for the current sources (building it when missing)."""
    if not core.is_dir():
        raise CCoreError(f"{core}: the C core sources are missing from the snapuq package")
    srcs = core_sources(core) + [HOST_SHIM]
    cc = _compiler()
    h = hashlib.sha256()
    h.update(repr((cc, CFLAGS)).encode())
    for p in srcs + sorted(core.rglob("*.h")):
        h.update(str(p.relative_to(p.parent if p == HOST_SHIM else core)).encode() + b"\0")
        h.update(p.read_bytes())
    key = h.hexdigest()[:16]
    out_dir = _build_dir()
    lib = out_dir / f"libsnapuq_host-{key}.so"
    if lib.is_file():
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=lib.name + ".", suffix=".tmp", dir=out_dir)
    os.close(fd)
    cmd = [cc, *CFLAGS, *[f"-I{d}" for d in _include_dirs(core)], *map(str, srcs), "-o", tmp, "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        os.unlink(tmp)
        first = next((ln for ln in p.stderr.splitlines() if "error" in ln), p.stderr.strip()[-300:])
        raise CCoreError(f"building the C core failed: {first}")
    os.replace(tmp, lib)
    for old in out_dir.glob("libsnapuq_host-*.so"):
        if old != lib:
            old.unlink(missing_ok=True)
    return lib


_LIB: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """The loaded C core (built on first use; one per process)."""
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL(str(library_path()))
        vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
        i32p = ctypes.POINTER(ctypes.c_int32)
        sigs: dict[str, tuple[Any, list[Any]]] = {
            "snapuq_host_model_open": (vp, [cp, sz, cp, sz]),
            "snapuq_host_model_close": (None, [vp]),
            "snapuq_host_model_error": (cp, [vp]),
            "snapuq_host_model_arena_bytes": (sz, [vp]),
            "snapuq_host_model_count": (ctypes.c_int, [vp, ctypes.c_int]),
            "snapuq_host_model_info": (ctypes.c_int, [vp, ctypes.c_int, ctypes.c_int, i32p,
                                                      ctypes.POINTER(ctypes.c_float), i32p,
                                                      ctypes.POINTER(ctypes.c_char_p)]),
            "snapuq_host_model_op": (ctypes.c_int, [vp, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]),
            "snapuq_host_model_run": (ctypes.c_int, [vp, vp, sz, vp]),
            "snapuq_host_model_run_snap": (ctypes.c_int, [vp, vp, vp, sz, vp, vp]),
            "snapuq_host_snap_fields": (cp, []),
            "snapuq_host_snap_open": (vp, [cp, sz, cp, sz]),
            "snapuq_host_snap_close": (None, [vp]),
            "snapuq_host_snap_row_len": (ctypes.c_int, [vp]),
            "snapuq_host_snap_normalize": (ctypes.c_int, [vp, vp, sz, vp]),
            "snapuq_host_snap_quantize": (ctypes.c_int, [vp, vp, sz, vp]),
            "snapuq_host_snap_score": (ctypes.c_int, [vp, vp, sz, sz, vp, sz, vp]),
            "snapuq_host_status_str": (cp, [ctypes.c_int]),
            "snapuq_kernels_name": (cp, []),
        }
        for name, (res, args) in sigs.items():
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = args
        _LIB = lib
    return _LIB


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


# ----------------------------------------------------------------------------------------------
# model


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: Any
    scale: float
    zero_point: int
    bytes: int


class _Handle:
    """An object of the host library, opened from bytes (the core's refusal in one line) and closed once."""

    _CLOSE = ""  # the library's close function for this kind of handle

    def _open(self, opener: str, data: bytes, what: str) -> ctypes.CDLL:
        self._lib = library()
        err = ctypes.create_string_buffer(256)
        h = getattr(self._lib, opener)(data, len(data), err, len(err))
        if not h:
            raise ModelFormatError(f"C core rejects {what}: {err.value.decode(errors='replace')}")
        self._h = ctypes.c_void_p(h)
        return self._lib

    def close(self) -> None:
        if getattr(self, "_h", None):
            getattr(self._lib, self._CLOSE)(self._h)
            self._h = None

    def __del__(self) -> None:
        self.close()


class CoreModel(_Handle):
    """A .tflite loaded by the C core (snapuq_model_init + set_arena), run on batches."""

    _CLOSE = "snapuq_host_model_close"

    def __init__(self, tflite: bytes) -> None:
        lib = self._open("snapuq_host_model_open", bytes(tflite), "the model")
        self.inputs = [self._info(0, i) for i in range(lib.snapuq_host_model_count(self._h, 0))]
        self.outputs = [self._info(1, i) for i in range(lib.snapuq_host_model_count(self._h, 1))]
        self.output_names = [o.name for o in self.outputs]
        self.n_tensors = int(lib.snapuq_host_model_count(self._h, 2))
        self.arena_bytes = int(lib.snapuq_host_model_arena_bytes(self._h))
        self.in_bytes = sum(t.bytes for t in self.inputs)
        self.out_bytes = sum(t.bytes for t in self.outputs)
        self.out_offsets = np.cumsum([0] + [t.bytes for t in self.outputs[:-1]]).astype(np.uint32)

    def _info(self, outputs: int, i: int) -> TensorSpec:
        desc = (ctypes.c_int32 * 8)()
        scale, zp, name = ctypes.c_float(), ctypes.c_int32(), ctypes.c_char_p()
        st = self._lib.snapuq_host_model_info(self._h, outputs, i, desc, ctypes.byref(scale),
                                              ctypes.byref(zp), ctypes.byref(name))
        if st:
            raise ModelFormatError(f"C core: tensor info: {self._lib.snapuq_host_status_str(st).decode()}")
        ndim = desc[1]
        dtype = _DTYPES.get(desc[0])
        if dtype is None:
            raise ModelFormatError(f"C core: unsupported tensor type {desc[0]}")
        return TensorSpec((name.value or b"").decode(errors="replace"), tuple(desc[2:2 + ndim]), dtype,
                          float(scale.value), int(zp.value), int(desc[7]))

    def capacities(self) -> dict[str, int]:
        """What snapuq_model_t must hold for this model (the -D flags of a CAPS=fit build):
        {"SNAPUQ_MAX_TENSORS", "SNAPUQ_MAX_OPS", "SNAPUQ_MAX_IO"}."""
        return {"SNAPUQ_MAX_TENSORS": self.n_tensors, "SNAPUQ_MAX_OPS": len(self.op_names()),
                "SNAPUQ_MAX_IO": max(len(self.inputs), len(self.outputs))}

    def op_names(self) -> list[str]:
        """Builtin name of every operator, in execution order ("CONV_2D", ...)."""
        n = self._lib.snapuq_host_model_op(self._h, 0, None)
        names = []
        for i in range(n):
            p = ctypes.c_char_p()
            self._lib.snapuq_host_model_op(self._h, i, ctypes.byref(p))
            names.append((p.value or b"").decode())
        return names

    def output_map(self) -> dict[str, dict[str, Any]]:
        """name -> {"index", "scale", "zero_point", "shape", "dtype"} in output order (names from
        the signature: TFLite orders outputs differently from the Keras dict)."""
        return {t.name: {"index": i, "scale": t.scale, "zero_point": t.zero_point, "shape": list(t.shape),
                         "dtype": np.dtype(t.dtype).name} for i, t in enumerate(self.outputs)}

    def _records(self, x: np.ndarray | list[np.ndarray]) -> np.ndarray:
        """Inputs -> (N, in_bytes) uint8 (a single-input model takes (N, *shape) or one sample)."""
        if isinstance(x, (list, tuple)) and len(self.inputs) > 1:
            parts = [np.ascontiguousarray(np.asarray(a, t.dtype)).reshape(-1, t.bytes // t.dtype().itemsize)
                     for a, t in zip(x, self.inputs)]
            return np.concatenate([p.view(np.uint8) for p in parts], axis=1)
        t = self.inputs[0]
        a = np.asarray(x)
        if a.dtype != t.dtype:
            raise ModelFormatError(f"input must be {np.dtype(t.dtype).name}, got {a.dtype}")
        n_el = t.bytes // a.itemsize
        if a.size % n_el:
            raise ModelFormatError(f"input has {a.size} elements, the model wants multiples of {n_el} "
                                   f"(shape {list(t.shape)})")
        return np.ascontiguousarray(a).reshape(-1, n_el).view(np.uint8)

    def run(self, x: np.ndarray | list[np.ndarray]) -> np.ndarray:
        """Run every record; (N, out_bytes) uint8 with the outputs concatenated in model order."""
        rec = self._records(x)
        y = np.empty((len(rec), self.out_bytes), np.uint8)
        st = self._lib.snapuq_host_model_run(self._h, _ptr(rec), len(rec), _ptr(y))
        if st:
            raise ModelFormatError(f"C core invoke: {self._lib.snapuq_host_status_str(st).decode()} "
                                   f"{self._lib.snapuq_host_model_error(self._h).decode()}".strip())
        return y

    def split(self, raw: np.ndarray) -> dict[str, np.ndarray]:
        """(N, out_bytes) records -> name -> (N, *shape) arrays of the output's dtype."""
        out = {}
        for t, off in zip(self.outputs, self.out_offsets):
            part = np.ascontiguousarray(raw[:, off:off + t.bytes]).view(t.dtype)
            out[t.name] = part.reshape(len(raw), *t.shape)
        return out

    def predict(self, x: np.ndarray | list[np.ndarray]) -> dict[str, np.ndarray]:
        """name -> (N, *output shape) for a batch of inputs."""
        return self.split(self.run(x))

    def invoke(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """One sample: name -> output array of the output's own shape."""
        return {k: v[0] for k, v in self.predict(x).items()}


# ----------------------------------------------------------------------------------------------
# SNAP


class CoreSnap(_Handle):
    """The integer SNAP score of the C core (snapuq_snap_score) for a model and one manifest
    "snap" section.

    The constants reach the core the way they reach a device: packed into a model blob by the
    project's blob writer (snapuq.native.blob.write_blob, docs/BLOB.md) and read by the core's
    blob reader (snapuq_blob_open, snapuq_model_init on the blob's .tflite,
    snapuq_blob_snap_config, which checks the section against that model). `manifest` needs
    "outputs" (name -> index, zero_point, shape) and "snap"; "class_names" is optional."""

    _CLOSE = "snapuq_host_snap_close"

    def __init__(self, tflite: bytes, manifest: dict[str, Any]) -> None:
        self._open_blob(write_blob(bytes(tflite), manifest))
        self.outputs = manifest["outputs"]
        self.intap = manifest["snap"].get("intap")

    def _open_blob(self, blob: bytes) -> None:
        lib = self._open("snapuq_host_snap_open", blob, "the SNAP constants")
        self.row_len = int(lib.snapuq_host_snap_row_len(self._h))
        self.n_taps = (self.row_len - 10) // 2
        self.fields = lib.snapuq_host_snap_fields().decode().split(",")

    @classmethod
    def from_blob(cls, blob: bytes) -> CoreSnap:
        """A model blob (docs/BLOB.md) as it is, through the core's reader exactly as a device reads it
        (the firmware's `model` upload, the C MicroPython module); ModelFormatError with the reader's
        one line when it refuses the blob. Scores with run() (score() needs a manifest's output map)."""
        self = cls.__new__(cls)
        self._open_blob(bytes(blob))
        self.outputs = {}
        self.intap = None
        return self

    def _result(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        res: dict[str, np.ndarray] = {}
        c = 0
        for f in self.fields:
            if f.endswith("*"):
                res[f[:-1]] = rows[:, c:c + self.n_taps].astype(np.int64)
                c += self.n_taps
            else:
                res[f] = rows[:, c].astype(np.int64)
                c += 1
        res["flag"] = res["flag"].astype(bool)
        return res

    def score(self, codes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Integer SNAP values (int64 arrays; ebar16/s16 (N, taps)) for int8 output codes
        (name -> (N, ...) or one sample), the keys of snapuq_host_snap_fields()."""
        order = sorted(self.outputs, key=lambda k: int(self.outputs[k]["index"]))
        parts, sizes = [], []
        n = None
        for k in order:
            if k not in codes:
                raise ModelFormatError(f"missing int8 output '{k}'")
            a = np.asarray(codes[k])
            if a.dtype != np.int8:
                raise ModelFormatError(f"output '{k}' must be int8 codes, got {a.dtype}")
            size = int(np.prod(self.outputs[k]["shape"]))
            if a.size % size:
                raise ModelFormatError(f"output '{k}' has {a.shape[-1]} values, the model {size}")
            a = a.reshape(-1, size)
            if n is not None and len(a) != n:
                raise ModelFormatError(f"output '{k}' has {len(a)} records, others {n}")
            n = len(a)
            parts.append(a)
            sizes.append(size)
        if self.intap:  # step 4b reads the inputs: their codes go last in each record
            if "input" not in codes:
                raise ModelFormatError("this SNAP section has an input tap: give the int8 codes as 'input'")
            a = np.asarray(codes["input"])
            size = int(self.intap["rows"]) * int(self.intap["cols"])
            if a.dtype != np.int8 or a.size != n * size:
                raise ModelFormatError(f"'input' must be {n} x {size} int8 codes, got {a.dtype} {a.shape}")
            parts.append(a.reshape(n, size))
            sizes.append(size)
        raw = np.ascontiguousarray(np.concatenate(parts, axis=1))
        offsets = np.cumsum([0] + sizes[:-1]).astype(np.uint32)
        return self.score_raw(raw, offsets)

    def normalize_input(self, raw: np.ndarray) -> tuple[np.ndarray, int]:
        """(raw readings (N, ...) mapped by the blob's recorded input normalization through the core's
        reader, as float32; its channel count). Channels 0: the blob has none, the readings come back."""
        r = np.ascontiguousarray(np.asarray(raw, np.float32).reshape(len(raw), -1))
        x = np.empty_like(r)
        c = self._lib.snapuq_host_snap_normalize(self._h, _ptr(r), r.size, _ptr(x))
        if c < 0:
            raise ModelFormatError("C core: normalize_input failed")
        return x.reshape(np.shape(raw)), int(c)

    def quantize_input(self, raw: np.ndarray) -> np.ndarray:
        """Raw readings (N, ...) -> the model's int8 input codes (N, input elements) through the core's input
        path (firmware/core/snapuq_input.h): the blob's normalization, then the input's quantization."""
        r = np.ascontiguousarray(np.asarray(raw, np.float32).reshape(len(raw), -1))
        q = np.empty(r.shape, np.int8)
        if self._lib.snapuq_host_snap_quantize(self._h, _ptr(r), r.size, _ptr(q)) != 0:
            raise ModelFormatError("C core: quantize_input failed")
        return q

    def score_raw(self, raw: np.ndarray, offsets: np.ndarray) -> dict[str, np.ndarray]:
        """Score (N, record bytes) int8/uint8 records whose output j starts at offsets[j]."""
        raw = np.ascontiguousarray(raw)
        offsets = np.ascontiguousarray(offsets, dtype=np.uint32)
        rows = np.empty((len(raw), self.row_len), np.int32)
        st = self._lib.snapuq_host_snap_score(self._h, _ptr(raw), raw.shape[1] if raw.ndim == 2 else 0,
                                              len(raw), _ptr(offsets), len(offsets), _ptr(rows))
        if st:
            raise ModelFormatError(f"C core SNAP score: {self._lib.snapuq_host_status_str(st).decode()}")
        return self._result(rows)

    def run(self, model: CoreModel, x: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Run inputs through `model` and score each with snapuq_snap_score_model() (the device's
        path): (output codes name -> (N, *shape), SNAP values)."""
        rec = model._records(x)
        y = np.empty((len(rec), model.out_bytes), np.uint8)
        rows = np.empty((len(rec), self.row_len), np.int32)
        st = self._lib.snapuq_host_model_run_snap(model._h, self._h, _ptr(rec), len(rec), _ptr(y), _ptr(rows))
        if st:
            raise ModelFormatError(f"C core run + SNAP: {self._lib.snapuq_host_status_str(st).decode()}")
        return model.split(y), self._result(rows)


def kernels_name() -> str:
    """Which kernel set the host library uses ("ref" or "dsp")."""
    return library().snapuq_kernels_name().decode()
