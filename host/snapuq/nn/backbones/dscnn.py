"""DS-CNN for keyword spotting: the MLPerf Tiny KWS reference shape (ds_cnn "small"; 12 classes there).

    input (49, 10, 1) MFCC
    conv0   Conv2D 64, kernel (10, 4), stride (2, 2), same -> bn0 -> relu0 -> drop0 (0.2)     (25, 5, 64)
    4 x [dw{i} DepthwiseConv2D 3x3 same -> dwbn{i} -> dwrelu{i} -> pw{i} Conv2D 64 1x1 -> pwbn{i} -> block{i}]
    drop_final (0.4) -> feat GlobalAveragePooling2D (the penultimate features, 64) -> logits Dense(n_classes)

Only int8-deployable TFLite ops after conversion (BN folds into the convolutions): CONV_2D, DEPTHWISE_CONV_2D,
MEAN (or AVERAGE_POOL_2D), FULLY_CONNECTED (+ RESHAPE). Activations are the last layer of each block and are
named `relu0`, `block1` .. `block4`: those are the feature maps SNAP taps read (`TAP_LAYERS`); every Dropout
is named "drop*" (MC dropout turns them on).
"""

from __future__ import annotations

import keras
from keras import layers

# Layer naming contract (as nn/backbones/cnn.py): block outputs shallow to deep are the candidate SNAP taps,
# TAP_PREV[name] is the layer whose output is the tap's predecessor activation a_{l-1}; the default taps are a
# middle block and the last block (the paper's best: mid + penultimate).
TAP_LAYERS = ["relu0", "block1", "block2", "block3", "block4"]
TAP_PREV = {"block1": "relu0", "block2": "block1", "block3": "block2", "block4": "block3"}
DEFAULT_TAPS = ["block2", "block4"]


def build_dscnn(
    input_shape=(49, 10, 1),
    n_classes: int = 10,
    filters: int = 64,
    blocks: int = 4,
    dropout: float = 0.2,
    final_dropout: float = 0.4,
    weight_decay: float = 1e-4,
    bn_momentum: float = 0.9,
    name: str = "dscnn",
    **_kw,
) -> keras.Model:
    """MLPerf Tiny DS-CNN. Returns a functional model with output `logits` (no softmax: callers add it).
    BN momentum 0.9 (not Keras' 0.99): the raw MFCC input has a large range and short trainings need the
    moving statistics to settle within a few epochs."""
    reg = keras.regularizers.l2(weight_decay) if weight_decay else None
    inp = keras.Input(shape=tuple(input_shape), name="input")
    x = layers.Conv2D(
        filters, (10, 4), strides=(2, 2), padding="same", use_bias=False, kernel_regularizer=reg, name="conv0"
    )(inp)
    x = layers.BatchNormalization(momentum=bn_momentum, name="bn0")(x)
    x = layers.ReLU(name="relu0")(x)
    x = layers.Dropout(dropout, name="drop0")(x)
    for i in range(1, blocks + 1):
        x = layers.DepthwiseConv2D(
            (3, 3), padding="same", use_bias=False, depthwise_regularizer=reg, name=f"dw{i}"
        )(x)
        x = layers.BatchNormalization(momentum=bn_momentum, name=f"dwbn{i}")(x)
        x = layers.ReLU(name=f"dwrelu{i}")(x)
        x = layers.Conv2D(
            filters, (1, 1), padding="same", use_bias=False, kernel_regularizer=reg, name=f"pw{i}"
        )(x)
        x = layers.BatchNormalization(momentum=bn_momentum, name=f"pwbn{i}")(x)
        x = layers.ReLU(name=f"block{i}")(x)
    x = layers.Dropout(final_dropout, name="drop_final")(x)
    x = layers.GlobalAveragePooling2D(name="feat")(x)
    out = layers.Dense(n_classes, kernel_regularizer=reg, name="logits")(x)
    return keras.Model(inp, out, name=name)
