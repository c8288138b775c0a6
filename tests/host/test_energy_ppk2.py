"""--power ppk2:PORT end to end, without hardware: the harness (snapuq.cli harness, in this process) drives
the host build of the firmware behind a TCP socket (the same app and core as on a board) and measures it
with a simulated PPK2 on a pty (tests/sim/ppk2_sim.py: the device side of ppk2-api's serial protocol,
metadata, ampere-meter mode, the 100 kHz 4-byte sample stream with the logic inputs), read through the
real ppk2-api package. The firmware's timestamp pin (high during each timed inference) reaches the
simulated logic input D0 through SNAPUQ_HOST_TIMESTAMP (firmware/port/host/port_host.c appends each edge
with its CLOCK_MONOTONIC time; the simulator sets D0 of the samples at those times).

Checked: energy.json (written atomically) has one window per inference the device ran, each window's
energy equal to what the simulator streamed (its own record of the currents ppk2-api decodes), the
windows as long as the device's own timing of the inference, summary.json carrying the same figure; and
every way --power cannot measure is refused in one line: no ppk2-api, no such port, a port that is not a
PPK2, no PPK2 connected (ppk2:auto), not ppk2:..., and a pin that never goes high (exit 1, energy null)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from snapuq import cli
from snapuq.harness.qemu import build_host_firmware, kill_owned, popen_owned

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

MODEL = ROOT / "models" / "digits"
BUILD = ROOT / "build" / "test-energy-host"
SIM = ROOT / "tests" / "sim" / "ppk2_sim.py"
ACTIVE_UA, IDLE_UA, VDD_MV = 6720.0, 1500.0, 3300  # L432KC-like: 84 uA/MHz at 80 MHz; a few mA asleep
N = 20

pytestmark = [
    pytest.mark.skipif(not (MODEL / "snapuq_model.c").exists(), reason="models/digits not exported"),
    pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("make") is None,
                       reason="no host compiler"),
]


class Bridge:
    """socket://127.0.0.1:PORT in front of the host firmware (a fresh process per connection), with
    SNAPUQ_HOST_TIMESTAMP=edges in its environment when edges is given."""

    def __init__(self, exe: Path, edges: Path | None) -> None:
        self.exe, self.edges = exe, edges
        self.procs: list[subprocess.Popen] = []
        self.stop = threading.Event()
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(4)
        self.lsock.settimeout(0.2)
        self.url = f"socket://127.0.0.1:{self.lsock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                s, _ = self.lsock.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        env = dict(os.environ)
        env.pop("SNAPUQ_HOST_TIMESTAMP", None)
        if self.edges is not None:
            env["SNAPUQ_HOST_TIMESTAMP"] = str(self.edges)
        proc = popen_owned([str(self.exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, bufsize=0, env=env)
        self.procs.append(proc)

        def down() -> None:
            while chunk := os.read(proc.stdout.fileno(), 4096):
                try:
                    s.sendall(chunk)
                except OSError:
                    return

        threading.Thread(target=down, daemon=True).start()
        try:
            while chunk := s.recv(4096):
                proc.stdin.write(chunk)
        except OSError:
            pass
        finally:
            s.close()
            kill_owned(proc)

    def close(self) -> None:
        self.stop.set()
        self.lsock.close()
        for p in self.procs:
            kill_owned(p)


class SimPPK2:
    def __init__(self, work: Path) -> None:
        self.edges, self.truth = work / "edges.txt", work / "truth.json"
        self.proc = subprocess.Popen(
            [sys.executable, str(SIM), "--edges", str(self.edges), "--truth", str(self.truth),
             "--active-ua", str(ACTIVE_UA), "--idle-ua", str(IDLE_UA)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        line = self.proc.stdout.readline().split()
        assert line and line[0] == "PORT", line
        self.port = line[1]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def firmware() -> Path:
    pytest.importorskip("ppk2_api", reason="ppk2-api not installed (the [dev] extra has it)")
    return build_host_firmware(BUILD, MODEL)


@pytest.fixture()
def sim(tmp_path: Path):
    s = SimPPK2(tmp_path)
    yield s
    s.close()


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    d = tmp_path / "digits"
    d.mkdir()
    for f in ("config.json", "calib.json", "snapuq.json", "model_int8.tflite", "snapuq_model.c",
              "snapuq_model.h"):
        shutil.copy(MODEL / f, d / f)
    return d


def _harness(capsys, url: str, model: Path, out: Path, *args: str) -> tuple[int, str, str]:
    rc = cli.main(["harness", "--port", url, "--model", str(model), "--dataset", "digits", "--no-progress",
                   "--out", str(out), *args])
    c = capsys.readouterr()
    return rc, c.out, c.err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_ppk2_energy_end_to_end_against_a_simulated_ppk2(firmware, sim, model, tmp_path, capsys) -> None:
    bridge = Bridge(firmware, sim.edges)
    out = tmp_path / "R"
    try:
        rc, stdout, err = _harness(capsys, bridge.url, model, out, "--limit", str(N), "--power",
                                   f"ppk2:{sim.port}", "--vdd-mv", str(VDD_MV))
    finally:
        bridge.close()
    assert rc == 0, err
    e = json.loads((out / "energy.json").read_text())
    truth = json.loads(sim.truth.read_text())
    s = json.loads((out / "summary.json").read_text())
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    print(json.dumps({k: v for k, v in e.items() if k not in ("per_window", "method")}))
    # the meter was driven as the docs wire it, and the stream was read whole
    assert truth["mode"] == "ampere" and truth["vdd_mv"] == VDD_MV
    assert e["mode"] == "ampere_meter" and e["vdd_v"] == VDD_MV / 1000 and e["sample_hz"] == 100_000
    assert e["samples"] == truth["samples"] > 0
    # one window per inference the device ran (N inputs, `infer 1 0` each, no retries on a clean link)
    assert sum(r["retries"] for r in recs) == 0 and len(recs) == N
    assert e["windows"] == len(truth["windows"]) == N
    # each window's energy is the sum of what was streamed, x VDD x 10 us
    want = [w["sum_ua"] * 1e-6 * (VDD_MV / 1000) * 1e-5 * 1e6 for w in truth["windows"]]
    got = [w["energy_uj"] for w in e["per_window"]]
    assert [w["samples"] for w in e["per_window"]] == [w["samples"] for w in truth["windows"]]
    assert got == pytest.approx(want, rel=1e-9)
    assert e["energy_uj_per_inf"] == pytest.approx(sum(want) / N, rel=1e-9)
    assert e["current_ma_in_windows"] == pytest.approx(ACTIVE_UA / 1000, rel=0.01)
    assert e["current_ma_idle"] == pytest.approx(IDLE_UA / 1000, rel=0.01)
    # the windows are the firmware's: as long as its own timing of each inference (host ns), give or take
    # a 10 us sample at each edge and the timestamp writes around the timed loop
    ticks_us = statistics.median(r["ticks"] / 1000 for r in recs)
    print(f"window_us_median={e['window_us_median']} device_ticks_us_median={ticks_us}")
    assert -20 <= e["window_us_median"] - ticks_us <= 150, (e["window_us_median"], ticks_us)
    # energy per inference = the active current x VDD x the windows' mean length (a host process can be
    # descheduled inside one timed inference, so that window is long: the mean, not the median, is compared)
    mean_window_us = e["samples_in_windows"] / e["windows"] * 10.0
    watts = ACTIVE_UA * 1e-6 * VDD_MV / 1000
    assert e["energy_uj_per_inf"] == pytest.approx(watts * mean_window_us, rel=0.05)
    assert e["energy_uj_median"] == pytest.approx(watts * e["window_us_median"], rel=0.1)
    # summary.json: the measured figure, labelled
    assert s["energy_source"] == "ppk2" and s["energy_uj_per_inf"] == e["energy_uj_per_inf"]
    assert "energy.json" in s["energy_note"] and "ampere meter" in s["energy_note"]
    assert "uJ per inference (PPK2)" in stdout
    assert not [p for p in out.iterdir() if p.name.startswith(".energy.json")]  # no temporary left


def test_a_pin_that_never_goes_high_is_no_energy(firmware, sim, model, tmp_path, capsys) -> None:
    """D0 not wired (here: the firmware without SNAPUQ_HOST_TIMESTAMP): the run's results stand, but there
    is no energy: energy null in summary.json, the reason in energy.json, exit 1 with the reason."""
    bridge = Bridge(firmware, None)
    out = tmp_path / "R"
    try:
        rc, _stdout, err = _harness(capsys, bridge.url, model, out, "--limit", "3", "--power",
                                    f"ppk2:{sim.port}")
    finally:
        bridge.close()
    assert rc == 1
    assert "timestamp pin (PPK2 logic input D0) never went high" in _one_line(err)
    s = json.loads((out / "summary.json").read_text())
    e = json.loads((out / "energy.json").read_text())
    assert s["n"] == 3 and s["mismatches_vs_host"] == 0
    assert s["energy_source"] == "ppk2" and s["energy_uj_per_inf"] is None and e["windows"] == 0


def test_power_refuses_without_a_ppk2_in_one_line(firmware, model, tmp_path, capsys, monkeypatch) -> None:
    """No meter, a wrong port, a port that is not a PPK2, no ppk2-api: one line, exit 1, --out untouched
    (the device is never asked: a port nobody listens on is given)."""
    import serial.tools.list_ports

    url = "socket://127.0.0.1:9"  # never reached: the meter is refused first
    out = tmp_path / "R"
    cases = {"ppk2": "expected ppk2:PORT", "ina219:/dev/i2c-1": "expected ppk2:PORT",
             f"ppk2:{tmp_path}/no-such-tty": "cannot open the PPK2's serial port"}  # fmt: skip
    for spec, msg in cases.items():
        rc, _o, err = _harness(capsys, url, model, out, "--limit", "2", "--power", spec)
        assert rc == 1 and msg in _one_line(err), (spec, err)
        assert not out.exists()
    # a serial port that answers nothing a PPK2 would (a pty nobody serves): not a PPK2
    master, slave = os.openpty()
    try:
        rc, _o, err = _harness(capsys, url, model, out, "--limit", "2", "--power",
                               f"ppk2:{os.ttyname(slave)}")
    finally:
        os.close(master)
        os.close(slave)
    assert rc == 1 and "no PPK2 answered there (no metadata within 1 s)" in _one_line(err), err
    assert not out.exists()
    # ppk2:auto with no PPK2 on USB
    if not any(p.product == "PPK2" for p in serial.tools.list_ports.comports()):
        rc, _o, err = _harness(capsys, url, model, out, "--limit", "2", "--power", "ppk2:auto")
        assert rc == 1 and "no PPK2 is connected" in _one_line(err), err
    # without the ppk2-api package
    monkeypatch.setitem(sys.modules, "ppk2_api.ppk2_api", None)
    rc, _o, err = _harness(capsys, url, model, out, "--limit", "2", "--power", "ppk2:/dev/ttyACM1")
    assert rc == 1 and "needs the ppk2-api package" in _one_line(err), err
    assert not out.exists()


def test_a_meter_that_never_streams_is_refused_before_any_inference() -> None:
    """start() returns only once samples flow (an inference before that would be a window the measurement
    never sees); a meter that stays silent is one line naming its port."""
    from snapuq.errors import SnapuqError
    from snapuq.harness.energy import PPK2Meter

    class Silent:
        in_waiting = 0

        def read(self, n: int) -> bytes:
            time.sleep(0.01)
            return b""

    class FakePPK2:
        ser = Silent()

        def start_measuring(self) -> None:
            pass

    m = object.__new__(PPK2Meter)
    m.port, m.ppk2, m._lock, m._stop, m._error, m._thread = "/dev/fake", FakePPK2(), threading.Lock(), \
        threading.Event(), None, None  # fmt: skip
    t0 = time.monotonic()
    with pytest.raises(SnapuqError, match=r"^PPK2 on /dev/fake: .*not start streaming.*none within 0.3 s"):
        m.start(live_s=0.3)
    assert 0.3 <= time.monotonic() - t0 < 3
    m._stop.set()
