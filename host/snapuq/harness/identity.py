"""Refuse a firmware that runs another model than --model."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from snapuq.errors import SnapuqError
from snapuq.export.cgen import header_snap_sha256
from snapuq.modeldir import ModelPaths
from snapuq.native.blob import snap_sha256


class ModelMismatchError(SnapuqError):
    """The firmware runs another model than --model (a user error, not a device fault)."""


def check_model_identity(prof: dict[str, Any], tflite: bytes, model_dir: Path,
                         manifest: dict[str, Any] | None = None) -> None:
    """Refuse a firmware built for another model: the firmware reports the sha256 of the flatbuffer
    it runs (`profile` model_sha256=...), the host hashes --model's model_int8.tflite; with `manifest`
    (--model's snapuq.json), a SNAP build also the sha256 of the SNAP constants it scores with (snap_sha256:
    SNAPUQ_MODEL_SNAP_SHA256 of the snapuq_model.h it was built from, or an uploaded blob's section), so a
    firmware built from another export of the same flatbuffer (before a `snapuq calibrate`) is refused too."""
    host_sha = hashlib.sha256(tflite).hexdigest()
    dev_sha = str(prof.get("model_sha256", ""))
    dev_name = prof.get("model", "?")
    if not dev_sha:
        raise ModelMismatchError(
            f"the firmware (model '{dev_name}') does not report its model's sha256: rebuild and flash it "
            f"from this checkout for --model {model_dir} (sha256 {host_sha[:16]})")
    if dev_sha != host_sha:
        raise ModelMismatchError(
            f"the firmware runs model '{dev_name}' (sha256 {dev_sha[:16]}) but --model {model_dir} is "
            f"sha256 {host_sha[:16]}: build and flash the firmware for it "
            "(platformio.ini custom_snapuq_model, or make -C firmware MODEL=...)")
    if manifest is not None and int(prof.get("snap") or 0) and int(prof.get("snap_ok", 1) or 0):
        check_snap_identity(prof, manifest, model_dir)


def check_snap_identity(prof: dict[str, Any], manifest: dict[str, Any], model_dir: Path) -> None:
    host = snap_sha256(manifest)
    dev = str(prof.get("snap_sha256") or "")
    rebuild = f"rebuild and flash it from {ModelPaths(model_dir).c_source} (make -C firmware MODEL=...)"
    if dev and dev != host:
        raise ModelMismatchError(
            f"the firmware scores with other SNAP constants (sha256 {dev[:16]}) than --model {model_dir} "
            f"(snapuq.json: {host[:16]}): it was built from another export of this model (before a "
            f"`snapuq calibrate`?); {rebuild}")
    hdr = ModelPaths(model_dir).c_header
    if not dev and header_snap_sha256(hdr) is not None:
        raise ModelMismatchError(
            f"the firmware (model '{prof.get('model', '?')}') does not report the sha256 of its SNAP "
            f"constants and {hdr} defines them: it was built from an older snapuq_model.h; {rebuild}")
    # neither the firmware nor the generated C says (both from before the check): nothing to compare

