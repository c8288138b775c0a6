"""Stream a dataset split through a board, check each result against the host int8 reference,
write results.jsonl incrementally and summary.json (DESIGN §3 contract)."""

from __future__ import annotations

import hashlib
import math
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snapuq.errors import DeviceError, SnapuqError
from snapuq.harness.energy import board_power
from snapuq.harness.protocol import Device, DeviceReplyError, Reply, TransportError
from snapuq.harness.qemu import (
    QemuProcess,
    board_spec,
    build_firmware,
    open_serial,
)
from snapuq.harness.reference import HostReference
from snapuq.harness.results import (
    OutLock,
    ResultsWriter,
    RunView,
    check_resume,
    dropped_line,
    sha256_file,
    start_run,
)
from snapuq.io import check_out_dir, read_json, write_json
from snapuq.modeldir import ModelPaths

SNAP_FIELDS = ("pred", "ebar", "z", "s", "sf", "m", "u", "pe", "al", "flag")


@dataclass
class Options:
    port: str
    model: Path
    dataset: str
    split: str
    out: Path
    limit: int | None = None
    start: int = 0
    data_dir: str | None = None
    resume: bool = False
    retries: int = 5
    timeout: float = 20.0
    icount: bool = True
    baud: int = 115200
    check_outputs: bool = True
    build_dir: Path | None = None
    power: str | None = None
    power_vdd_mv: int = 3300  # --power: the supply the PPK2 (ampere meter) sits in series with
    progress: bool = True
    firmware: Path | None = None  # qemu: boot this ELF (e.g. from `pio run -e qemu_m4`) instead of make
    stop_after: int | None = None  # for tests: stop (as if killed) after this many new lines
    stream: bool = False  # stream a CID stream (clean / corrupted segments of the split) instead of the split
    severity: int = 3
    segment: int = 300


class Counter:
    """Turns device counter ticks into what they really are."""

    def __init__(self, profile: dict[str, Any], board: str, icount: bool):
        self.kind = str(profile.get("counter", "?"))
        self.hz = int(profile.get("counter_hz", 0)) or 1
        self.cpu_hz = int(profile.get("cpu_hz", 0)) or self.hz
        self.board = board
        self.qemu = self.kind.startswith("qemu")
        self.icount = icount and self.qemu
        if self.icount:
            self.unit = "qemu_instructions"
        elif self.qemu:
            self.unit = "qemu_virtual_ticks_25mhz_host_paced"
        elif self.kind == "host_ns":
            self.unit = "host_ns"
        else:
            self.unit = "cycles"

    def cycles(self, ticks: int) -> int:
        if self.icount:
            # -icount shift=0: 1 ns of virtual time per instruction, whatever the emulated SYSCLK
            return int(ticks) * 1_000_000_000 // self.hz
        if self.unit == "cycles":
            return int(round(int(ticks) * self.cpu_hz / self.hz))
        return int(ticks)

    def microseconds(self, cycles: float) -> tuple[float | None, str]:
        if self.unit == "cycles":
            return cycles / self.cpu_hz * 1e6, "measured"
        if self.icount:
            bp = board_power(self.board)
            if bp is not None:
                return cycles / bp.clock_hz * 1e6, (
                    f"model: QEMU instructions / {bp.clock_hz // 1_000_000} MHz of {bp.mcu}, "
                    "1 instruction per cycle")
            # an emulated part that stands for itself (qemu_stm32f405): its own emulated SYSCLK
            return cycles / self.cpu_hz * 1e6, (
                f"model: QEMU instructions / {self.cpu_hz // 1_000_000} MHz emulated SYSCLK, "
                "1 instruction per cycle")
        if self.unit == "host_ns":
            return cycles / 1000.0, "host wall time"
        return None, "not available (QEMU without -icount)"


