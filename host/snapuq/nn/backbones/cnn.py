"""The QUTE / SNAP-UQ 4-layer MNIST CNN, sized by the input resolution (8x8 digits, 28x28 MNIST).

Layer naming contract (used by the SNAP taps, early exits and MC dropout):
- conv blocks "conv{i}" followed by ReLU layers "relu{i}" (i = 0..3): `TAP_LAYERS`, shallow to deep;
- `TAP_PREV[name]` is the layer whose output is the tap's predecessor activation a_{l-1};
- "gap" (GlobalAveragePooling2D), "feat" (Dense + ReLU, the penultimate features), "drop0" (Dropout),
  "logits" (linear Dense).
Only int8-deployable ops: CONV_2D, MAX_POOL_2D, MEAN, FULLY_CONNECTED (ReLU fused).
"""

from __future__ import annotations

TAP_LAYERS = ["relu0", "relu1", "relu2", "relu3"]
TAP_PREV = {"relu1": "relu0", "relu2": "relu1", "relu3": "relu2"}
DEFAULT_TAPS = ["relu1", "relu3"]  # mid + penultimate conv block


def build_cnn4(
    input_shape, n_classes: int, width: int = 16, feat_dim: int = 64, dropout: float = 0.25, **_kw
):
    import keras
    from keras import layers

    h, w = int(input_shape[0]), int(input_shape[1])
    filters = [width, 2 * width, 4 * width, 4 * width]
    # pool after conv1 and conv2 while the map stays >= 2x2 (8x8 -> 4x4 -> 2x2; 28 -> 14 -> 7)
    x_in = keras.Input(shape=tuple(input_shape), name="x")
    x = x_in
    for i, f in enumerate(filters):
        x = layers.Conv2D(f, 3, padding="same", name=f"conv{i}")(x)
        x = layers.ReLU(name=f"relu{i}")(x)
        if i in (1, 2) and min(h, w) >= 4:
            x = layers.MaxPooling2D(2, name=f"pool{i}")(x)
            h, w = h // 2, w // 2
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(feat_dim, activation="relu", name="feat")(x)
    x = layers.Dropout(dropout, name="drop0")(x)
    logits = layers.Dense(n_classes, name="logits")(x)
    return keras.Model(x_in, logits, name="cnn4")
