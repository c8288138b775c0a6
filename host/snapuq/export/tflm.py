"""The TFLM oracle: a thin wrapper around the pip `tflite-micro` Python interpreter.

TFLM's reference kernels are what the firmware's integer arithmetic must equal, so tests and
`snapuq verify` compare the numpy reference (and the C core) with this interpreter element by
element. `arena_bytes()` measures the smallest tensor arena TFLM accepts for a model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snapuq.errors import ModelFormatError
from snapuq.io import captured_output


class TFLMError(ModelFormatError):
    """The TFLM interpreter refused the model or the input."""


def _runtime():
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError as e:  # pragma: no cover - the package is a declared dependency
        raise TFLMError(f"the tflite-micro package is not installed ({e})") from None
    return runtime


class TFLMInterpreter:
    """`TFLMInterpreter(tflite_bytes).invoke(x)` -> list of output arrays in output order."""

    def __init__(
        self, tflite_bytes: bytes, arena_size: int | None = None, preserve_all: bool = False
    ) -> None:
        rt = _runtime()
        cfg = (
            rt.InterpreterConfig.kPreserveAllTensors
            if preserve_all
            else rt.InterpreterConfig.kAllocationRecording
        )
        size = arena_size if arena_size is not None else max(64 * 1024, 16 * len(tflite_bytes))
        try:
            with captured_output(log_failure=False):  # TFLM prints its failures
                # (sic) the keyword is spelled `intrepreter_config` by the package
                self._ip = rt.Interpreter.from_bytes(
                    bytes(tflite_bytes), arena_size=size, intrepreter_config=cfg
                )
        except (RuntimeError, ValueError) as e:
            raise TFLMError(
                f"TFLM could not load the model: {str(e).strip().splitlines()[-1] if str(e).strip() else e}"
            ) from None
        self.n_outputs = 0
        with captured_output(log_failure=False):
            while self.n_outputs < 1024:
                try:
                    self._ip.get_output_details(self.n_outputs)
                except (RuntimeError, ValueError, IndexError):
                    break
                self.n_outputs += 1

    def input_details(self) -> dict[str, Any]:
        return self._ip.get_input_details(0)

    def output_details(self, i: int) -> dict[str, Any]:
        return self._ip.get_output_details(i)

    def invoke(self, x: np.ndarray) -> list[np.ndarray]:
        det = self.input_details()
        x = np.asarray(x, dtype=det["dtype"]).reshape(det["shape"])
        try:
            self._ip.set_input(x, 0)
            with captured_output(log_failure=False):
                self._ip.invoke()
        except (RuntimeError, ValueError) as e:
            raise TFLMError(f"TFLM invoke failed: {e}") from None
        return [np.array(self._ip.get_output(i)) for i in range(self.n_outputs)]

    def tensor(self, index: int) -> np.ndarray:
        """An intermediate tensor (only with preserve_all=True)."""
        return np.array(self._ip.GetTensor(index, 0))

    def reset(self) -> None:
        self._ip.reset()


def arena_bytes(tflite_bytes: bytes, x: np.ndarray | None = None, granularity: int = 16) -> int:
    """Smallest arena size (bytes, rounded up to `granularity`) with which TFLM loads the model
    and runs one inference; found by bisection."""

    def ok(size: int) -> bool:
        try:
            ip = TFLMInterpreter(tflite_bytes, arena_size=size)
            if x is not None:
                ip.invoke(x)
            else:
                det = ip.input_details()
                ip.invoke(np.zeros(det["shape"], dtype=det["dtype"]))
        except TFLMError:
            return False
        return True

    hi = max(4096, 4 * len(tflite_bytes))
    while not ok(hi):
        hi *= 2
        if hi > 1 << 30:
            raise TFLMError("TFLM needs more than 1 GiB of arena")
    lo = 0
    while hi - lo > granularity:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
