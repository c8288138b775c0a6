"""A simulated Nordic PPK2 (Power Profiler Kit II) on a pty: the device side of the serial protocol that
ppk2-api (ppk2_api/ppk2_api.py, 0.9.2) speaks, for testing the harness's --power ppk2:PORT without
hardware.

    python tests/sim/ppk2_sim.py --edges EDGES --truth TRUTH.json [--active-ua 6720] [--idle-ua 1500]

prints `PORT /dev/pts/N` and serves until stdin closes or it is killed.

What it implements (the commands ppk2-api sends, one opcode byte then its arguments):
- 0x19 GET_META_DATA: the calibration text ppk2-api parses ("R0: 1031.64" ... "END"): resistors R0..R4,
  gains GS/GI, offsets O, S, I, user gains UG, HW, IA;
- 0x11 SET_POWER_MODE m (1 ampere meter, 2 source meter), 0x0d REGULATOR_SET b1 b2 (VDD in mV: 800 +
  (b1 - 3) * 256 + b2 - 32), 0x0c DEVICE_RUNNING_SET on/off, 0x08 RANGE_SET r: recorded;
- 0x06 AVERAGE_START / 0x07 AVERAGE_STOP: start / stop the sample stream.

The stream is the PPK2's: one little-endian u32 per 10 us (100 kHz): bits 0-13 the ADC value, 14-16 the
measurement range, 18-23 a sample counter, 24-31 the logic inputs D0..D7. Sample k is time t0 + k * 10 us
of CLOCK_MONOTONIC (t0: when AVERAGE_START arrived) and is sent once that time is LAG seconds past, so
that every edge of the pin before it is known.

The device under test is the host build of the firmware with SNAPUQ_HOST_TIMESTAMP=EDGES: its
snapuq_port_timestamp(level) appends "level CLOCK_MONOTONIC-ns" lines to EDGES (the pin the firmware holds
high during each timed inference, PPK2 logic input D0 on a board). D0 of sample k is the pin level at its
time; the current is active_ua while D0 is high, idle_ua otherwise, each with a small deterministic ripple
(so that an energy is a sum of samples, not a count times a constant), encoded with the metadata's
calibration in one range (ppk2-api's range-switch filter then leaves every sample as it is).

At every AVERAGE_STOP the simulator writes TRUTH.json (atomically): per D0-high window its samples and
the sum of the currents ppk2-api decodes from them (the same formula in the same float arithmetic), the
idle samples and their sum; the test compares the harness's energy.json with it."""

from __future__ import annotations

import argparse
import bisect
import json
import os
import select
import sys
import threading
import time
import tty

# calibration the simulated unit reports (ppk2-api's defaults for R; a small offset and user gain)
R = {0: 1031.64, 1: 101.65, 2: 10.15, 3: 0.94, 4: 0.043}
GS = {k: 0.0 for k in range(5)}
GI = {k: 1.0 for k in range(5)}
O = {k: 12.0 for k in range(5)}  # noqa: E741 - the PPK2's own name for the ADC offset
S = {k: 0.0 for k in range(5)}
I0 = {k: 0.0 for k in range(5)}
UG = {k: 1.0 for k in range(5)}
ADC_MULT = 1.8 / 163840
RANGE = 2  # up to ~70 mA: an MCU at a few mA
SAMPLE_NS = 10_000
LAG = 0.25


def metadata() -> bytes:
    lines = ["Calibrated: 0"]
    for name, table in (("R", R), ("GS", GS), ("GI", GI), ("O", O), ("S", S), ("I", I0), ("UG", UG)):
        lines += [f"{name}{k}: {table[k]:.4f}" if name != "R" else f"R{k}: {table[k]}" for k in range(5)]
    lines += ["VDD: 3300", "HW: 9173", "mode: 2", "IA: 56", "END", ""]
    return "\n".join(lines).encode()


def decoded_ua(adc: int, rng: int, vdd_mv: float) -> float:
    """What ppk2-api's get_adc_result gives for (adc, range) away from a range switch, in uA (the same
    expression, so the same float)."""
    r = str(rng)
    mods = {"R": R, "GS": GS, "GI": GI, "O": O, "S": S, "I": I0, "UG": UG}
    m = {k: {str(j): float(v[j]) for j in v} for k, v in mods.items()}
    adc_result = adc * 4
    result_without_gain = (adc_result - m["O"][r]) * (ADC_MULT / m["R"][r])
    a = m["UG"][r] * (result_without_gain * (m["GS"][r] * result_without_gain + m["GI"][r]) + (
        m["S"][r] * (vdd_mv / 1000) + m["I"][r]))
    return a * 10**6


def encode(ua: float) -> int:
    """The 14-bit ADC value whose decoded current is closest to ua in RANGE (GS = 0, UG = 1)."""
    amps = ua * 1e-6
    rwg = (amps - I0[RANGE]) / GI[RANGE]
    return max(0, min(16383, round((rwg * R[RANGE] / ADC_MULT + O[RANGE]) / 4)))