def _load_split(opts: Options, seed: int) -> tuple[np.ndarray, np.ndarray, list[str] | None]:
    """The inputs to stream: the split itself, or (--stream) the CID stream built from it exactly as
    `snapuq eval` builds it (clean, c_1, clean, c_2, ...; every corruption of the dataset at one severity).
    Returns (x, y, per-frame segment name or None)."""
    from snapuq.data import load_dataset

    ds = load_dataset(opts.dataset, opts.data_dir, seed)
    if opts.split not in ("train", "dev", "test"):
        raise SnapuqError(f"unknown split '{opts.split}' (train, dev, test)")
    x = np.asarray(getattr(ds, f"x_{opts.split}"), np.float32)
    y = np.asarray(getattr(ds, f"y_{opts.split}"))
    seg = None
    if opts.stream:
        from snapuq.data.shifts import corruption_api
        from snapuq.uq import stream as S

        if not 1 <= opts.severity <= 5:
            raise SnapuqError(f"--severity must be in 1..5, got {opts.severity}")
        names, corrupt = corruption_api(ds)
        st = S.build_stream(x, y, names, corrupt, severity=opts.severity, seg_len=opts.segment,
                            clean_len=opts.segment, seed=seed)
        x, y = st.gather(x, st.x_corrupt), st.y
        seg = ["clean"] * len(st)
        for a, b, name in st.segments:
            seg[a:b] = [name] * (b - a)
    end = len(x) if opts.limit is None else min(len(x), opts.start + opts.limit)
    return x[opts.start:end], y[opts.start:end], (seg[opts.start:end] if seg is not None else None)


class ModelMismatchError(SnapuqError):
    """The firmware runs another model than --model (a user error, not a device fault)."""


def check_model_identity(prof: dict[str, Any], tflite: bytes, model_dir: Path,
                         manifest: dict[str, Any] | None = None) -> None:
    """Refuse a firmware built for another model: the firmware reports the sha256 of the flatbuffer
    it runs (`profile` model_sha256=...), the host hashes --model's model_int8.tflite; with `manifest`
    (--model's snapuq.json), a SNAP build also the sha256 of the SNAP constants it scores with (snap_sha256:
    SNAPUQ_MODEL_SNAP_SHA256 of the snapuq_model.h it was built from, or an uploaded blob's section), so a
    firmware built from another export of the same flatbuffer (before a `snapuq calibrate`) is refused too."""
    host_sha = hashlib.sha256(tflite).hexdigest()
    dev_sha = str(prof.get("model_sha256", ""))
    dev_name = prof.get("model", "?")
    if not dev_sha:
        raise ModelMismatchError(
            f"the firmware (model '{dev_name}') does not report its model's sha256: rebuild and flash it "
            f"from this checkout for --model {model_dir} (sha256 {host_sha[:16]})")
    if dev_sha != host_sha:
        raise ModelMismatchError(
            f"the firmware runs model '{dev_name}' (sha256 {dev_sha[:16]}) but --model {model_dir} is "
            f"sha256 {host_sha[:16]}: build and flash the firmware for it "
            "(platformio.ini custom_snapuq_model, or make -C firmware MODEL=...)")
    if manifest is not None and int(prof.get("snap") or 0) and int(prof.get("snap_ok", 1) or 0):
        check_snap_identity(prof, manifest, model_dir)


def check_snap_identity(prof: dict[str, Any], manifest: dict[str, Any], model_dir: Path) -> None:
    from snapuq.export.cgen import header_snap_sha256
    from snapuq.native.blob import snap_sha256

    host = snap_sha256(manifest)
    dev = str(prof.get("snap_sha256") or "")
    rebuild = f"rebuild and flash it from {ModelPaths(model_dir).c_source} (make -C firmware MODEL=...)"
    if dev and dev != host:
        raise ModelMismatchError(
            f"the firmware scores with other SNAP constants (sha256 {dev[:16]}) than --model {model_dir} "
            f"(snapuq.json: {host[:16]}): it was built from another export of this model (before a "
            f"`snapuq calibrate`?); {rebuild}")
    hdr = ModelPaths(model_dir).c_header
    if not dev and header_snap_sha256(hdr) is not None:
        raise ModelMismatchError(
            f"the firmware (model '{prof.get('model', '?')}') does not report the sha256 of its SNAP "
            f"constants and {hdr} defines them: it was built from an older snapuq_model.h; {rebuild}")
    # neither the firmware nor the generated C says (both from before the check): nothing to compare


def compare(host_outs: list[np.ndarray], host_snap: dict[str, Any], dev_outs: dict[int, list[int]] | None,
            dev_res: dict[str, Any]) -> list[str]:
    diff: list[str] = []
    for k in SNAP_FIELDS:
        if k not in host_snap:
            continue
        dv = dev_res.get(k)
        hv = host_snap[k]
        if isinstance(hv, list):
            dv = dv if isinstance(dv, list) else ([dv] if dv is not None else [])
        if dv != hv:
            diff.append(k)
    if dev_outs is not None:
        for idx, hv in enumerate(host_outs):
            if dev_outs.get(idx) != [int(v) for v in hv]:
                diff.append(f"output{idx}")
    return diff


