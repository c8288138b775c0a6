"""Three models the project did not write for itself (as a user would), and their data written as a user
would have it: a 1-D conv sensor model (with a Concatenate and a standalone ReLU6) on the generated
accelerometer set, a functional image model with BatchNorm, ReLU6, a residual Add, average pooling and
Flatten on the 8x8 digits (as a folder of PNGs), and a plain MLP on flattened digits (as an .npz)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def sensor_cnn(n_classes: int = 4):
    import keras
    from keras import layers

    i = keras.Input((64, 3), name="accel")
    x = layers.Conv1D(12, 5, padding="same", name="c1")(i)
    x = layers.BatchNormalization(momentum=0.9, name="bn1")(x)
    x = layers.ReLU(name="r1")(x)
    x = layers.MaxPooling1D(2, name="p1")(x)
    x = layers.Conv1D(16, 3, padding="same", activation="relu", name="c2")(x)
    y = layers.Conv1D(8, 3, padding="same", activation="relu", name="c2b")(x)
    x = layers.Concatenate(name="cat")([x, y])  # CONCATENATION in the core
    x = layers.ReLU(6.0, name="cat_relu6")(x)  # standalone: nothing to fuse into (exported as RELU)
    x = layers.AveragePooling1D(2, name="p2")(x)
    x = layers.Conv1D(24, 3, padding="same", activation="relu", name="c3")(x)
    x = layers.GlobalAveragePooling1D(name="gap")(x)
    x = layers.Dropout(0.2, name="do")(x)
    o = layers.Dense(n_classes, activation="softmax", name="out")(x)
    return keras.Model(i, o, name="har_cnn")


def binary_sensor_cnn(separate: bool = False):
    """A binary detector as Keras users write it: one sigmoid unit (Dense(1, activation='sigmoid'), or with
    `separate` a linear Dense(1) and an Activation('sigmoid') layer), trained with binary cross-entropy."""
    import keras
    from keras import layers

    i = keras.Input((64, 3), name="accel")
    x = layers.Conv1D(8, 5, padding="same", activation="relu", name="c1")(i)
    x = layers.MaxPooling1D(2, name="p1")(x)
    x = layers.Conv1D(12, 3, padding="same", activation="relu", name="c2")(x)
    x = layers.Conv1D(16, 3, padding="same", activation="relu", name="c3")(x)
    x = layers.GlobalAveragePooling1D(name="gap")(x)
    if separate:
        o = layers.Activation("sigmoid", name="prob")(layers.Dense(1, name="score")(x))
    else:
        o = layers.Dense(1, activation="sigmoid", name="prob")(x)
    return keras.Model(i, o, name="motion_detector")


def fit_binary_model(model, x, y, epochs: int = 8, batch_size: int = 32) -> None:
    import keras

    keras.utils.set_random_seed(0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(x, y.astype(np.float32), epochs=epochs, batch_size=batch_size, verbose=0)


def residual_image(n_classes: int = 10, shape=(8, 8, 1), rescale: bool = False):
    """rescale: the model takes raw 0..255 pixels and starts with Rescaling(1/255), as Keras' image
    tutorials write it."""
    import keras
    from keras import layers

    i = keras.Input(shape, name="img")
    x = layers.Rescaling(1.0 / 255.0, name="rescale")(i) if rescale else i
    x = layers.Conv2D(12, 3, padding="same", use_bias=False, name="stem")(x)
    x = layers.BatchNormalization(momentum=0.9, name="stem_bn")(x)
    x = layers.ReLU(6.0, name="stem_relu")(x)  # ReLU6, fused into the convolution
    y = layers.Conv2D(12, 3, padding="same", name="b_conv1")(x)
    y = layers.BatchNormalization(momentum=0.9, name="b_bn1")(y)
    y = layers.ReLU(name="b_relu1")(y)
    y = layers.Conv2D(12, 3, padding="same", name="b_conv2")(y)
    y = layers.BatchNormalization(momentum=0.9, name="b_bn2")(y)
    x = layers.Add(name="b_add")([x, y])
    x = layers.ReLU(name="b_out")(x)
    x = layers.MaxPooling2D(2, name="pool")(x)
    x = layers.Conv2D(24, 3, padding="same", activation="relu", name="head_conv")(x)
    x = layers.AveragePooling2D(2, name="avg")(x)
    x = layers.Flatten(name="flat")(x)
    o = layers.Dense(n_classes, name="logits")(x)
    return keras.Model(i, o, name="res_img")


def mlp(n_in: int = 64, n_classes: int = 10):
    import keras
    from keras import layers

    return keras.Sequential(
        [keras.Input((n_in,)), layers.Dense(48, activation="relu"), layers.Dropout(0.1),
         layers.Dense(32), layers.ReLU(), layers.Dense(n_classes), layers.Softmax()],
        name="mlp",
    )  # fmt: skip


def fit_user_model(model, x, y, epochs: int = 8, batch_size: int = 32) -> None:
    """What the user did before: train their model with plain Keras."""
    import keras

    keras.utils.set_random_seed(0)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=model.layers[-1].name == "logits")
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=loss, metrics=["accuracy"])
    model.fit(x, y, epochs=epochs, batch_size=batch_size, verbose=0)


def write_png_folder(root: Path, x: np.ndarray, y: np.ndarray, names: list[str]) -> Path:
    """x (N, H, W, 1) in [0, 1] -> ROOT/<class>/<i>.png (8-bit grayscale)."""
    from PIL import Image

    for c in names:
        (root / c).mkdir(parents=True, exist_ok=True)
    for i, (img, lab) in enumerate(zip(x, y)):
        Image.fromarray(np.round(img[..., 0] * 255).astype(np.uint8), "L").save(
            root / names[lab] / f"{i}.png"
        )
    return root


def digits_npz(path: Path, flat: bool = True) -> Path:
    from snapuq.data import load_dataset

    ds = load_dataset("digits", seed=0)
    f = (lambda a: a.reshape(len(a), -1)) if flat else (lambda a: a)
    np.savez(path, x_train=f(ds.x_train), y_train=ds.y_train, x_test=f(ds.x_test), y_test=ds.y_test,
             x_dev=f(ds.x_dev), y_dev=ds.y_dev, class_names=np.asarray(ds.class_names))  # fmt: skip
    return path
