"""One validator per file format of a model directory, used by every reader.

    cfg = read_config(ModelPaths(d).config)              # JSON + validate_config
    cal = read_calib(ModelPaths(d).calib, config=cfg)    # JSON + validate_calib (cross-checked with cfg)
    validate_calib(d, "calib.json")                      # an in-memory calibration (SnapScorer, build_snap)

`validate_calib` refuses every calibration the int8 export cannot turn into fixed point and every one the
float score would turn into nonsense or a traceback: types (numbers are JSON numbers, never strings or
booleans), finiteness (no NaN or Infinity, which Python's json reads), ranges (sd > 0, weights in [0, 2^14),
alarm.k in [2^-16, 2^14), u_threshold and conf.alpha in [0, 1], 257 p_err knots in [0, 1]), lengths (one
weight per tap, a 3-element beta, the input tap's 2(R + K) statistics) and the constants the fixed-point
formats must hold (docs/FIXED_POINT.md: Q16 offsets, (M, n) multipliers below 2^31). What needs the int8
model (its output scales and shapes) stays in `snapuq.export.fixedpoint.build_snap`. `snapuq eval`,
`snapuq calibrate`, `snapuq export`, `snapuq bench`, the harness and `SnapScorer.from_calib` all call it, so
a calib.json export refuses is refused by all of them with the same one line.

`validate_config` checks the keys of config.json a reader uses (dataset, input_shape, taps, seed, ...)
where present, and the training recipe through `snapuq.options.TrainOptions.from_dict`; a reader names
the keys it cannot do without (`need=`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from snapuq.errors import ModelFormatError, SnapuqError
from snapuq.io import read_json
from snapuq.options import CalibOptions, TrainOptions

# the fixed-point formats' limits (docs/FIXED_POINT.md); snapuq.export.fixedpoint holds the encoders

MAX_TAPS = 8
MAX_D = 16384
PERR_LUT_LEN = 257
PERR_KNOTS = PERR_LUT_LEN
INTAP_MAX_FEAT = 16384  # J: the step-4b sum of squares stays below 2^62
INTAP_MAX_SIDE = 65535  # R, K (uint16)
WEIGHT_MAX = 2.0**14
ALARM_K_MIN, ALARM_K_MAX = 2.0**-16, 2.0**14
Q16_MAX = ((1 << 31) - 1) / 65536.0  # |v| of a signed Q16 int32
MULT_MAX = 2.0**31  # |c| of an (M, n) multiplier


class FormatError(ModelFormatError):
    """A calib.json or config.json that a reader must not use."""


class _At:
    """Where a value sits: the file (or a label) and the key path inside it, for one-line messages."""

    def __init__(self, where: str, path: str = "") -> None:
        self.where, self.path = where, path

    def __truediv__(self, key: object) -> _At:
        k = f"[{key}]" if isinstance(key, int) else (f".{key}" if self.path else str(key))
        return _At(self.where, self.path + k)

    def fail(self, msg: str) -> FormatError:
        return FormatError(f"{self.where}: {self.path} {msg}" if self.path else f"{self.where}: {msg}")


# seeds feed numpy SeedSequence and TF: non-negative and within 32 bits
MAX_SEED = 2**32 - 1

def _show(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _obj(v: Any, at: _At) -> dict:
    if not isinstance(v, dict):
        raise at.fail(f"must be an object, got {_show(v)}")
    return v


def _get(d: dict, key: str, at: _At) -> Any:
    if key not in d:
        raise (at / key).fail("is missing")
    return d[key]


def _num(v: Any, at: _At, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
         hi_open: bool = False) -> float:
    """A finite JSON number (not a string, not a boolean) in [lo, hi] (open ends where asked)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise at.fail(f"must be a number, got {_show(v)}")
    f = float(v)
    if not math.isfinite(f):
        raise at.fail(f"must be finite, got {v}")
    if lo is not None and (f < lo or (lo_open and f == lo)):
        raise at.fail(f"must be {'>' if lo_open else '>='} {lo:g}, got {v}")
    if hi is not None and (f > hi or (hi_open and f == hi)):
        raise at.fail(f"must be {'<' if hi_open else '<='} {hi:g}, got {v}")
    return f


