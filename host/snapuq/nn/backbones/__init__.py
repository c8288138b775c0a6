"""Backbones. `build_backbone(name, input_shape, n_classes, **kw)` returns a Keras 3 functional model
built only from int8-deployable ops; each backbone lives in its own module and registers here."""

from __future__ import annotations

import importlib

from snapuq.errors import SnapuqError

# name -> "module:function"
BACKBONES: dict[str, str] = {
    "cnn4": "snapuq.nn.backbones.cnn:build_cnn4",  # QUTE/SNAP 4-layer MNIST CNN (digits too)
    "resnet8": "snapuq.nn.backbones.resnet:build_resnet8",  # MLPerf Tiny ResNet-8 (CIFAR-10)
    "dscnn": "snapuq.nn.backbones.dscnn:build_dscnn",  # MLPerf Tiny DS-CNN (keyword spotting)
}

# dataset -> default backbone
DEFAULT_BACKBONE: dict[str, str] = {
    "digits": "cnn4",
    "mnist": "cnn4",
    "fashion_mnist": "cnn4",
    "cifar10": "resnet8",
    "keywords": "dscnn",
    "keywords12": "dscnn",
    "speech_commands": "dscnn",
}


def backbone_module(name: str):
    """The module of a registered backbone (its builder, DEFAULT_TAPS, TAP_PREV, TAP_LAYERS)."""
    return importlib.import_module(BACKBONES[name].split(":")[0])


def build_backbone(name: str, input_shape, n_classes: int, **kw):
    if name not in BACKBONES:
        raise SnapuqError(f"unknown backbone '{name}' (known: {', '.join(sorted(BACKBONES))})")
    return getattr(backbone_module(name), BACKBONES[name].split(":")[1])(input_shape, n_classes, **kw)
