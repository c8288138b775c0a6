"""snapuq: single-pass uncertainty (SNAP-UQ) for TinyML, from Keras training to int8 firmware."""

__version__ = "0.1.0"
