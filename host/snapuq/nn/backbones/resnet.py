"""MLPerf Tiny ResNet-8 (image classification, CIFAR-10): a 16-filter stem and three residual stacks of
16 / 32 / 64 filters (stride 1, 2, 2), each two 3x3 conv + BN + ReLU with an ADD skip (1x1 conv projection
when the shape changes), global average pooling and a Dense classifier. BN folds into the convolutions at
conversion, so the int8 op set is CONV_2D, ADD, MEAN, FULLY_CONNECTED.

Naming contract as in models/cnn.py: "relu{i}" are the block outputs (relu0 = stem, relu1..3 = the stacks
after the ADD), `TAP_PREV` maps a tap to its predecessor, "feat" / "drop0" / "logits" end the network.
"""

from __future__ import annotations

TAP_LAYERS = ["relu0", "relu1", "relu2", "relu3"]
TAP_PREV = {"relu1": "relu0", "relu2": "relu1", "relu3": "relu2"}
DEFAULT_TAPS = ["relu2", "relu3"]  # mid + penultimate stack


def build_resnet8(input_shape, n_classes: int, feat_dim: int = 64, dropout: float = 0.2, **_kw):
    import keras
    from keras import layers

    reg = keras.regularizers.l2(1e-4)

    def conv_bn(x, f, stride, name, relu=True):
        x = layers.Conv2D(f, 3, strides=stride, padding="same", kernel_regularizer=reg, name=f"{name}_conv")(
            x
        )
        x = layers.BatchNormalization(name=f"{name}_bn")(x)
        return layers.ReLU(name=f"{name}_relu")(x) if relu else x

    x_in = keras.Input(shape=tuple(input_shape), name="x")
    x = layers.Conv2D(16, 3, padding="same", kernel_regularizer=reg, name="conv0")(x_in)
    x = layers.BatchNormalization(name="bn0")(x)
    x = layers.ReLU(name="relu0")(x)
    for i, (f, s) in enumerate([(16, 1), (32, 2), (64, 2)], start=1):
        y = conv_bn(x, f, s, f"s{i}a")
        y = conv_bn(y, f, 1, f"s{i}b", relu=False)
        if s != 1 or int(x.shape[-1]) != f:
            x = layers.Conv2D(f, 1, strides=s, kernel_regularizer=reg, name=f"s{i}_proj")(x)
        x = layers.Add(name=f"s{i}_add")([x, y])
        x = layers.ReLU(name=f"relu{i}")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(feat_dim, activation="relu", name="feat")(x)
    x = layers.Dropout(dropout, name="drop0")(x)
    logits = layers.Dense(n_classes, name="logits")(x)
    return keras.Model(x_in, logits, name="resnet8")
