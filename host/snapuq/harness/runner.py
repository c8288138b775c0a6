"""Stream a dataset split through a board, check each result against the host int8 reference,
write results.jsonl incrementally and summary.json (DESIGN §3 contract)."""

from __future__ import annotations

import hashlib
import re
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from snapuq import resources
from snapuq.data import load_dataset, read_by
from snapuq.data.shifts import corruption_api
from snapuq.errors import DeviceError, SnapuqError
from snapuq.export.convert import quantize_input
from snapuq.formats import read_config
from snapuq.harness import cycles as cyc
from snapuq.harness.bare import BareReference, is_bare_model, linked_copy, load_inputs
from snapuq.harness.energy import open_meter
from snapuq.harness.identity import check_model_identity
from snapuq.harness.options import Options, check_options
from snapuq.harness.protocol import Device
from snapuq.harness.qemu import (
    QemuProcess,
    board_spec,
    build_firmware,
    open_serial,
)
from snapuq.harness.reference import HostReference
from snapuq.harness.replies import DeviceReplyError, Reply, TransportError
from snapuq.harness.results import (
    OutLock,
    ResultsWriter,
    RunView,
    check_resume,
    dropped_line,
    sha256_file,
    start_run,
)
from snapuq.harness.summary import Counter, write_summary
from snapuq.io import check_out_dir, read_json
from snapuq.modeldir import ModelPaths
from snapuq.uq import stream as S

SNAP_FIELDS = ("pred", "ebar", "z", "s", "sf", "m", "u", "pe", "al", "flag")


def _load_split(opts: Options, seed: int) -> tuple[np.ndarray, np.ndarray, list[str] | None]:
    """The inputs to stream: the split itself, or (--stream) the CID stream built from it exactly as
    `snapuq eval` builds it (clean, c_1, clean, c_2, ...; every corruption of the dataset at one severity).
    Returns (x, y, per-frame segment name or None)."""

    ds = load_dataset(opts.dataset, opts.data_dir, seed, **read_by(opts.model))
    if opts.split not in ("train", "dev", "test"):
        raise SnapuqError(f"unknown split '{opts.split}' (train, dev, test)")
    x = np.asarray(getattr(ds, f"x_{opts.split}"), np.float32)
    y = np.asarray(getattr(ds, f"y_{opts.split}"))
    seg = None
    if opts.stream:
        names, corrupt = corruption_api(ds)
        st = S.build_stream(x, y, names, corrupt, severity=opts.severity, seg_len=opts.segment,
                            clean_len=opts.segment, seed=seed)
        x, y = st.gather(x, st.x_corrupt), st.y
        seg = ["clean"] * len(st)
        for a, b, name in st.segments:
            seg[a:b] = [name] * (b - a)
    end = len(x) if opts.limit is None else min(len(x), opts.start + opts.limit)
    return x[opts.start:end], y[opts.start:end], (seg[opts.start:end] if seg is not None else None)



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
            return inf, ref.device_result(res, outs), outs, attempt, host
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
    if not model_dir.is_dir() and not is_bare_model(model_dir):
        raise SnapuqError(f"--model {model_dir}: no such model directory or .tflite file")
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

    h = hashlib.sha256()
    if isinstance(ref, BareReference):  # the file itself; its inputs are int8 codes already
        files = {model_dir.name: sha256_file(model_dir)}
        h.update(np.ascontiguousarray(x, np.int8).tobytes())
    else:
        paths = ModelPaths(model_dir)
        files = {p.name: sha256_file(p) for p in (paths.int8, paths.manifest, paths.calib, paths.c_source,
                                                  paths.c_header)}  # fmt: skip
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
        "inputs": opts.input_source,
    }  # fmt: skip
    return meta


DEVICE_KEYS = ("fw", "version", "board", "cpu", "cpu_hz", "clock", "counter", "counter_hz", "kernels",
               "model", "model_sha256", "snap", "in_bytes", "outputs", "taps", "classes")


def _run_locked(opts: Options, model_dir: Path, out: Path) -> dict[str, Any]:
    import signal


    ref: HostReference | BareReference
    if is_bare_model(model_dir):  # a bare .tflite: its inputs from an .npz or seeded random
        ref = BareReference(model_dir)
        x, y, opts.input_source = load_inputs(ref, opts.inputs, opts.seed, opts.limit, opts.start)
        seg = None
        if len(x) == 0:
            raise SnapuqError(f"{opts.input_source['label']}: no inputs selected")
    else:
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


