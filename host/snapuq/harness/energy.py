"""Energy per inference: measured with a Nordic PPK2 (``--power ppk2:PORT``) or modelled from
cycles x the board's datasheet run-mode power, labelled ``"energy_source": "model"``."""

from __future__ import annotations

import time
from dataclasses import dataclass

from snapuq.errors import SnapuqError


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


class PPK2Meter:
    """Average current during the firmware's timestamp window, read from a Nordic PPK2 in
    source-meter mode with the board's timestamp GPIO on logic channel D0 (as MLPerf Tiny's
    EnergyRunner does). Needs ``pip install ppk2-api``."""

    def __init__(self, port: str, vdd_mv: int = 3300):
        try:
            from ppk2_api.ppk2_api import PPK2_API  # type: ignore[import-not-found]
        except ImportError as e:
            raise SnapuqError("--power ppk2:... needs the ppk2-api package (pip install ppk2-api)") from e
        self.ppk2 = PPK2_API(port)
        self.ppk2.get_modifiers()
        self.ppk2.use_source_meter()
        self.ppk2.set_source_voltage(vdd_mv)
        self.vdd = vdd_mv / 1000.0
        self.ppk2.toggle_DUT_power("ON")
        time.sleep(0.2)

    def start(self) -> None:
        self.ppk2.start_measuring()

    def stop_energy_uj(self, n_inferences: int) -> float:
        """Energy per inference over the samples whose D0 bit is high (the timed window)."""
        data = self.ppk2.get_data()
        self.ppk2.stop_measuring()
        if not data:
            raise SnapuqError("PPK2 returned no samples")
        samples, raw = self.ppk2.get_samples(data)
        bits = self.ppk2.digital_channels(raw)[0]
        in_window = [s for s, b in zip(samples, bits) if b]
        if not in_window:
            raise SnapuqError("PPK2: the timestamp pin (D0) never went high during the run")
        # samples are microamps at 100 kHz
        mean_ua = sum(in_window) / len(in_window)
        seconds = len(in_window) / 100_000.0
        return mean_ua * 1e-6 * self.vdd * seconds * 1e6 / max(1, n_inferences)

    def close(self) -> None:
        try:
            self.ppk2.stop_measuring()
        except Exception:  # noqa: BLE001
            pass
