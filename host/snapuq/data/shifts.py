"""The corruptions of a dataset chosen by its modality: (names, corrupt(x, idx, name, severity, seed)) for
snapuq eval and the harness (image, audio and sensor sets; the modules load on first use)."""

from __future__ import annotations

from snapuq.errors import SnapuqError


def corruption_api(ds):
    """(names, corrupt(x, idx, name, severity, seed)) for a dataset, chosen by modality: the sensor
    corruptions of snapuq.data.corruptions_sensor for 1-D windows / vectors of your own data, the image
    corruptions of snapuq.data.corruptions, or for audio datasets (raw test waves kept in ds.meta) the
    waveform corruptions of snapuq.data.corruptions_audio turned into features."""
    modality = (getattr(ds, "meta", None) or {}).get("modality")
    if modality in ("sensor", "vector"):  # your own 1-D data: Sensor-C
        from snapuq.data import corruptions_sensor as CS

        def apply_sensor(x, idx, name, severity, seed):
            return CS.corrupt_sensor(x, name, severity, seed=seed)

        return CS.sensor_corruption_names(), apply_sensor
    if modality == "image" and not (ds.meta or {}).get("waves"):  # your own images: MNIST-C / CIFAR-10-C sets
        from snapuq.data import corruptions as C

        cn = C.CIFAR10_C if ds.input_shape[-1] == 3 else C.MNIST_C

        def apply_image(x, idx, name, severity, seed):
            return C.corrupt(x, name, severity=severity, seed=seed)

        return list(cn), apply_image
    if (getattr(ds, "meta", None) or {}).get("waves"):
        from snapuq.data import corruptions_audio as A

        def apply_audio(x, idx, name, severity, seed):
            return A.corrupted_features(ds, name, severity, seed=seed, split="test", idx=idx)

        return A.audio_corruption_names(), apply_audio
    from snapuq.data import corruptions as C

    return _corruption_functions(C, ds.name)


def _corruption_functions(C, ds_name: str):
    """(names, corrupt(x, name, severity, seed)) from the corruptions module of snapuq.data."""
    names = None
    for attr in ("corruption_names",):
        fn = getattr(C, attr, None)
        if callable(fn):
            try:
                names = list(fn(ds_name))
            except TypeError:
                names = list(fn())
    if names is None:
        reg = getattr(C, "CORRUPTIONS", None)
        if reg is None:
            raise SnapuqError("snapuq.data.corruptions has no corruption registry")
        names = list(reg)
    corrupt = getattr(C, "corrupt", None)
    if not callable(corrupt):
        raise SnapuqError("snapuq.data.corruptions has no corrupt() function")

    def apply(x, idx, name, severity, seed):
        return corrupt(x, name, severity=severity, seed=seed)

    return names, apply
