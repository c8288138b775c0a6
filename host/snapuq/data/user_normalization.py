"""The normalization records of your own data (snapuq.data.user): x_model = x_raw * scale + offset."""

from __future__ import annotations

from typing import Any

import numpy as np

from snapuq.data.dataset import SPLITS, Dataset
from snapuq.errors import DatasetError

NORMALIZE = ("auto", "none", "standard")


def _normalization(x_train: np.ndarray, raw_dtype: np.dtype, mode: str) -> dict[str, Any]:
    if mode not in NORMALIZE:
        raise DatasetError(f"unknown normalisation '{mode}' (known: {', '.join(NORMALIZE)})")
    c = int(x_train.shape[-1]) if x_train.ndim >= 2 else 1
    if mode == "standard":
        axes = tuple(range(x_train.ndim - 1)) if x_train.ndim >= 2 else (0,)
        mean = x_train.astype(np.float64).mean(axis=axes).reshape(-1)
        std = x_train.astype(np.float64).std(axis=axes).reshape(-1)
        std = np.where(std > 1e-12, std, 1.0)
        return {
            "kind": "standard",
            "scale": (1.0 / std).tolist(),
            "offset": (-mean / std).tolist(),
            "formula": "x_model = x_raw * scale[c] + offset[c] (per channel c, last axis)",
        }
    if mode == "auto" and np.issubdtype(raw_dtype, np.integer):
        return {"kind": "scale", "scale": [1.0 / 255.0] * c, "offset": [0.0] * c,
                "formula": "x_model = x_raw / 255"}  # fmt: skip
    return {"kind": "none", "scale": [1.0] * c, "offset": [0.0] * c, "formula": "x_model = x_raw"}


def normalization_channels(norm: dict[str, Any] | None, shape) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, offset) of a normalization record as they broadcast over inputs of `shape` (batch axis
    first): one value, or one per channel of the last axis; (N, F) vectors take a longer record's first
    value (one channel). None when there is no normalization. The host's data path (`apply_normalization`)
    and the generated device quantizer (snapuq.export.cgen) both read a record through this."""
    if not norm or norm.get("kind", "none") == "none":
        return None
    s = np.asarray(norm["scale"], np.float64).reshape(-1)
    o = np.asarray(norm["offset"], np.float64).reshape(-1)
    if len(shape) == 2 and len(s) > 1 and shape[-1] != len(s):  # (N, F) vectors: one channel
        s, o = s[:1], o[:1]
    return s, o


def apply_normalization(x: np.ndarray, norm: dict[str, Any]) -> np.ndarray:
    """x_model = x_raw * scale + offset (per channel, last axis; one value broadcasts)."""
    x = np.asarray(x, np.float64)
    so = normalization_channels(norm, x.shape)
    if so is None:
        return x.astype(np.float32)
    return (x * so[0] + so[1]).astype(np.float32)


def compose_normalization(first: dict[str, Any] | None, then: dict[str, Any]) -> dict[str, Any]:
    """One record for x -> then(first(x)): scale = s1 s2, offset = o1 s2 + o2 (per channel)."""
    if not first or first.get("kind", "none") == "none":
        return dict(then)
    s1, o1 = (np.asarray(first[k], np.float64) for k in ("scale", "offset"))
    s2, o2 = (np.asarray(then[k], np.float64) for k in ("scale", "offset"))
    if len(s1) != len(s2) and 1 not in (len(s1), len(s2)):
        raise DatasetError(f"normalization: {len(s1)} and {len(s2)} channels do not compose")
    return {**then, "kind": f"{first.get('kind')}+{then.get('kind')}", "scale": (s1 * s2).tolist(),
            "offset": (o1 * s2 + o2).tolist(),
            "formula": f"{first.get('formula', '')}; then {then.get('formula', '')}"}  # fmt: skip


def with_preprocessing(ds: Dataset, pre: dict[str, Any]) -> Dataset:
    """The dataset as a model without its leading Rescaling / Normalization (`snapuq.api.
    fold_input_preprocessing`) takes it: every x split mapped by `pre`, and the recorded normalization
    (raw reading -> model input) composed with it."""
    from dataclasses import replace

    meta = dict(ds.meta or {})
    meta["normalization"] = compose_normalization(meta.get("normalization"), pre)
    meta["model_preprocessing"] = list(pre.get("layers", []))
    return replace(
        ds,
        **{f"x_{s}": apply_normalization(getattr(ds, f"x_{s}"), pre) for s in SPLITS},
        x_ood=None if ds.x_ood is None else apply_normalization(ds.x_ood, pre),
        meta=meta,
    )