class Sim:
    def __init__(self, edges: str, truth: str, active_ua: float, idle_ua: float):
        self.edges_path, self.truth_path = edges, truth
        self.active_ua, self.idle_ua = active_ua, idle_ua
        self.master, slave = os.openpty()
        tty.setraw(slave)
        self.slave = slave  # kept open: the harness may close and reopen its end
        self.port = os.ttyname(slave)
        self.lock = threading.Lock()
        self.mode = None
        self.vdd_mv = 3300.0
        self.running = False
        self.t0 = 0
        self.k = 0  # next sample index
        self.edge_t: list[int] = []
        self.edge_v: list[int] = []
        self.edge_off = 0
        self.edge_rest = b""
        self.windows: list[list[float]] = []
        self.in_win = False
        self.idle = [0, 0.0]
        self.cache: dict[tuple[int, int], tuple[int, float]] = {}
        self.stop = threading.Event()

    # ---- the device under test's pin
    def read_edges(self) -> None:
        try:
            with open(self.edges_path, "rb") as f:
                f.seek(self.edge_off)
                data = f.read()
        except FileNotFoundError:
            return
        self.edge_off += len(data)
        buf = self.edge_rest + data
        *lines, self.edge_rest = buf.split(b"\n")
        for ln in lines:
            parts = ln.split()
            if len(parts) == 2:
                t = int(parts[1])
                i = bisect.bisect_right(self.edge_t, t)
                self.edge_t.insert(i, t)
                self.edge_v.insert(i, int(parts[0]))

    def pin(self, t: int) -> int:
        i = bisect.bisect_right(self.edge_t, t)
        return self.edge_v[i - 1] if i else 0

    # ---- the stream
    def sample(self, k: int) -> bytes:
        d0 = self.pin(self.t0 + k * SAMPLE_NS)
        ripple = ((k * 7919) % 13 - 6) * (25.0 if d0 else 5.0)  # +-150 uA active, +-30 uA idle
        key = (d0, int(ripple))
        if key not in self.cache:
            adc = encode((self.active_ua if d0 else self.idle_ua) + ripple)
            self.cache[key] = (adc, decoded_ua(adc, RANGE, self.vdd_mv))
        adc, ua = self.cache[key]
        if d0:
            if not self.in_win:
                self.windows.append([0, 0.0])
                self.in_win = True
            self.windows[-1][0] += 1
            self.windows[-1][1] += ua
        else:
            self.in_win = False
            self.idle[0] += 1
            self.idle[1] += ua
        word = adc | (RANGE << 14) | ((k % 64) << 18) | (d0 << 24)
        return word.to_bytes(4, "little")

    def emit_until(self, t_ns: int) -> None:
        self.read_edges()
        end = (t_ns - self.t0) // SAMPLE_NS
        while self.k < end:
            n = min(end - self.k, 4096)
            chunk = b"".join(self.sample(k) for k in range(self.k, self.k + n))
            self.k += n
            view = memoryview(chunk)
            while view:
                w = os.write(self.master, view)
                view = view[w:]

    def streamer(self) -> None:
        while not self.stop.is_set():
            time.sleep(0.005)
            with self.lock:
                if self.running:
                    self.emit_until(time.monotonic_ns() - int(LAG * 1e9))

    def write_truth(self) -> None:
        wins = self.windows[:-1] if self.in_win else self.windows  # the harness counts closed windows only
        doc = {"windows": [{"samples": int(n), "sum_ua": s} for n, s in wins],
               "idle_samples": self.idle[0], "idle_sum_ua": self.idle[1], "samples": self.k,
               "vdd_mv": self.vdd_mv, "mode": self.mode, "active_ua": self.active_ua, "idle_ua": self.idle_ua}
        tmp = self.truth_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, self.truth_path)

    # ---- commands
    def command(self, op: int, args: bytes) -> None:
        if op == 0x19:
            os.write(self.master, metadata())
        elif op == 0x11:
            self.mode = {1: "ampere", 2: "source"}.get(args[0], args[0])
        elif op == 0x0D:
            self.vdd_mv = 800 + (args[0] - 3) * 256 + args[1] - 32
            self.cache.clear()
        elif op == 0x06:
            with self.lock:
                if not self.running:
                    self.running, self.t0, self.k = True, time.monotonic_ns(), 0
                    self.windows, self.in_win, self.idle = [], False, [0, 0.0]
        elif op == 0x07:
            with self.lock:
                if self.running:
                    self.emit_until(time.monotonic_ns())
                    self.running = False
                    self.write_truth()

    ARGS = {0x19: 0, 0x11: 1, 0x0D: 2, 0x0C: 1, 0x08: 1, 0x06: 0, 0x07: 0, 0x15: 0, 0x16: 0, 0x20: 0}

    def serve(self) -> None:
        threading.Thread(target=self.streamer, daemon=True).start()
        buf = b""
        while not self.stop.is_set():
            r, _, _ = select.select([self.master, sys.stdin], [], [], 0.2)
            if sys.stdin in r and not os.read(sys.stdin.fileno(), 1024):
                break  # the test went away
            if self.master not in r:
                continue
            try:
                buf += os.read(self.master, 1024)
            except OSError:
                time.sleep(0.05)
                continue
            while buf:
                op = buf[0]
                n = self.ARGS.get(op, 0)
                if len(buf) < 1 + n:
                    break
                self.command(op, buf[1:1 + n])
                buf = buf[1 + n:]
        self.stop.set()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", required=True)
    ap.add_argument("--truth", required=True)
    ap.add_argument("--active-ua", type=float, default=6720.0)
    ap.add_argument("--idle-ua", type=float, default=1500.0)
    a = ap.parse_args()
    sim = Sim(a.edges, a.truth, a.active_ua, a.idle_ua)
    print(f"PORT {sim.port}", flush=True)
    sim.serve()


if __name__ == "__main__":
    main()