class InputFailed(DeviceError):
    """One input got no clean reply within its retries."""


def _one(dev: Device, xq: bytes, opts: Options, ref: HostReference, xq_arr: np.ndarray,
         host: Any = None) -> tuple[dict, dict, dict[int, list[int]] | None, int, Any]:
    """One input with retries; the host reference runs while the device works. A damaged reply
    (TransportError), a timeout or an e- line (e.g. e-crc of a frame damaged on its way to the
    device) -> resync and send the same input again."""
    last: Exception | None = None
    for attempt in range(opts.retries + 1):
        try:
            cmds = dev.send_input(xq, opts.check_outputs)
            if host is None:
                host = ref.run(xq_arr)
            inf, res, outs = dev.receive_input(cmds, xq)
            return inf, res, outs, attempt, host
        except (TransportError, DeviceReplyError, DeviceError) as e:
            last = e
            dev.retry_log.append(f"{type(e).__name__}: {str(e)[:100]}")
            try:
                dev.sync()
            except DeviceError as e2:  # the sync itself was hit: the next attempt syncs again
                last = e2
                dev.retry_log.append(f"sync: {str(e2)[:100]}")
    raise InputFailed(f"input failed after {opts.retries + 1} attempts: {last}")


class ExchangeFailed(DeviceError):
    """A start or end command (profile, stats, model builtin) got no clean reply within its retries."""


def _exchange(dev: Device, opts: Options, what: str, fn: Any) -> Any:
    """A start / end command through the same retry and resync path as the inputs: a damaged or
    out-of-grammar reply (TransportError), a timeout or an e- line (the answer to a command damaged
    on its way, e.g. e-unknown-command) -> resync and ask again, up to --retries times."""
    last: Exception | None = None
    for _attempt in range(opts.retries + 1):
        try:
            return fn()
        except DeviceError as e:
            last = e
            dev.exchange_retries += 1
            try:
                dev.sync()
            except DeviceError as e2:  # the sync itself was hit: the next attempt syncs again
                last = e2
    raise ExchangeFailed(f"'{what}' got no clean reply after {opts.retries + 1} attempts: {last}")


def _builtin_reason(dev: Device) -> list[str]:
    """`model builtin` on a board without a model: the firmware's own reason (e-arena ...). A reply of
    another kind (the answer to a damaged command) is a transport fault, asked again."""
    rep: Reply = dev.command("model builtin", check=False)
    kinds = ("e-arena ", "e-model ", "e-no-model ", "e-blob ", "e-snap ")
    if any(not e.startswith(kinds) for e in rep.errors) \
            or not (rep.errors or any(ln.startswith("m-model-loaded") for ln in rep.lines)):
        raise TransportError(f"unexpected reply to 'model builtin': {rep.lines + rep.errors}")
    return rep.errors


def _checked(dev: Device, xq: bytes, opts: Options, ref: HostReference,
             xq_arr: np.ndarray) -> tuple[dict, dict, dict[int, list[int]] | None, int, Any, list[str]]:
    """An input's clean reply and its differences from the host. A difference is recorded only
    when a second clean reply to the same input says the same (the device is deterministic; two
    clean replies that disagree mean the command line was damaged: try again)."""
    inf, res, outs, retried, host = _one(dev, xq, opts, ref, xq_arr)
    diff = compare(host.outputs, host.snap, outs, res)
    for _ in range(opts.retries + 1):
        if not diff:
            break
        inf2, res2, outs2, r2, _h = _one(dev, xq, opts, ref, xq_arr, host)
        retried += 1 + r2
        if (res2, outs2) == (res, outs):
            break
        inf, res, outs = inf2, res2, outs2
        diff = compare(host.outputs, host.snap, outs, res)
    return inf, res, outs, retried, host, diff


