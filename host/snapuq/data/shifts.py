"""The corruptions of a dataset chosen by its modality: (names, corrupt(x, idx, name, severity, seed)) for
snapuq eval and the harness (image, audio and sensor sets)."""

from __future__ import annotations

from snapuq.data import corruptions as C
from snapuq.data import corruptions_audio as A
from snapuq.data import corruptions_sensor as CS


def corruption_api(ds):
    """(names, corrupt(x, idx, name, severity, seed)) for a dataset, chosen by modality: the sensor
    corruptions of snapuq.data.corruptions_sensor for 1-D windows / vectors of your own data, the image
    corruptions of snapuq.data.corruptions, or for audio datasets (raw test waves kept in ds.meta) the
    waveform corruptions of snapuq.data.corruptions_audio turned into features."""
    modality = (getattr(ds, "meta", None) or {}).get("modality")
    if modality in ("sensor", "vector"):  # your own 1-D data: Sensor-C

        def apply_sensor(x, idx, name, severity, seed):
            return CS.corrupt_sensor(x, name, severity, seed=seed)

        return CS.sensor_corruption_names(), apply_sensor
    if (getattr(ds, "meta", None) or {}).get("waves"):
        def apply_audio(x, idx, name, severity, seed):
            return A.corrupted_features(ds, name, severity, seed=seed, split="test", idx=idx)

        return A.audio_corruption_names(), apply_audio

    def apply_image(x, idx, name, severity, seed):
        return C.corrupt(x, name, severity=severity, seed=seed)

    if modality == "image":  # your own images: the MNIST-C or CIFAR-10-C set
        return list(C.CIFAR10_C if ds.input_shape[-1] == 3 else C.MNIST_C), apply_image
    return C.corruption_names(ds.name), apply_image
