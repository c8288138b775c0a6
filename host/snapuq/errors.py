"""Error types shared across snapuq. The CLI turns every SnapuqError into a one-line message."""


class SnapuqError(Exception):
    """Base class: a problem the user can fix (bad path, bad file, bad argument)."""


class DatasetError(SnapuqError):
    """A dataset is missing or malformed (message names the path and the expected files)."""


class ModelFormatError(SnapuqError):
    """A .tflite / manifest / model directory is corrupt, truncated or inconsistent."""


class UnsupportedOpError(ModelFormatError):
    """A model uses an operator outside the supported int8 subset."""


class DeviceError(SnapuqError):
    """The serial device did not answer as the protocol says."""