def check_options(opts: Options) -> None:
    """Every numeric option in range, before any work."""
    if opts.limit is not None and opts.limit < 1:
        raise SnapuqError(f"--limit must be >= 1 (omit it for the whole split), got {opts.limit}")
    if opts.start < 0:
        raise SnapuqError(f"--start must be >= 0, got {opts.start}")
    if opts.retries < 0:
        raise SnapuqError(f"--retries must be >= 0, got {opts.retries}")
    if not (opts.timeout > 0 and math.isfinite(opts.timeout)):
        raise SnapuqError(f"--timeout must be a finite number of seconds > 0 (each wait adds the time its "
                          f"bytes take on the link), got {opts.timeout}")
    if opts.baud <= 0:
        raise SnapuqError(f"--baud must be > 0, got {opts.baud}")
    if opts.stream and not 1 <= opts.severity <= 5:
        raise SnapuqError(f"--severity must be in 1..5, got {opts.severity}")
    if opts.stream and opts.segment < 1:
        raise SnapuqError(f"--segment must be >= 1, got {opts.segment}")
    if opts.firmware is not None:
        check_elf(Path(opts.firmware))


def check_elf(path: Path) -> None:
    if not path.is_file():
        raise SnapuqError(f"--firmware {path}: no such file")
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        raise SnapuqError(f"--firmware {path}: not an ELF image (build one with make -C firmware or pio run)")
    if len(head) < 20 or head[4] != 1 or int.from_bytes(head[18:20], "little") != 40:
        raise SnapuqError(f"--firmware {path}: not a 32-bit ARM ELF image")


class _Stop(BaseException):
    """SIGTERM / SIGHUP while the harness runs. A BaseException like KeyboardInterrupt: the handler raises
    it wherever the main thread is, and a best-effort `except Exception` there (a serial port's
    in_waiting, a close) must not swallow it (it did: the run went on to the end and exited 0)."""


def run(opts: Options) -> dict[str, Any]:
    check_options(opts)
    if opts.port.startswith("qemu:"):
        board_spec(opts.port)  # an unknown board fails now, not after loading the data
    elif "://" not in opts.port and not Path(opts.port).exists():  # a device path (URLs: socket://, loop://)
        raise DeviceError(f"--port {opts.port}: no such serial device")
    if opts.resume and (Path(opts.out) / "run.json").exists():
        read_json(Path(opts.out) / "run.json")  # unreadable: say so before any work
    model_dir = Path(opts.model)
    if not model_dir.is_dir():
        raise SnapuqError(f"--model {model_dir}: no such model directory")
    out = check_out_dir(opts.out)
    lock = OutLock(out)  # a second run on this --out stops here, in one line
    try:
        return _run_locked(opts, model_dir, out)
    finally:
        lock.release()


def run_meta(opts: Options, model_dir: Path, ref: HostReference, x: np.ndarray, y: np.ndarray,
             seg: list[str] | None, board_label: str) -> dict[str, Any]:
    """What run.json pins (results.py): the content of every model file a device result depends on, the
    inputs as sent (int8 codes, labels, segments) and the options; the device part ("device": its profile
    and the ELF booted) is added once it has answered."""
    from snapuq.export.convert import quantize_input

    paths = ModelPaths(model_dir)
    files = {p.name: sha256_file(p) for p in (paths.int8, paths.manifest, paths.calib, paths.c_source,
                                              paths.c_header)}  # fmt: skip
    h = hashlib.sha256()
    for a in range(0, len(x), 1024):
        h.update(np.ascontiguousarray(quantize_input(x[a:a + 1024], ref.in_scale, ref.in_zp)).tobytes())
    h.update(np.asarray(y, np.int64).tobytes())
    h.update(repr(seg).encode())
    meta: dict[str, Any] = {
        "format": 2, "model": str(model_dir.resolve()), "model_files": files, "inputs_sha256": h.hexdigest(),
        "dataset": opts.dataset, "data_dir": opts.data_dir, "split": opts.split, "start": opts.start,
        "limit": opts.limit, "n_inputs": int(len(x)), "port": opts.port,
        # an emulated board by name; a real one is pinned by what it reports ("device"), not by its port
        # name (/dev/ttyACM0 may come back as /dev/ttyACM1)
        "board": board_label if opts.port.startswith("qemu:") else "serial",
        "check_outputs": opts.check_outputs, "icount": opts.icount if opts.port.startswith("qemu:") else None,
        "stream": {"severity": opts.severity, "segment": opts.segment} if opts.stream else None,
    }  # fmt: skip
    return meta


