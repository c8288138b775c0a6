"""Type stubs for the MicroPython module ``snapuq`` (C user module and pure-MicroPython twin).

Both implementations expose this API and return identical integers (the fixed-point SNAP path
of docs/FIXED_POINT.md over the TFLite Micro int8 arithmetic). Values named ``*_q16`` are Q16
integers (v / 65536); the float fields are those integers divided by 65536.

Every public name here exists in both implementations, except those marked "twin only";
tests/host/test_twin_parity.py checks this file against modsnapuq.c's tables and the twin.
"""

from typing import Final, Iterable, Iterator, Literal, NamedTuple, Sequence, Union

IMPLEMENTATION: Literal["c", "python"]  # "c" (user C module) or "python" (twin)
SPEC_VERSION: Final = 3  # docs/FIXED_POINT.md version the scorer implements (SNAPUQ_SNAP_SPEC_VERSION)

Input = Union[bytes, bytearray, memoryview, "array", Sequence[float]]
"""int8 codes (len == Model.input_size; any 1-byte-item buffer is read as int8) or floats
(list/tuple/array('f'/'d')): raw readings, mapped by the model's recorded input normalization
(``Model.input_normalization``, in double) and quantized with the model's input scale and zero point
exactly as TFLite's AffineQuantize: roundf(x / scale) + zero_point, saturated to [-128, 127]."""


class Result(NamedTuple):
    pred: int                  # argmax of the int8 logits (lowest index on ties)
    u: float                   # U(x) in [0, 1]
    s: float                   # S(x), aggregated per-tap score
    ebar: tuple[float, ...]    # per-tap mean surprisal ebar_l
    flag: bool                 # U >= the model's decision threshold
    u_q16: int                 # U16, 0..65536
    z_q16: int                 # logistic input Z16, |Z16| < 2**20 (0 with the p_err + alarm form)
    s_q16: int                 # S16
    f_q16: int                 # F16: S feature of the logistic (hinge-transformed S, or S)
    m_q16: int                 # m16: confidence proxy m(x), 0..65536
    ebar_q16: tuple[int, ...]  # ebar16 per tap
    tap_q16: tuple[int, ...]   # s16 per tap (standardized per-tap score)
    p_err: float               # calibrated P(prediction wrong), a function of m(x) (= u for v1 manifests)
    alarm: float               # surprisal alarm F / (F + k), 0 while S <= q (0 for v1 manifests)
    p_q16: int                 # P16, 0..65536
    a_q16: int                 # A16, 0..65535


class Monitor:
    """Drift monitor on U16: sliding-window mean plus a one-sided CUSUM (all Q16 integers)."""
    window: int
    threshold: int
    cusum_ref: int
    cusum_h: int
    cusum: int
    count: int
    n_seen: int
    first_alarm: int  # 1-based index of the first alarmed push; 0 = none yet
    mean: float       # current window mean of U

    def __init__(self, window: int = 100, threshold: int = 32768, cusum_ref: int = 16384,
                 cusum_h: int = 327680) -> None: ...
    def push(self, u: Union[Result, int]) -> int:
        """Alarm bits: 1 = window full and mean(U) >= threshold, 2 = CUSUM >= cusum_h."""
    def reset(self) -> None: ...


class Calibrator:
    """Logistic fit of U = sigmoid(b0 + b1 S' + b2 m) over the newest ``capacity`` samples."""
    count: int
    capacity: int

    def __init__(self, capacity: int = 256, *, nonneg: bool = True, l2: float = 1e-3,
                 max_iter: int = 25, tol: float = 1e-5) -> None: ...
    def push(self, s: float, m: float, wrong: bool) -> None: ...
    def add(self, result: Result, label: int) -> None:
        """Add a scored input; positive (wrong) when result.pred != label."""
    def solve(self) -> tuple[tuple[float, float, float], int]:
        """((b0, b1, b2), Newton steps); ValueError without >= 2 samples of each label or
        without convergence."""


class Model:
    """An exported snapuq model: ``Model(blob_or_path)`` (docs/BLOB.md; the twin also takes
    ``Model(tflite, manifest)``).

    ``model``: bytes-like .snapuq blob, a ROMFS file or a path. ``bytes`` and ROMFS files are used
    in place; a bytearray or other writable buffer is copied at load (changing it later changes
    nothing). Raises ValueError for corrupt or inconsistent models (one line naming the problem),
    TypeError for inputs that are not int8 bytes / arrays / float lists (a str included), OSError
    for unreadable files. NaN inputs quantize to the zero point, +-inf saturate (C module, twin and the generated
    snapuq_model_quantize_input alike).
    """
    input_shape: tuple[int, ...]
    input_scale: float
    input_zero_point: int
    input_size: int
    # the recorded input normalization (blob SNAP section v3): ((scale per channel), (offset per channel)),
    # applied to float inputs as x * scale[i % C] + offset[i % C] in double before the quantization;
    # None when the model has none (float inputs are then the model's own inputs)
    input_normalization: tuple[tuple[float, ...], tuple[float, ...]] | None
    n_classes: int
    class_names: tuple[str, ...]
    taps: tuple[tuple[str, int], ...]  # (name, d) per tap
    outputs: tuple[str, ...]           # manifest output names, in model output order
    arena_bytes: int                   # C: exact arena of the runtime; twin: lifetime estimate
    kernels: str                       # "ref", "dsp" or "python"
    # sha256 (64 hex digits) of the blob's SNAP section: what the firmware reports as `profile`
    # snap_sha256=... and snapuq.micropython.snap_sha256(manifest) gives on the host; the twin gives None
    # for Model(tflite, manifest)
    snap_sha256: str | None
    manifest: dict                     # twin only: the manifest (as read from the blob's SNAP section)
    beta: tuple[float, float, float]   # settable
    u_threshold: float

    def __init__(self, model: Union[bytes, bytearray, memoryview, str],
                 manifest: Union[dict, str, bytes, None] = None) -> None: ...
    def infer(self, x: Input) -> Result: ...
    def run(self, x: Input) -> dict[str, bytes]:
        """Model only: int8 codes of every manifest output (no SNAP scoring)."""
    def output(self, name: str) -> bytes:
        """int8 codes of output ``name`` from the last infer()/run()."""
    def quantize(self, x: Sequence[float]) -> bytearray:
        """int8 codes of raw float readings: the input normalization (if any), then TFLite's
        AffineQuantize; NaN -> the zero point, +-inf saturate."""
    def set_beta(self, beta: Sequence[float]) -> None: ...
    def calibrate(self, xs: Iterable[Input], labels: Iterable[int], capacity: int = 256, *,
                  nonneg: bool = True, l2: float = 1e-3, max_iter: int = 25, tol: float = 1e-5,
                  apply: bool = True) -> tuple[tuple[float, float, float], int]:
        """Score labelled inputs, refit beta on the device and (apply=True) use it."""
    def calibrator(self, capacity: int = 256, *, nonneg: bool = True, l2: float = 1e-3,
                   max_iter: int = 25, tol: float = 1e-5) -> Calibrator: ...
    def monitor(self, window: int = 100, threshold: Union[float, None] = None,
                cusum_ref: Union[float, None] = None, cusum_h: Union[float, None] = None) -> Monitor:
        """Thresholds as U floats; defaults u*, u*/2 and 10 u* (u* = u_threshold)."""
    def stream(self, xs: Iterable[Input], monitor: Union[Monitor, None] = None) -> Iterator[tuple[Result, int]]:
        """(Result, alarm bits) per input through a drift monitor (default: self.monitor())."""
