"""Stream a dataset split through a board, check each result against the host int8 reference,
write results.jsonl incrementally and summary.json (DESIGN §3 contract)."""

from __future__ import annotations

import hashlib
import json
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
from snapuq.harness.protocol import Device
from snapuq.harness.qemu import (
    QemuProcess,
    board_spec,
    build_firmware,
    open_serial,
)
from snapuq.harness.reference import HostReference
from snapuq.harness.results import ResultsWriter, check_run_meta
from snapuq.modeldir import ModelPaths

SNAP_FIELDS = ("pred", "ebar", "z", "s", "sf", "m", "u", "flag")


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
    retries: int = 3
    timeout: float = 20.0
    icount: bool = True
    baud: int = 115200
    check_outputs: bool = True
    build_dir: Path | None = None
    power: str | None = None
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
        from snapuq import stream as S
        from snapuq.evaluate import _corruption_api

        if not 1 <= opts.severity <= 5:
            raise SnapuqError(f"--severity must be in 1..5, got {opts.severity}")
        names, corrupt = _corruption_api(ds)
        st = S.build_stream(x, y, names, corrupt, severity=opts.severity, seg_len=opts.segment,
                            clean_len=opts.segment, seed=seed)
        x, y = st.gather(x, st.x_corrupt), st.y
        seg = ["clean"] * len(st)
        for a, b, name in st.segments:
            seg[a:b] = [name] * (b - a)
    end = len(x) if opts.limit is None else min(len(x), opts.start + opts.limit)
    return x[opts.start:end], y[opts.start:end], (seg[opts.start:end] if seg is not None else None)


def check_model_identity(prof: dict[str, Any], tflite: bytes, model_dir: Path) -> None:
    """Refuse a firmware built for another model: the firmware reports the sha256 of the flatbuffer
    it runs (`profile` model_sha256=...), the host hashes --model's model_int8.tflite."""
    host_sha = hashlib.sha256(tflite).hexdigest()
    dev_sha = str(prof.get("model_sha256", ""))
    dev_name = prof.get("model", "?")
    if not dev_sha:
        raise DeviceError(f"the firmware (model '{dev_name}') does not report its model's sha256: rebuild "
                          f"and flash it from this checkout for --model {model_dir} (sha256 {host_sha[:16]})")
    if dev_sha != host_sha:
        raise DeviceError(f"the firmware runs model '{dev_name}' (sha256 {dev_sha[:16]}) but --model "
                          f"{model_dir} is sha256 {host_sha[:16]}: build and flash the firmware for it "
                          "(platformio.ini custom_snapuq_model, or make -C firmware MODEL=...)")


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


def _one(dev: Device, xq: bytes, opts: Options, ref: HostReference,
         xq_arr: np.ndarray) -> tuple[dict, dict, dict[int, list[int]] | None, int, Any]:
    """One input with retries; the host reference runs while the device works."""
    last: Exception | None = None
    host = None
    for attempt in range(opts.retries + 1):
        try:
            cmds = dev.send_input(xq, opts.check_outputs)
            if host is None:
                host = ref.run(xq_arr)
            inf, res, outs = dev.receive_input(cmds)
            return inf, res, outs, attempt, host
        except DeviceError as e:
            last = e
            dev.sync()
    raise DeviceError(f"input failed after {opts.retries + 1} attempts: {last}")