def _run(opts: Options, model_dir: Path, ref: Any, x: np.ndarray, y: np.ndarray,
         seg: list[str] | None, out: Path, board_label: str, state: dict[str, Any], meta: dict[str, Any],
         resume: bool) -> dict[str, Any]:
    bare = isinstance(ref, BareReference)
    with ExitStack() as stack:
        meter = None
        if opts.power:  # before anything starts: no PPK2 there is one line, --out untouched

            meter = open_meter(opts.power, opts.power_vdd_mv, out)
            stack.callback(meter.keep)  # the timed inferences are over: stop, keep it for the summary
        qemu = None
        url = opts.port
        elf_sha = None
        if opts.port.startswith("qemu:"):
            spec = board_spec(opts.port)
            if opts.firmware:
                elf = Path(opts.firmware)
            elif bare:  # the stock firmware without SNAP, the file linked in (make SNAP=0 TFLITE=)
                elf = _bare_image(spec, ref, opts)
            else:
                elf = build_firmware(spec, model_dir, opts.build_dir)
            elf_sha = sha256_file(elf)
            plugin = _cycle_plugin(opts, spec, elf, out, state)
            qemu = stack.enter_context(QemuProcess(spec, elf, icount=opts.icount, plugin=plugin))
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
        if bare and prof.get("model_sha256") != ref.sha256 and qemu is None:
            prof = _upload_bare(dev, opts, ref)  # a board running another model: upload the file into RAM
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
                       cycles=counter.cycles, host=lambda pos: ref.run(ref.quantize(x[pos])).snap,
                       fields=("pred",) if bare else None,
                       inputs=opts.input_source["source"] if opts.input_source else None)
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
            if opts.input_source is not None:
                rec["inputs"] = opts.input_source["source"]
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

    cycle_model = None
    if "cycles" in state and new:  # QEMU has ended: the plugin wrote the stream of this session's invokes
        counts, silicon = state["cycles"]
        try:
            cycle_model = cyc.estimate(*cyc.read_counts(counts), silicon)
        except SnapuqError as e:  # the device results stand; only the estimate is missing
            print(f"harness: no modelled cycles: {e}", file=sys.stderr)
    return write_summary(out, writer.done, stats, prof, counter, opts, transport_faults=transport_faults,
                         exchange_retries=exchange_retries, cycle_model=cycle_model)


def _cycle_plugin(opts: Options, spec: Any, elf: Path, out: Path, state: dict[str, Any]) -> str | None:
    """QEMU's -plugin for the modelled cycles of the session's first inferences (snapuq.harness.cycles), or
    None (asked not to, no -icount, a board without a cycle model, or no plugin: said in one line)."""
    if not (opts.cycle_model and opts.icount and spec.name in cyc.BOARD_SILICON):
        return None
    try:
        silicon = cyc.silicon_for(spec.name)
        counts = (Path(out) / "insn_counts.txt").resolve()
        counts.unlink(missing_ok=True)
        arg = cyc.plugin_arg(cyc.plugin_library(), elf, silicon, counts, max_windows=cyc.HARNESS_INFERENCES)
    except SnapuqError as e:  # e.g. a stripped --firmware ELF, no host compiler
        print(f"harness: no modelled cycles: {e}", file=sys.stderr)
        return None
    state["cycles"] = (counts, silicon)
    return arg


def _upload_bare(dev: Device, opts: Options, ref: BareReference) -> dict[str, Any]:
    """A real board running another model than the file: upload it (`model N CRC`, into the board's RAM
    pool; the board refuses a file larger than its pool before any byte of it is sent). Returns the new
    profile."""
    try:
        dev.load_model(ref.tflite, timeout=max(60.0, opts.timeout))
    except DeviceReplyError as e:
        raise DeviceError(f"the board runs another model and refuses {ref.path.name} "
                          f"({len(ref.tflite)} B) by upload: {e}; flash a firmware with it linked in "
                          f"(make -C firmware BOARD SNAP=0 TFLITE={ref.path})") from None
    return _exchange(dev, opts, "profile", dev.profile)


def _bare_image(spec: Any, ref: BareReference, opts: Options) -> Path:
    """The stock SNAP=0 firmware with the file linked in (make TFLITE=); a file that does not fit the board
    is one line with the linker's figures, not make's tail."""
    bdir = Path(opts.build_dir or resources.work_dir("firmware")).resolve()
    try:
        return build_firmware(spec, None, bdir, snap=False, tflite=linked_copy(ref, bdir),
                              variant=f"_tfl{ref.sha256[:10]}")
    except SnapuqError as e:
        over = re.findall(r"region `(\w+)' overflowed by (\d+) bytes", str(e))
        if not over:
            raise
        where = "; ".join(f"region {r} overflowed by {n} bytes" for r, n in over)
        hint = "" if spec.name == "qemu_m7" else "; qemu:m7 has 2 MB / 512 KB"
        raise SnapuqError(f"{ref.path.name} ({len(ref.tflite):,} B) does not fit {spec.name} (the "
                          f"{spec.models} budgets): {where}{hint}") from None