def _int(v: Any, at: _At, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise at.fail(f"must be an integer, got {_show(v)}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise at.fail(f"must be an integer {rng}, got {v}")
    return v


def _str(v: Any, at: _At, nonempty: bool = True) -> str:
    if not isinstance(v, str) or (nonempty and not v):
        raise at.fail(f"must be a {'non-empty ' if nonempty else ''}string, got {_show(v)}")
    return v


def _list(v: Any, at: _At, n: int | None = None, lo: int = 0, hi: int | None = None) -> list:
    if not isinstance(v, list):
        raise at.fail(f"must be a list, got {_show(v)}")
    if n is not None and len(v) != n:
        raise at.fail(f"must have {n} values, got {len(v)}")
    if len(v) < lo or (hi is not None and len(v) > hi):
        raise at.fail(f"must have {lo}..{hi} values, got {len(v)}" if hi is not None
                      else f"must have at least {lo} values, got {len(v)}")
    return v


def _bool(v: Any, at: _At) -> bool:
    if not isinstance(v, bool):
        raise at.fail(f"must be true or false, got {_show(v)}")
    return v


def _q16(v: float, at: _At, what: str) -> None:
    if abs(v) > Q16_MAX:
        raise at.fail(f"gives {what} = {v:.6g}, outside the fixed-point score's Q16 range (|v| <= 32768)")


def _mult(v: float, at: _At, what: str) -> None:
    if abs(v) >= MULT_MAX:
        raise at.fail(f"gives {what} = {v:.6g}, too large for the fixed-point (M, n) format (< 2^31)")


# ----------------------------------------------------------------------------------------------
# calib.json


def validate_calib(c: Any, where: str = "calib.json", config: dict | None = None) -> dict:
    """`c` (a parsed calib.json) if every variant in it is a calibration the float score and the int8
    export can use, else FormatError naming `where` and the key. With `config` (a validated config.json),
    also the same number of taps, the same tap sizes and an input tap the size of the model input."""
    at = _At(where)
    _obj(c, at)
    offset = _num(c.get("logvar_offset", 0.0), at / "logvar_offset")
    if "variant" in c:
        _str(c["variant"], at / "variant")
    if "version" in c:
        _int(c["version"], at / "version", 1)
    _calibration(c, at, offset, config)
    vs = c.get("variants")
    if vs is not None:
        for name, v in _obj(vs, at / "variants").items():
            va = at / "variants" / name
            _calibration(_obj(v, va), va, offset, config)
    return c


def _calibration(p: dict, at: _At, offset: float, config: dict | None) -> None:
    """One variant's constants (the top level or an entry of "variants": each is a whole calibration)."""
    taps = _list(_get(p, "taps", at), at / "taps", lo=1, hi=MAX_TAPS)
    cfg_taps = config.get("taps") if config else None
    if cfg_taps is not None and len(cfg_taps) != len(taps):
        raise (at / "taps").fail(f"has {len(taps)} entries, config.json has {len(cfg_taps)} taps")
    for k, tc in enumerate(taps):
        ta = at / "taps" / k
        _obj(tc, ta)
        if "name" in tc:
            _str(tc["name"], ta / "name")
        for key in ("layer", "prev"):
            if tc.get(key) is not None:
                _str(tc[key], ta / key)
        if "d" in tc:
            d = _int(tc["d"], ta / "d", 1, MAX_D)
            if cfg_taps is not None and isinstance(cfg_taps[k], dict) and cfg_taps[k].get("d", d) != d:
                raise (ta / "d").fail(f"is {d}, config.json's tap {k} has d {cfg_taps[k]['d']}")
        ce = _num(_get(tc, "c_e", ta), ta / "c_e")
        cl = _num(_get(tc, "c_l", ta), ta / "c_l")
        if _bool(tc.get("two_sided", False), ta / "two_sided"):
            mean = _num(_get(tc, "mean", ta), ta / "mean")
            sd = _num(_get(tc, "sd", ta), ta / "sd", lo=0.0, lo_open=True)
            _mult(ce / sd, ta, "c_e / sd")
            _q16((cl * offset - mean) / sd, ta, "(c_l logvar_offset - mean) / sd")
        else:
            if cl != 0.0 or ce < 0:
                raise ta.fail("is one-sided: its score must be c_e * ebar with c_e >= 0 and c_l = 0 "
                              f"(got c_e {ce:g}, c_l {cl:g})")
            _mult(ce, ta, "c_e")
    weights = _list(_get(p, "weights", at), at / "weights", n=len(taps))
    for k, w in enumerate(weights):
        _num(w, at / "weights" / k, lo=0.0, hi=WEIGHT_MAX, hi_open=True)
    beta = _list(_get(p, "beta", at), at / "beta", n=3)
    b = [_num(v, at / "beta" / k) for k, v in enumerate(beta)]
    _q16(b[0], at / "beta" / 0, "beta0")
    _mult(b[1], at / "beta" / 1, "beta1")
    _mult(b[2], at / "beta" / 2, "beta2")
    conf = p.get("conf")
    if conf is not None:
        _obj(conf, at / "conf")
        if conf.get("kind", "msp_margin") != "msp_margin":
            kind = _show(conf.get("kind"))
            raise (at / "conf" / "kind").fail(f"is {kind}: no fixed-point form (only msp_margin)")
        _num(conf.get("alpha", 0.5), at / "conf" / "alpha", 0.0, 1.0)
    if "u_threshold" in p:
        _num(p["u_threshold"], at / "u_threshold", 0.0, 1.0)
    hinge = p.get("hinge")
    if hinge is not None:
        ha = at / "hinge"
        _obj(hinge, ha)
        q = _num(_get(hinge, "q", ha), ha / "q")
        _q16(q, ha / "q", "q")
        sd = _num(_get(hinge, "sd", ha), ha / "sd", lo=0.0, lo_open=True)
        _mult(1.0 / sd, ha / "sd", "1 / sd")
    perr, alarm = p.get("perr"), p.get("alarm")
    if bool(perr) != bool(alarm):
        raise at.fail("has 'perr' without 'alarm' or 'alarm' without 'perr' (version 2 needs both; the "
                      "score would fall back to the logistic form silently)")
    if perr:
        pa = at / "perr"
        knots = _list(_get(_obj(perr, pa), "knots", pa), pa / "knots", n=PERR_KNOTS)
        for i, v in enumerate(knots):
            _num(v, pa / "knots" / i, 0.0, 1.0)
        aa = at / "alarm"
        k = _num(_get(_obj(alarm, aa), "k", aa), aa / "k")
        if not ALARM_K_MIN <= k < ALARM_K_MAX:
            raise (aa / "k").fail(f"must be in [2^-16, 2^14) (the fixed-point alarm), got {alarm['k']}")
    it = p.get("intap")
    if it:
        _intap(_obj(it, at / "intap"), at / "intap", config)


def _intap(it: dict, at: _At, config: dict | None) -> None:
    rows = _int(_get(it, "rows", at), at / "rows", 1, INTAP_MAX_SIDE)
    cols = _int(_get(it, "cols", at), at / "cols", 1, INTAP_MAX_SIDE)
    shape = config.get("input_shape") if config else None
    if shape is not None and rows * cols != math.prod(shape):
        raise at.fail(f"views the input as {rows} x {cols}, config.json's input_shape {shape} has "
                      f"{math.prod(shape)} values")
    J = input_summary_len(rows, cols)
    if J > INTAP_MAX_FEAT:
        raise at.fail(f"{rows} x {cols} gives {J} statistics (at most {INTAP_MAX_FEAT})")
    mu = [_num(v, at / "mu" / j) for j, v in enumerate(_list(_get(it, "mu", at), at / "mu", n=J))]
    sig = _list(_get(it, "sigma", at), at / "sigma", n=J)
    for j, v in enumerate(sig):
        s = _num(v, at / "sigma" / j, lo=0.0, lo_open=True)
        _q16(mu[j] / s / 16.0, at / "mu" / j, "mu / sigma / 16")
    mean = _num(_get(it, "mean", at), at / "mean")
    sd = _num(_get(it, "sd", at), at / "sd", lo=0.0, lo_open=True)
    _mult(1.0 / sd, at / "sd", "1 / sd")
    _q16(-mean / sd, at, "-mean / sd")
    _num(_get(it, "weight", at), at / "weight", lo=0.0, hi=WEIGHT_MAX, hi_open=True)


# ----------------------------------------------------------------------------------------------
# config.json

VARIANTS = ("best", "literal")


def validate_config(c: Any, where: str = "config.json", need: tuple[str, ...] = ("dataset",)) -> dict:
    """`c` (a parsed config.json) if every key a reader uses is well-typed and in range, else FormatError
    naming `where` and the key. `need`: the keys this reader cannot do without."""
    at = _At(where)
    _obj(c, at)
    for key in need:
        _get(c, key, at)
    if "format" in c:
        _int(c["format"], at / "format", 1)
    if "dataset" in c:
        _str(c["dataset"], at / "dataset")
    for key in ("backbone", "variant", "data_dir"):
        if c.get(key) is not None:
            _str(c[key], at / key)
    if c.get("variant") is not None and c["variant"] not in VARIANTS:
        raise (at / "variant").fail(f"must be one of {', '.join(VARIANTS)}, got {_show(c['variant'])}")
    if "seed" in c:
        _int(c["seed"], at / "seed", 0, MAX_SEED)
    if "input_shape" in c:
        for k, v in enumerate(_list(c["input_shape"], at / "input_shape", lo=1)):
            _int(v, at / "input_shape" / k, 1)
    if "n_classes" in c:
        n = _int(c["n_classes"], at / "n_classes", 2)
        if "class_names" in c:
            names = _list(c["class_names"], at / "class_names", n=n)
            for k, v in enumerate(names):
                _str(v, at / "class_names" / k, nonempty=False)
    if "taps" in c:
        for k, t in enumerate(_list(c["taps"], at / "taps", hi=MAX_TAPS)):
            ta = at / "taps" / k
            _obj(t, ta)
            _int(_get(t, "d", ta), ta / "d", 1, MAX_D)
            if "d_prev" in t:
                _int(t["d_prev"], ta / "d_prev", 1)
            for key in ("name", "layer", "prev"):
                if t.get(key) is not None:
                    _str(t[key], ta / key)
    for key in ("epochs", "rank", "qat_epochs", "backbone_epochs"):
        if c.get(key) is not None:
            _int(c[key], at / key, 1 if key == "rank" else 0)
    if c.get("cov_rank") is not None:
        _int(c["cov_rank"], at / "cov_rank", 0)
    if "eps" in c:
        _num(c["eps"], at / "eps", lo=0.0, lo_open=True)
    for key in ("logvar_offset", "lambda_ss", "lambda_reg"):
        if key in c:
            _num(c[key], at / key)
    if "qat_frac" in c:
        _num(c["qat_frac"], at / "qat_frac", 0.0, 1.0)
    for key, cls in (("calibration", CalibOptions), ("recipe", TrainOptions)):
        if c.get(key) is not None:
            label = f"{where} {key}"
            try:
                cls.from_dict(_obj(c[key], at / key), label)
            except FormatError:
                raise
            except SnapuqError as e:  # the options' checks speak of the CLI flags: say where they came from
                msg = str(e)
                raise FormatError(msg if msg.startswith(label) else f"{label}: {msg}") from None
    return c


# ----------------------------------------------------------------------------------------------
# readers


def read_config(path: str | Path, need: tuple[str, ...] = ("dataset",)) -> dict:
    """config.json parsed and validated (one-line SnapuqError naming the file otherwise)."""

    p = Path(path)
    return validate_config(read_json(p, "not a model directory written by `snapuq train`"), str(p), need)


def read_calib(path: str | Path, config: dict | None = None) -> dict:
    """calib.json parsed and validated, cross-checked with the model's (validated) config when given."""

    p = Path(path)
    return validate_calib(read_json(p, "the SNAP calibration written by `snapuq train`"), str(p), config)


def input_summary_len(rows: int, cols: int) -> int:
    """J = K column means + R row means (+ K column |differences| when R > 1, + R row ones when K > 1)."""
    return cols + rows + (cols if rows > 1 else 0) + (rows if cols > 1 else 0)
