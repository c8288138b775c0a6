"""summary.json of a harness run: device ticks as cycles and microseconds, latency, memory, energy."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from snapuq.harness.energy import board_power, energy_summary
from snapuq.harness.options import Options
from snapuq.io import write_json


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


def write_summary(out: Path, done: dict[int, dict[str, Any]], stats: dict[str, Any], prof: dict[str, Any],
                  counter: Counter, opts: Options, complete: bool = True, note: str | None = None,
                  n_total: int | None = None, transport_faults: int | None = None,
                  exchange_retries: int | None = None, cycle_model: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    recs = [done[i] for i in sorted(done)]
    n = len(recs)
    cycles_median, model_med, snap_med = (int(statistics.median([r[k] for r in recs])) if recs else 0
                                          for k in ("cycles", "model_cycles", "snap_cycles"))
    us, us_source = counter.microseconds(cycles_median)
    board = str(prof.get("board", opts.port))
    bp = board_power(board)
    energy = None
    energy_source = "none"
    energy_note = "no power model for this board"
    if opts.power:
        energy_source = "ppk2"
        energy, energy_note = energy_summary(out, complete)
    elif bp is not None and counter.unit in ("cycles", "qemu_instructions"):
        energy = bp.energy_uj(cycles_median)
        energy_source = "model"
        energy_note = (f"{'QEMU instructions' if counter.icount else 'cycles'} x {bp.power_w * 1e3:.1f} mW "
                       f"/ {bp.clock_hz // 1_000_000} MHz ({bp.mcu}; {bp.source})")
    correct = sum(1 for r in recs if r["pred"] == r["label"])
    src = opts.input_source
    labelled = src is None or bool(src.get("labelled"))
    summary = {
        "complete": complete,
        "n": n,
        "board": board,
        "mismatches_vs_host": sum(1 for r in recs if not r["match"]),
        "accuracy": (correct / n if n else 0.0) if labelled else None,
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
    if cycle_model is not None:  # the model invoke's instruction stream weighted (snapuq.harness.cycles)
        summary["latency"].update({
            "cycles_modelled": cycle_model["cycles_modelled"], "ms_modelled": cycle_model["ms_modelled"],
            "modelled_note": f"model invoke only, mean of this session's first {cycle_model['inferences']} "
                             "inferences; "
                             f"{cycle_model['silicon']} at {cycle_model['clock_hz'] // 1_000_000} MHz, "
                             f"{cycle_model['flash_ws']} WS; error bar {cycle_model['error_bar']}"})
        summary["cycle_model"] = cycle_model
    if src is not None:  # a bare .tflite: no SNAP fields; where its inputs came from
        summary["model_kind"] = "bare tflite (no SNAP fields; pred = argmax of output 0)"
        summary["inputs"] = src
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
