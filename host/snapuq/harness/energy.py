"""Energy per inference: measured with a Nordic PPK2 (``--power ppk2:PORT``: PPK2Meter, energy.json) or
modelled from cycles x the board's datasheet run-mode power, labelled ``"energy_source": "model"``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from snapuq.errors import SnapuqError
from snapuq.io import write_json


@dataclass(frozen=True)
class BoardPower:
    board: str
    mcu: str
    clock_hz: int
    run_current_a: float  # typical run-mode supply current at clock_hz, code from flash
    vdd: float
    source: str

    @property
    def power_w(self) -> float:
        return self.run_current_a * self.vdd

    def energy_uj(self, cycles: float) -> float:
        return cycles / self.clock_hz * self.power_w * 1e6


# Datasheet typical run-mode figures (peripherals off, ART/caches on, 3.3 V).
BOARD_POWER: dict[str, BoardPower] = {
    "nucleo_f767zi": BoardPower("nucleo_f767zi", "STM32F767ZI", 216_000_000, 0.102, 3.3,
                                "STM32F767xx datasheet: ~472 uA/MHz run mode at 216 MHz"),
    "nucleo_l432kc": BoardPower("nucleo_l432kc", "STM32L432KC", 80_000_000, 84e-6 * 80, 3.3,
                                "STM32L432xx datasheet: 84 uA/MHz run mode (range 1) at 80 MHz"),
    "esp32s3": BoardPower("esp32s3", "ESP32-S3", 240_000_000, 0.040, 3.3,
                          "ESP32-S3 datasheet: ~40 mA, CPU at 240 MHz, radios off"),
    "rp2040": BoardPower("rp2040", "RP2040", 125_000_000, 0.025, 3.3,
                         "RP2040 datasheet: ~25 mA typical at 125 MHz, both cores clocked"),
}

# The emulated boards use the budgets, and here the power, of the board they stand in for.
QEMU_STANDS_FOR = {"qemu_m4": "nucleo_l432kc", "qemu_m7": "nucleo_f767zi"}


def board_power(board: str) -> BoardPower | None:
    return BOARD_POWER.get(QEMU_STANDS_FOR.get(board, board))


PPK2_BY_ID = "/dev/serial/by-id/usb-Nordic_Semiconductor_PPK2_*"
PPK2_SAMPLE_HZ = 100_000  # the PPK2 streams one 4-byte sample every 10 us
ENERGY_METHOD = (
    "MLPerf Tiny EnergyRunner style: the firmware holds its timestamp pin high during each timed "
    "inference (one `infer 1 0` = one inference), wired to PPK2 logic input D0; a window is a run of "
    "consecutive samples with D0 high; its energy = sum of those samples' current (ppk2-api get_samples, "
    "uA) x the supply voltage (--vdd-mv) x 10 us; energy per inference = the mean over the windows")


def parse_power(spec: str) -> str:
    """--power ppk2:PORT (or ppk2:auto, the first PPK2 on USB) -> PORT; anything else refused in one line."""
    kind, _, port = spec.partition(":")
    if kind != "ppk2" or not port:
        raise SnapuqError(f"--power {spec}: expected ppk2:PORT (the PPK2's own serial port) or ppk2:auto")
    return port


class PPK2Meter:
    """A Nordic PPK2 in ampere-meter mode (docs/FIRMWARE.md, "From unboxing a Nucleo": in series with the
    MCU supply across the board's IDD jumper, logic input D0 on the firmware's timestamp pin), read through
    ppk2-api. The samples stream continuously (100 kHz); a reader thread feeds them to ppk2-api's
    get_samples and integrates, online, every window in which D0 is high (ENERGY_METHOD).

    Ampere-meter mode, not source-meter mode: the board's own regulator keeps supplying the MCU (the wiring
    the docs give); the PPK2 measures the current, so the supply voltage is the user's (--vdd-mv, 3.3 V on a
    Nucleo), also given to ppk2-api (its calibration term S x VDD, and start_measuring needs it set)."""

    def __init__(self, port: str, vdd_mv: int = 3300, answer_s: float = 1.0):
        try:
            import serial
            from ppk2_api.ppk2_api import PPK2_API  # type: ignore[import-not-found]
        except ImportError as e:
            raise SnapuqError("--power ppk2:... needs the ppk2-api package (pip install ppk2-api, or the "
                              "project's [ppk2] extra)") from e
        if not 800 <= vdd_mv <= 5000:
            raise SnapuqError(f"--vdd-mv {vdd_mv}: the PPK2 works from 800 to 5000 mV")
        if port == "auto":
            found = PPK2_API.list_devices()
            if not found:
                raise SnapuqError("--power ppk2:auto: no PPK2 is connected (no serial port is a PPK2)")
            port = found[0]
        self.port = port
        self.vdd = vdd_mv / 1000.0
        try:
            self.ppk2 = PPK2_API(port, timeout=0.05, write_timeout=2.0)
        except (serial.SerialException, OSError, ValueError) as e:
            raise SnapuqError(f"--power ppk2:{port}: cannot open the PPK2's serial port: {e}") from None
        import threading

        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None
        try:
            ser = self.ppk2.ser
            self.ppk2.stop_measuring()  # one left streaming by an earlier, killed run
            time.sleep(0.05)
            ser.reset_input_buffer()
            meta = None
            deadline = time.monotonic() + answer_s
            while meta is None and time.monotonic() < deadline:
                meta = self.ppk2.get_modifiers()  # None: no "... END" metadata (not a PPK2)
        except (serial.SerialException, OSError, UnicodeDecodeError) as e:
            self.close()
            raise SnapuqError(f"--power ppk2:{port}: no PPK2 answered there ({type(e).__name__}: {e}); "
                              f"give the PPK2's own serial port ({PPK2_BY_ID})") from None
        if meta is None:
            self.close()
            raise SnapuqError(f"--power ppk2:{port}: no PPK2 answered there (no metadata within "
                              f"{answer_s:g} s); give the PPK2's own serial port ({PPK2_BY_ID})")
        self.ppk2.use_ampere_meter()
        self.ppk2.set_source_voltage(vdd_mv)
        self._reset()

    def _reset(self) -> None:
        self.windows: list[tuple[int, float]] = []  # (samples, sum of uA) per D0-high window
        self._in_win = False
        self._cur = [0, 0.0]
        self.idle = [0, 0.0]
        self.samples = 0
        self._pending = b""

    def _feed(self, data: bytes) -> None:
        """Samples to ppk2-api in whole 4-byte words (its get_samples assumes as much), then the windows."""
        buf = self._pending + data
        cut = len(buf) - len(buf) % 4
        self._pending = buf[cut:]
        if cut == 0:
            return
        values, bits = self.ppk2.get_samples(buf[:cut])
        with self._lock:
            for ua, b in zip(values, bits):
                if b & 1:
                    if not self._in_win:
                        self._in_win = True
                        self._cur = [0, 0.0]
                    self._cur[0] += 1
                    self._cur[1] += ua
                else:
                    if self._in_win:
                        self.windows.append((self._cur[0], self._cur[1]))
                        self._in_win = False
                    self.idle[0] += 1
                    self.idle[1] += ua
            self.samples += len(values)

    def _read_loop(self) -> None:
        ser = self.ppk2.ser
        try:
            while not self._stop.is_set():
                data = ser.read(max(1, ser.in_waiting))
                if data:
                    self._feed(data)
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self._error = e

    def start(self, live_s: float = 5.0) -> None:
        """Start the stream and return once its first samples are here, so no inference runs before the
        meter measures (the PPK2, or anything behind USB, starts streaming some time after the command; an
        inference in that gap would be a window the measurement never sees)."""
        import threading

        self._reset()
        self.t_start = time.monotonic()
        self.ppk2.start_measuring()
        self._stop.clear()
        self._thread = threading.Thread(target=self._read_loop, name="ppk2-reader", daemon=True)
        self._thread.start()
        t_end = time.monotonic() + live_s
        while self.samples == 0 and self._error is None and time.monotonic() < t_end:
            time.sleep(0.005)
        if self.samples == 0:
            why = f"reading failed: {self._error}" if self._error is not None else f"none within {live_s:g} s"
            raise SnapuqError(f"PPK2 on {self.port}: the measurement did not start streaming samples ({why})")

    def stop(self, quiet_s: float = 0.5, drain_s: float = 30.0) -> dict:
        """Stop measuring, take what is still on its way (until the port is quiet for quiet_s) and return
        the measurement (energy.json's content)."""
        duration = time.monotonic() - self.t_start
        self.ppk2.stop_measuring()
        last, t_end = self.samples, time.monotonic() + drain_s
        quiet_since = time.monotonic()
        while time.monotonic() < t_end and self._error is None:
            time.sleep(0.05)
            if self.samples != last:
                last, quiet_since = self.samples, time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s:
                break
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if self._error is not None:
            raise SnapuqError(f"PPK2 on {self.port}: reading samples failed: {self._error}")
        with self._lock:
            if self._in_win:  # the pin still high when the stream stopped: an unfinished window, not counted
                self._in_win = False
            return self.measurement(duration)

    def measurement(self, duration_s: float) -> dict:
        per_s = 1.0 / PPK2_SAMPLE_HZ
        e = [s_ua * 1e-6 * self.vdd * per_s * 1e6 for _n, s_ua in self.windows]  # uJ per window
        n = [k for k, _s in self.windows]
        res: dict = {
            "source": "ppk2", "mode": "ampere_meter", "port": self.port, "vdd_v": self.vdd,
            "sample_hz": PPK2_SAMPLE_HZ, "method": ENERGY_METHOD, "duration_s": round(duration_s, 3),
            "samples": self.samples, "windows": len(self.windows), "samples_in_windows": sum(n),
            "energy_uj_per_inf": None, "energy_uj_median": None, "energy_uj_min": None, "energy_uj_max": None,
            "window_us_median": None, "current_ma_in_windows": None,
            "current_ma_idle": self.idle[1] / self.idle[0] / 1000.0 if self.idle[0] else None,
        }  # fmt: skip
        if not self.windows:
            res["error"] = ("the timestamp pin (PPK2 logic input D0) never went high while measuring: is D0 "
                            "wired to the board's timestamp pin and GND to the board's GND?")
            return res
        import statistics

        res.update({
            "energy_uj_per_inf": sum(e) / len(e), "energy_uj_median": statistics.median(e),
            "energy_uj_min": min(e), "energy_uj_max": max(e),
            "window_us_median": statistics.median(n) * per_s * 1e6,
            "current_ma_in_windows": sum(s for _n, s in self.windows) / sum(n) / 1000.0,
            "per_window": [{"samples": k, "energy_uj": v} for k, v in zip(n, e)][:100_000],
        })  # fmt: skip
        return res

    def keep(self) -> None:
        """The run's timed inferences are over: stop, and keep the measurement for energy_summary."""
        if self._thread is None:
            self.close()
            return
        try:
            m = self.stop()
        except SnapuqError as e:
            m = {"source": "ppk2", "port": self.port, "energy_uj_per_inf": None, "error": str(e)}
        finally:
            self.close()
        _KEPT[getattr(self, "out", "")] = m

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        try:
            self.ppk2.stop_measuring()
        except Exception:  # noqa: BLE001
            pass
        try:
            self.ppk2.ser.close()
        except Exception:  # noqa: BLE001
            pass

    def __enter__(self) -> PPK2Meter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The measurement of a run, from the moment its timed inferences are over (the harness's device session
# closes: PPK2Meter.keep) to its summary (energy_summary): keyed by the run's --out.
_KEPT: dict[str, dict] = {}


def open_meter(power: str, vdd_mv: int, out: Path) -> PPK2Meter:
    """--power ppk2:PORT -> an open PPK2 (refused in one line: no ppk2-api, no such port, not a PPK2)."""
    _KEPT.pop(str(out), None)
    meter = PPK2Meter(parse_power(power), vdd_mv)
    meter.out = str(out)
    return meter


def energy_summary(out: Path, complete: bool) -> tuple[float | None, str]:
    """(energy per inference in uJ, note) for summary.json of a --power run; a complete run's measurement
    is written, atomically, to out/energy.json."""

    m = _KEPT.pop(str(out), None)
    if not complete:
        return None, "PPK2: the run is incomplete, its measurement is not kept (no energy.json)"
    if m is None:
        return None, "PPK2: no measurement was taken"
    m["time_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(Path(out) / "energy.json", m)
    if m.get("energy_uj_per_inf") is None:
        return None, f"PPK2: no energy: {m.get('error', 'no windows')} (energy.json)"
    return m["energy_uj_per_inf"], (
        f"PPK2 ampere meter on {m['port']}: mean over {m['windows']} timestamp-pin windows (D0 high) of the "
        f"sampled current x {m['vdd_v']:g} V x 10 us (energy.json)")
