"""snapuq: single-pass uncertainty (SNAP-UQ) for TinyML, from Keras training to int8 firmware."""

__version__ = "0.1.0"

__all__ = ["Snap", "attach", "check_model"]


def __getattr__(name: str):
    """`snapuq.attach`, `snapuq.Snap`, `snapuq.check_model` (imported on first use: `snapuq --help` stays
    fast and TensorFlow loads only when needed)."""
    if name in __all__:
        from snapuq import api

        return getattr(api, name)
    raise AttributeError(f"module 'snapuq' has no attribute {name!r}")