def run(opts: Options) -> dict[str, Any]:
    model_dir = Path(opts.model)
    cfg_path = ModelPaths(model_dir).config
    seed = int(json.loads(cfg_path.read_text()).get("seed", 0)) if cfg_path.exists() else 0
    ref = HostReference(model_dir)
    x, y, seg = _load_split(opts, seed)
    if len(x) == 0:
        raise SnapuqError(f"{opts.dataset}/{opts.split}: no inputs selected")
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    board_label = opts.port
    if opts.port.startswith("qemu:"):
        board_label = board_spec(opts.port).name
    meta = {"model": str(model_dir.resolve()), "dataset": opts.dataset, "split": opts.split,
            "start": opts.start, "limit": opts.limit, "board": board_label, "n_inputs": int(len(x))}
    if opts.stream:
        meta["stream"] = {"severity": opts.severity, "segment": opts.segment}
    check_run_meta(out, meta, opts.resume)

    with ExitStack() as stack:
        qemu = None
        url = opts.port
        if opts.port.startswith("qemu:"):
            spec = board_spec(opts.port)
            elf = Path(opts.firmware) if opts.firmware else build_firmware(spec, model_dir, opts.build_dir)
            if not elf.exists():
                raise SnapuqError(f"--firmware {elf}: no such file")
            qemu = stack.enter_context(QemuProcess(spec, elf, icount=opts.icount))
            url = qemu.url
        ser = open_serial(url, opts.baud)
        dev = Device(ser, timeout=opts.timeout)
        stack.callback(dev.close)
        dev.wait_boot(timeout=20.0)
        prof = dev.profile()
        if not prof.get("loaded"):
            raise DeviceError(f"the firmware has no model loaded: {prof} (boot: {dev.boot_lines})")
        check_model_identity(prof, ref.tflite, model_dir)
        if int(prof.get("in_bytes", -1)) != ref.in_bytes:
            raise DeviceError(f"device input is {prof.get('in_bytes')} bytes, host model {ref.in_bytes}: "
                              "the firmware was built for another model")
        board = str(prof.get("board", board_label))
        counter = Counter(prof, board, opts.icount)

        writer = ResultsWriter(out / "results.jsonl", opts.resume)
        stack.callback(writer.close)
        todo = [i for i in range(len(x)) if (opts.start + i) not in writer.done]
        bar = None
        if opts.progress:
            from tqdm import tqdm

            bar = tqdm(total=len(x), initial=len(x) - len(todo), desc=f"harness {board}", unit="in",
                       file=sys.stderr, dynamic_ncols=True)
            stack.callback(bar.close)
        new = 0
        for i in todo:
            xq = ref.quantize(x[i])
            if qemu is not None and not qemu.alive():
                raise DeviceError("qemu exited during the run")
            inf, res, outs, retried, host = _one(dev, xq.tobytes(), opts, ref, xq)
            diff = compare(host.outputs, host.snap, outs, res)
            ticks = int(inf["ticks"])
            rec = {"i": opts.start + i, "label": int(y[i]), "pred": res.get("pred"),
                   "pred_host": host.snap.get("pred"), "u": res.get("u"), "s": res.get("s"),
                   "sf": res.get("sf"), "m": res.get("m"), "ebar": res.get("ebar"), "flag": res.get("flag"),
                   "ticks": ticks, "cycles": counter.cycles(ticks),
                   "model_cycles": counter.cycles(int(inf["model_ticks"])),
                   "snap_cycles": counter.cycles(int(inf["snap_ticks"])), "cycles_unit": counter.unit,
                   "match": not diff, "diff": diff, "retries": retried}
            if seg is not None:
                rec["segment"] = seg[i]
            writer.write(rec)
            new += 1
            if bar is not None:
                bar.update(1)
            if opts.stop_after is not None and new >= opts.stop_after:
                return {"stopped_after": new}
        stats = dev.stats()

    return write_summary(out, writer.done, stats, prof, counter, opts)


def write_summary(out: Path, done: dict[int, dict[str, Any]], stats: dict[str, Any], prof: dict[str, Any],
                  counter: Counter, opts: Options) -> dict[str, Any]:
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
        energy_source = "ppk2"
        energy_note = "see energy.json"
    elif bp is not None and counter.unit in ("cycles", "qemu_instructions"):
        energy = bp.energy_uj(cycles_median)
        energy_source = "model"
        energy_note = (f"{'QEMU instructions' if counter.icount else 'cycles'} x {bp.power_w * 1e3:.1f} mW "
                       f"/ {bp.clock_hz // 1_000_000} MHz ({bp.mcu}; {bp.source})")
    correct = sum(1 for r in recs if r["pred"] == r["label"])
    summary = {
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
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