DEVICE_KEYS = ("fw", "version", "board", "cpu", "cpu_hz", "clock", "counter", "counter_hz", "kernels",
               "model", "model_sha256", "snap", "in_bytes", "outputs", "taps", "classes")


def _run_locked(opts: Options, model_dir: Path, out: Path) -> dict[str, Any]:
    import signal

    from snapuq.formats import read_config

    cfg_path = ModelPaths(model_dir).config
    seed = int(read_config(cfg_path, need=()).get("seed", 0)) if cfg_path.exists() else 0
    ref = HostReference(model_dir)
    x, y, seg = _load_split(opts, seed)
    if len(x) == 0:
        raise SnapuqError(f"{opts.dataset}/{opts.split}: no inputs selected")
    if int(np.prod(x.shape[1:])) != ref.in_bytes:
        raise SnapuqError(f"dataset {opts.dataset} inputs have shape {tuple(x.shape[1:])}, the model "
                          f"{model_dir} expects {ref.in_shape[1:]}")
    board_label = opts.port
    if opts.port.startswith("qemu:"):
        board_label = board_spec(opts.port).name
    meta = run_meta(opts, model_dir, ref, x, y, seg, board_label)
    resume = check_resume(out, meta, opts.resume)  # read-only: --out changes only once the device answers

    def _term(signum: int, _frame: Any) -> None:
        raise _Stop(signal.Signals(signum).name)

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            old[sig] = signal.signal(sig, _term)
        except ValueError:  # not the main thread (tests): no handlers
            pass
    state: dict[str, Any] = {}
    try:
        return _run(opts, model_dir, ref, x, y, seg, out, board_label, state, meta, resume)
    except (KeyboardInterrupt, _Stop) as e:
        _incomplete(out, opts, state, f"interrupted ({e or 'SIGINT'})")
        raise KeyboardInterrupt from None
    except InputFailed as e:
        _incomplete(out, opts, state, str(e))
        raise
    except (DeviceError, OSError) as e:
        qemu = state.get("qemu")
        if qemu is not None and qemu.exited_by_itself():
            msg = (f"QEMU exited (status {qemu.proc.returncode}) during the run: "
                   f"{len(state['writer'].done) if 'writer' in state else 0} of {len(x)} inputs done; "
                   "rerun with --resume to continue")
            _incomplete(out, opts, state, msg)
            raise DeviceError(msg) from None
        if "writer" in state:
            _incomplete(out, opts, state, str(e))
        if isinstance(e, OSError):
            if e.filename:  # a file (build dir, results): name it, not the serial port
                raise DeviceError(f"{e.strerror or e}: {e.filename}") from None
            raise DeviceError(f"serial port {opts.port}: {e}") from None
        raise
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _incomplete(out: Path, opts: Options, state: dict[str, Any], why: str) -> None:
    """summary.json of an interrupted run: what is done so far, marked incomplete."""
    if "writer" not in state:
        return
    try:
        state["writer"].close()
    except OSError:
        pass
    write_summary(out, state["writer"].done, state.get("stats", {}), state.get("prof", {}),
                  state["counter"], opts, complete=False, note=why, n_total=state.get("n_total"))


