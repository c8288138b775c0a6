"""What the int8 C core can hold: a model converted once with random data, its operators checked against
the core's set, and its tensor/operator counts against the core's limits (snapuq_runtime.h)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from snapuq import tfquiet
from snapuq.errors import SnapuqError
from snapuq.export.convert import convert_keras
from snapuq.io import captured_output
from snapuq.native.ccore import CORE_DIR, CCoreError, CoreModel
from snapuq.nn.graph import CORE_OPS, UnsupportedModelError
from snapuq.nn.saved import ModelDir
from snapuq.tflite_graph import read_graph


def _convert(model, n: int = 8, seed: int = 0) -> bytes:
    shape = tuple(int(d) for d in model.inputs[0].shape[1:])
    rep = np.random.default_rng(seed).normal(size=(n, *shape)).astype(np.float32)
    with captured_output(show=tfquiet.showing()):  # the converter's dump: held, as in export (shown with -v)
        return convert_keras(model, rep, int8=True)


def tflite_ops(tflite: bytes) -> list[tuple[str, str]]:
    """(builtin operator name, first output tensor name) of every operator of a converter-made .tflite."""
    g = read_graph(tflite)
    return [(op.name, g.tensors[op.outputs[0]].name if op.outputs else "") for op in g.operators]


# ------------------------------------------------------------------------------------ core capacities
_LIMIT_OF = {"tensors": "SNAPUQ_MAX_TENSORS", "operators": "SNAPUQ_MAX_OPS", "inputs": "SNAPUQ_MAX_IO",
             "outputs": "SNAPUQ_MAX_IO"}  # fmt: skip


def core_limits() -> dict[str, int]:
    """The C core's capacities as built by default (SNAPUQ_MAX_TENSORS / _OPS / _IO in snapuq_runtime.h):
    what the host library (`snapuq export / verify`), the MicroPython module and a firmware without CAPS=fit
    take."""
    import re


    text = (CORE_DIR / "snapuq_runtime.h").read_text()
    found = {k: int(v) for k, v in re.findall(r"#define (SNAPUQ_MAX_(?:TENSORS|OPS|IO)) (\d+)", text)}
    missing = sorted(set(_LIMIT_OF.values()) - set(found))
    if missing:
        raise SnapuqError(f"{CORE_DIR / 'snapuq_runtime.h'}: no #define {missing[0]}")
    return found


def graph_counts(tflite: bytes) -> dict[str, int]:
    """Tensors (constants included), operators, inputs and outputs of subgraph 0: what the core's loader
    compares with its capacities."""
    return read_graph(tflite).counts()


def head_count_bounds(n_taps: int) -> tuple[dict[str, int], dict[str, int]]:
    """(fewest, most) tensors / operators / outputs the SNAP heads add to the backbone in the exported graph.
    Per tap four FULLY_CONNECTED (P, h, mu, log-variance: weights, bias, output each), the two tap vectors (a
    MEAN over a feature map: output tensor, and a RESHAPE when the converter has folded that map away: output
    + shape), the "probs" SOFTMAX once, MEAN axis constants (one per rank, when the backbone has none) and the
    outputs "probs" + a, mu, logvar per tap. Exact for vector taps; a MEAN is shared with an identical one of
    the backbone or of another tap."""
    lo = {"tensors": 1 + 12 * n_taps, "operators": 1 + 4 * n_taps, "inputs": 0, "outputs": 1 + 3 * n_taps}
    hi = {"tensors": lo["tensors"] + 6 * n_taps + 2, "operators": lo["operators"] + 4 * n_taps, "inputs": 0,
          "outputs": lo["outputs"]}  # fmt: skip
    return lo, hi


def export_counts(snap_model, n_taps: int) -> dict[str, int]:
    """graph_counts of the graph `snapuq export` converts (ModelDir.export_model: logits, probs and each
    tap's a, mu, logvar) for this backbone + heads, by converting it once (int8, random calibration data).
    The heads' biases are made non-zero for the conversion as training leaves them (the converter drops an
    all-zero bias and shares equal constants, so untrained heads would count short), then restored."""
    from snapuq.nn import heads as S

    saved = [(lay, lay.get_weights()) for lay in S.head_layers(snap_model)]
    rng = np.random.default_rng(0)
    try:
        for lay, ws in saved:
            lay.set_weights([w + rng.uniform(0.01, 0.02, w.shape).astype(w.dtype) if w.ndim == 1 else w
                             for w in ws])  # fmt: skip
        em = ModelDir(Path("."), {"taps": [None] * n_taps}, snap_model).export_model()
        return graph_counts(_convert(em))
    finally:
        for lay, ws in saved:
            lay.set_weights(ws)


def check_capacity(backbone_tflite: bytes, snap_model, n_taps: int) -> dict[str, int]:
    """Refuse, before any training, a model the core cannot load once export has added the SNAP heads: the
    backbone's converted graph plus what the heads add (`head_count_bounds`; when the most they could add
    does not fit, the exact count of `export_counts`) against `core_limits()`. One line naming the limit and
    the count. Returns the counts known (exact, or the backbone's plus the heads' upper bound)."""
    lim = core_limits()
    base = graph_counts(backbone_tflite)
    lo, hi = head_count_bounds(n_taps)
    total = {k: base[k] + hi[k] for k in base}
    if any(total[k] > lim[_LIMIT_OF[k]] for k in total):
        total = export_counts(snap_model, n_taps)
    for k, n in total.items():
        if n > lim[_LIMIT_OF[k]]:
            name = _LIMIT_OF[k]
            raise UnsupportedModelError(
                f"with its SNAP heads ({n_taps} tap{'s' if n_taps != 1 else ''}) the int8 model has {n} {k} "
                f"(backbone {base[k]} + heads {n - base[k]}), more than the core's {name} = {lim[name]}: "
                f"use fewer taps (taps=...), or a core built with a larger {name}"
            )
    return total


def check_converted_ops(model, heads: tuple[Any, int] | None = None) -> list[str]:
    """Convert once (int8, random calibration data) and refuse operators outside CORE_OPS, naming the Keras
    layer the operator came from; with `heads` = (SNAP model, number of taps), refuse a model that exceeds
    the core's capacities with its heads (`check_capacity`); then load the result into the C core itself
    (when a host compiler is available), which rejects parameters it does not implement. Returns the sorted
    operator names."""
    tfl = _convert(model)
    ops = tflite_ops(tfl)
    names = sorted((lay.name for lay in model.layers), key=len, reverse=True)
    for op, tname in ops:
        if op not in CORE_OPS:
            lay = next((n for n in names if n in tname), None)
            where = f"layer '{lay}'" if lay else f"tensor '{tname}'"
            raise UnsupportedModelError(f"{where} converts to {op}, which the int8 core does not implement")
    if heads is not None:
        check_capacity(tfl, *heads)

    try:
        CoreModel(tfl).close()
    except CCoreError:
        pass  # no host C compiler: the operator list above is the check
    except SnapuqError as e:
        raise UnsupportedModelError(f"the int8 core rejects the converted model: {e}") from None
    return sorted({op for op, _ in ops})