def _run(opts: Options, model_dir: Path, ref: HostReference, x: np.ndarray, y: np.ndarray,
         seg: list[str] | None, out: Path, board_label: str, state: dict[str, Any], meta: dict[str, Any],
         resume: bool) -> dict[str, Any]:
    with ExitStack() as stack:
        meter = None
        if opts.power:  # before anything starts: no PPK2 there is one line, --out untouched
            from snapuq.harness.energy import open_meter

            meter = open_meter(opts.power, opts.power_vdd_mv, out)
            stack.callback(meter.keep)  # the timed inferences are over: stop, keep it for the summary
        qemu = None
        url = opts.port
        elf_sha = None
        if opts.port.startswith("qemu:"):
            spec = board_spec(opts.port)
            elf = Path(opts.firmware) if opts.firmware else build_firmware(spec, model_dir, opts.build_dir)
            elf_sha = sha256_file(elf)
            qemu = stack.enter_context(QemuProcess(spec, elf, icount=opts.icount))
            state["qemu"] = qemu
            url = qemu.url
        ser = open_serial(url, opts.baud)
        # every wait allows its bytes at the line rate (8N1: baud / 10 bytes/s), never above Device.RATE
        dev = Device(ser, timeout=opts.timeout, rate=min(opts.baud / 10.0, Device.RATE))
        dev.frame_fill = ref.in_bytes
        dev.reply_bytes = 2 * int(ref.model.out_bytes) + 96 * len(ref.output_names)  # outputs' hex lines
        stack.callback(dev.close)
        try:
            dev.wait_boot(timeout=20.0)
        except DeviceError as e:
            if opts.firmware and qemu is not None:
                raise DeviceError(f"--firmware {opts.firmware}: the board does not answer ({e}); "
                                  "is it a snapuq firmware for this board?") from None
            raise
        prof = _exchange(dev, opts, "profile", dev.profile)
        if not prof.get("loaded"):
            # the boot banner went out before we connected: loading the built-in model again
            # repeats the firmware's own reason (e.g. e-arena need=62816 have=43840 ...)
            errs = _exchange(dev, opts, "model builtin", lambda: _builtin_reason(dev))
            raise DeviceError(f"the firmware on {board_label} has no model loaded"
                              + (f": {'; '.join(errs)}" if errs else ""))
        check_model_identity(prof, ref.tflite, model_dir, ref.manifest)
        if int(prof.get("in_bytes", -1)) != ref.in_bytes:
            raise DeviceError(f"device input is {prof.get('in_bytes')} bytes, host model {ref.in_bytes}: "
                              "the firmware was built for another model (rebuild it, or drop --firmware)")
        board = str(prof.get("board", board_label))
        counter = Counter(prof, board, opts.icount)
        stats = _exchange(dev, opts, "stats", dev.stats)
        # the device has answered: only now does anything in --out change
        meta["device"] = {**{k: prof.get(k) for k in DEVICE_KEYS}, "elf_sha256": elf_sha}
        start_run(out, meta, resume)
        view = RunView(start=opts.start, labels=[int(v) for v in y], segments=seg, cycles_unit=counter.unit,
                       cycles=counter.cycles, host=lambda pos: ref.run(ref.quantize(x[pos])).snap)
        writer = ResultsWriter(out / "results.jsonl", resume, view)
        state.update(prof=prof, counter=counter, stats=stats, n_total=int(len(x)), writer=writer)
        stack.callback(writer.close)
        note = dropped_line(len(writer.done), writer.dropped)
        if note:
            print(f"harness: {note}", file=sys.stderr)
        todo = [i for i in range(len(x)) if (opts.start + i) not in writer.done]
        bar = None
        if opts.progress:
            from tqdm import tqdm

            bar = tqdm(total=len(x), initial=len(x) - len(todo), desc=f"harness {board}", unit="in",
                       file=sys.stderr, dynamic_ncols=True)
            stack.callback(bar.close)
        if meter is not None:
            meter.start()
        new = 0
        for i in todo:
            xq = ref.quantize(x[i])
            if qemu is not None and qemu.exited_by_itself():
                raise DeviceError("qemu exited during the run")
            dev.retry_log = []
            inf, res, outs, retried, host, diff = _checked(dev, xq.tobytes(), opts, ref, xq)
            ticks = int(inf["ticks"])
            rec = {"i": opts.start + i, "label": int(y[i]), "pred": res.get("pred"),
                   "pred_host": host.snap.get("pred"), "u": res.get("u"), "s": res.get("s"),
                   "sf": res.get("sf"), "m": res.get("m"), "ebar": res.get("ebar"), "flag": res.get("flag"),
                   "p_err": res.get("pe"), "alarm": res.get("al"),
                   "ticks": ticks, "cycles": counter.cycles(ticks),
                   "model_cycles": counter.cycles(int(inf["model_ticks"])),
                   "snap_cycles": counter.cycles(int(inf["snap_ticks"])), "cycles_unit": counter.unit,
                   "match": not diff, "diff": diff, "retries": retried, "checked": True}
            if seg is not None:
                rec["segment"] = seg[i]
            if dev.retry_log:
                rec["retry_reasons"] = dev.retry_log
            writer.write(rec)
            new += 1
            if bar is not None:
                bar.update(1)
            if opts.stop_after is not None and new >= opts.stop_after:
                return {"stopped_after": new}
        stats = _exchange(dev, opts, "stats", dev.stats)
        state["stats"] = stats
        transport_faults = dev.transport_faults
        exchange_retries = dev.exchange_retries

    return write_summary(out, writer.done, stats, prof, counter, opts, transport_faults=transport_faults,
                         exchange_retries=exchange_retries)


def write_summary(out: Path, done: dict[int, dict[str, Any]], stats: dict[str, Any], prof: dict[str, Any],
                  counter: Counter, opts: Options, complete: bool = True, note: str | None = None,
                  n_total: int | None = None, transport_faults: int | None = None,
                  exchange_retries: int | None = None) -> dict[str, Any]:
    recs = [done[i] for i in sorted(done)]
    n = len(recs)
    cyc = [r["cycles"] for r in recs]
    cycles_median = int(statistics.median(cyc)) if cyc else 0
    model_med = int(statistics.median([r["model_cycles"] for r in recs])) if recs else 0
    snap_med = int(statistics.median([r["snap_cycles"] for r in recs])) if recs else 0
    us, us_source = counter.microseconds(cycles_median)
    board = str(prof.get("board", opts.port))
    bp = board_power(board)
    energy = None
    energy_source = "none"
    energy_note = "no power model for this board"
    if opts.power:
        from snapuq.harness.energy import energy_summary

        energy_source = "ppk2"
        energy, energy_note = energy_summary(out, complete)
    elif bp is not None and counter.unit in ("cycles", "qemu_instructions"):
        energy = bp.energy_uj(cycles_median)
        energy_source = "model"
        energy_note = (f"{'QEMU instructions' if counter.icount else 'cycles'} x {bp.power_w * 1e3:.1f} mW "
                       f"/ {bp.clock_hz // 1_000_000} MHz ({bp.mcu}; {bp.source})")
    correct = sum(1 for r in recs if r["pred"] == r["label"])
    summary = {
        "complete": complete,
        "n": n,
        "board": board,
        "mismatches_vs_host": sum(1 for r in recs if not r["match"]),
        "accuracy": correct / n if n else 0.0,
        "latency": {"cycles_median": cycles_median, "us_median": us, "cycles_unit": counter.unit,
                    "us_source": us_source, "model_cycles_median": model_med, "snap_cycles_median": snap_med,
                    "snap_score_frac_of_model": (snap_med / model_med) if model_med else None},
        "ram_peak_bytes": int(stats.get("ram_peak", 0)),
        "flash_bytes": int(stats.get("flash", 0)),
        "arena_bytes": int(stats.get("arena", 0)),
        "stack_peak_bytes": int(stats.get("stack_peak", 0)),
        "ram_static_bytes": int(stats.get("ram_static", 0)),
        "flash_budget_bytes": int(stats.get("flash_size", 0)),
        "ram_budget_bytes": int(stats.get("ram_size", 0)),
        "energy_uj_per_inf": energy,
        "energy_source": energy_source,
        "energy_note": energy_note,
        "counter": prof.get("counter"),
        "clock": prof.get("clock"),
        "cpu_hz": prof.get("cpu_hz"),
        "model_sha256": prof.get("model_sha256"),
        "kernels": prof.get("kernels"),
        "retries": sum(int(r.get("retries", 0)) for r in recs),
        "u_flagged_frac": (sum(1 for r in recs if r.get("flag")) / n) if n else 0.0,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if transport_faults is not None:
        summary["transport_faults"] = transport_faults  # damaged replies seen (and retried) in this session
    if exchange_retries is not None:
        summary["exchange_retries"] = exchange_retries  # profile / stats / model builtin asked again
    if not complete:
        summary["incomplete_reason"] = note
        summary["n_planned"] = n_total
    if any("segment" in r for r in recs):  # --stream: the device's U per segment, clean vs corrupted
        segs: dict[str, dict[str, Any]] = {}
        for r in recs:
            g = segs.setdefault(r.get("segment", "clean"), {"n": 0, "correct": 0, "u_sum": 0.0, "flagged": 0})
            g["n"] += 1
            g["correct"] += int(r["pred"] == r["label"])
            g["u_sum"] += float(r.get("u") or 0.0)
            g["flagged"] += int(bool(r.get("flag")))
        summary["stream"] = {
            k: {"n": g["n"], "accuracy": g["correct"] / g["n"], "u_mean": g["u_sum"] / g["n"],
                "flagged_frac": g["flagged"] / g["n"]}
            for k, g in segs.items()
        }
    write_json(out / "summary.json", summary)
    return summary
