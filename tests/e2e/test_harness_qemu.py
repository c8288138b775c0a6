"""End to end on emulated Cortex-M boards: the firmware builds for qemu_m4 / qemu_m7 with
-Werror, the harness streams the digits test split through QEMU over a TCP serial port and
every device result equals the host int8 reference; resume after a kill loses and duplicates
nothing; random byte streams leave the board answering."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from snapuq.harness.protocol import Device
from snapuq.harness.qemu import QemuProcess, board_spec, build_firmware, open_serial

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

MODEL = ROOT / "models" / "digits"
BUILD = ROOT / "build" / "test-firmware"

pytestmark = [
    pytest.mark.qemu,
    pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm missing"),
    pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc missing"),
    pytest.mark.skipif(not (MODEL / "snapuq_model.c").exists(), reason="models/digits not exported"),
]


def _harness(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "host" / "harness.py"), "--model", str(MODEL), "--dataset", "digits",
           "--split", "test", "--build-dir", str(BUILD), "--no-progress", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


@pytest.mark.parametrize("board", ["qemu_m4", "qemu_m7"])
def test_firmware_builds_with_werror(board: str) -> None:
    elf = build_firmware(board_spec("qemu:" + board.split("_")[1]), MODEL, BUILD)
    assert elf.exists() and elf.stat().st_size > 10_000
    flags = (elf.parent / "cflags.txt").read_text()
    assert "-Werror" in flags and "-Wall" in flags and "-Wextra" in flags


def test_harness_qemu_m4_200_inputs_match_host(tmp_path: Path) -> None:
    out = tmp_path / "R"
    _harness("--port", "qemu:m4", "--limit", "200", "--out", str(out))
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 200 and s["board"] == "qemu_m4"
    assert s["mismatches_vs_host"] == 0
    assert s["latency"]["cycles_median"] > 0 and s["latency"]["cycles_unit"] == "qemu_instructions"
    assert 0 < s["latency"]["snap_cycles_median"] < s["latency"]["model_cycles_median"]
    assert s["flash_bytes"] > 0 and s["arena_bytes"] > 0 and s["stack_peak_bytes"] > 0
    assert s["ram_peak_bytes"] > s["arena_bytes"]
    assert s["flash_bytes"] <= s["flash_budget_bytes"] == 256 * 1024
    assert s["ram_budget_bytes"] == 64 * 1024
    assert s["energy_source"] == "model" and s["energy_uj_per_inf"] > 0
    lines = (out / "results.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert [r["i"] for r in recs] == list(range(200))
    assert all(r["match"] for r in recs)
    assert s["accuracy"] > 0.5
    # instruction counts vary only a little with the data (no data-dependent early exits)
    cyc = [r["cycles"] for r in recs]
    assert max(cyc) < 1.01 * min(cyc)


def test_harness_qemu_m7(tmp_path: Path) -> None:
    out = tmp_path / "R7"
    _harness("--port", "qemu:m7", "--limit", "20", "--out", str(out))
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 20 and s["mismatches_vs_host"] == 0 and s["board"] == "qemu_m7"
    assert s["ram_budget_bytes"] == 512 * 1024 and s["flash_budget_bytes"] == 2048 * 1024


def test_harness_streams_cid_segments(tmp_path: Path) -> None:
    """--stream sends the eval's CID stream (clean, corrupted, clean, ...) and reports U per segment."""
    out = tmp_path / "S"
    _harness("--port", "qemu:m4", "--stream", "--segment", "100", "--severity", "5", "--limit", "160",
             "--out", str(out))  # fmt: skip
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 160 and s["mismatches_vs_host"] == 0
    assert set(s["stream"]) == {"clean", "shot_noise"}
    assert s["stream"]["clean"]["n"] == 100 and s["stream"]["shot_noise"]["n"] == 60
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["segment"] for r in recs] == ["clean"] * 100 + ["shot_noise"] * 60
    # the corrupted frames are really different inputs from the clean split
    assert s["stream"]["shot_noise"]["u_mean"] != s["stream"]["clean"]["u_mean"]


def test_kill_and_resume_gives_one_line_per_input(tmp_path: Path) -> None:
    out = tmp_path / "RR"
    n = 40
    cmd = [sys.executable, str(ROOT / "host" / "harness.py"), "--model", str(MODEL), "--dataset", "digits",
           "--split", "test", "--build-dir", str(BUILD), "--no-progress", "--port", "qemu:m4",
           "--limit", str(n), "--out", str(out)]
    build_firmware(board_spec("qemu:m4"), MODEL, BUILD)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    res = out / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if res.exists() and len(res.read_bytes().splitlines()) >= 8:
            break
        assert p.poll() is None, "harness ended before it could be killed"
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)  # the harness and its QEMU
    p.wait()
    before = len(res.read_bytes().splitlines())
    assert 8 <= before < n
    # a torn last line (as a kill in the middle of a write leaves) must be dropped, not kept
    with open(res, "a") as f:
        f.write('{"i": 99999, "torn')
    _harness("--port", "qemu:m4", "--limit", str(n), "--out", str(out), "--resume")
    recs = [json.loads(x) for x in res.read_text().splitlines()]
    assert sorted(r["i"] for r in recs) == list(range(n))
    assert len(recs) == n
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == n and s["mismatches_vs_host"] == 0
    # resuming with other settings is refused
    p2 = _harness("--port", "qemu:m4", "--limit", str(n + 1), "--out", str(out), "--resume", check=False)
    assert p2.returncode == 1 and "different run" in p2.stderr


def test_qemu_board_survives_random_streams() -> None:
    spec = board_spec("qemu:m4")
    elf = build_firmware(spec, MODEL, BUILD)
    rng = random.Random(7)
    with QemuProcess(spec, elf, icount=False) as q:
        dev = Device(open_serial(q.url), timeout=10)
        dev.wait_boot(timeout=20)
        dev.command("timeout 100 0")
        for _ in range(25):
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            dev.send(junk)
            dev.sync(timeout=2.0, attempts=6)
            assert q.alive()
        prof = dev.profile()
        assert prof["loaded"] == 1
        # -icount off here, but one input twice under the same firmware gives the same results
        x = bytes(rng.randrange(256) for _ in range(int(prof["in_bytes"])))
        r1 = dev.run_input(x)[1]
        r2 = dev.run_input(x)[1]
        assert r1 == r2
        st = dev.stats()
        assert st["errors"] > 0 and st["arena"] > 0
        dev.close()


def test_platformio_offline_env_qemu_m4(tmp_path: Path) -> None:
    pio = Path(sys.executable).parent / "pio"
    if not pio.exists():
        pytest.skip("platformio not installed in the venv")
    if not (ROOT / ".pio-core" / "packages" / "tool-scons").exists():  # what tools/setup.sh does once
        subprocess.run([str(pio), "pkg", "install", "-g", "-t",
                        f"symlink://{ROOT}/firmware/platforms/tool-scons"], check=True, capture_output=True,
                       env=dict(os.environ, PLATFORMIO_CORE_DIR=str(ROOT / ".pio-core")))
    # a plain shell: no PLATFORMIO_* variable at all (platformio.ini's core_dir finds .pio-core);
    # only the build output goes to a temporary folder
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLATFORMIO_")}
    env["PLATFORMIO_BUILD_DIR"] = str(tmp_path / "pio")
    p = subprocess.run([str(pio), "run", "-e", "qemu_m4"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    elf = tmp_path / "pio" / "qemu_m4" / "program.elf"
    assert elf.exists()
    out = tmp_path / "Rpio"
    _harness("--port", "qemu:m4", "--firmware", str(elf), "--limit", "20", "--out", str(out))
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 20 and s["mismatches_vs_host"] == 0 and s["latency"]["cycles_median"] > 0


def _children_named(pid: int, name: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index(b"(") + 1:st.rindex(b")")].decode(errors="replace")
        ppid = int(st.rsplit(b")", 1)[1].split()[1])
        if ppid == pid and name in comm:
            out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_qemu_dies_with_the_harness(tmp_path: Path, sig: int) -> None:
    """The harness alone (not its process group) gets SIGKILL / SIGTERM: its QEMU must not survive;
    on SIGTERM the harness writes summary.json marked incomplete and says so in one line."""
    out = tmp_path / "K"
    build_firmware(board_spec("qemu:m4"), MODEL, BUILD)
    cmd = [sys.executable, str(ROOT / "host" / "harness.py"), "--model", str(MODEL), "--dataset", "digits",
           "--split", "test", "--build-dir", str(BUILD), "--no-progress", "--port", "qemu:m4",
           "--limit", "300", "--out", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    res = out / "results.jsonl"
    deadline = time.monotonic() + 300
    qemu: list[int] = []
    while time.monotonic() < deadline:
        qemu = qemu or _children_named(p.pid, "qemu-system")
        if res.exists() and len(res.read_bytes().splitlines()) >= 3:
            break
        assert p.poll() is None, p.stderr.read() if p.stderr else ""
        time.sleep(0.05)
    assert len(qemu) == 1
    p.send_signal(sig)
    p.wait(timeout=30)
    err = p.stderr.read() if p.stderr else ""
    deadline = time.monotonic() + 10
    while _alive(qemu[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(qemu[0]), f"QEMU {qemu[0]} outlived its harness ({signal.Signals(sig).name})"
    if sig == signal.SIGTERM:
        assert p.returncode == 130 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        s = json.loads((out / "summary.json").read_text())
        assert s["complete"] is False and 3 <= s["n"] < 300 and s["n_planned"] == 300


def test_qemu_killed_mid_run_is_one_line_and_incomplete(tmp_path: Path) -> None:
    out = tmp_path / "Q"
    build_firmware(board_spec("qemu:m4"), MODEL, BUILD)
    cmd = [sys.executable, str(ROOT / "host" / "harness.py"), "--model", str(MODEL), "--dataset", "digits",
           "--split", "test", "--build-dir", str(BUILD), "--no-progress", "--port", "qemu:m4",
           "--limit", "300", "--out", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    res = out / "results.jsonl"
    deadline = time.monotonic() + 300
    qemu: list[int] = []
    while time.monotonic() < deadline:
        qemu = qemu or _children_named(p.pid, "qemu-system")
        if res.exists() and len(res.read_bytes().splitlines()) >= 3:
            break
        assert p.poll() is None, p.stderr.read() if p.stderr else ""
        time.sleep(0.05)
    os.kill(qemu[0], signal.SIGKILL)
    p.wait(timeout=120)
    err = p.stderr.read() if p.stderr else ""
    assert p.returncode == 1 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "QEMU exited" in err and "--resume" in err, err
    s = json.loads((out / "summary.json").read_text())
    assert s["complete"] is False and s["n"] >= 3


def test_firmware_built_for_another_model_is_rebuilt() -> None:
    """An ELF newer than its sources but built for another model must not be reused."""
    spec = board_spec("qemu:m4")
    elf = build_firmware(spec, MODEL, BUILD)
    stamp = elf.parent / "model.sha256"
    good = stamp.read_text()
    stamp.write_text("0" * 64 + "\n")  # as if the last build was for another model
    before = elf.stat().st_mtime_ns
    elf2 = build_firmware(spec, MODEL, BUILD)
    assert elf2 == elf and elf.stat().st_mtime_ns != before and stamp.read_text() == good


def test_relative_paths_are_taken_from_the_callers_directory(tmp_path: Path) -> None:
    """--build-dir, --out and --model relative to the caller's cwd: the firmware is built there (not
    under firmware/, where `make -C firmware` runs) and the run succeeds."""
    stray = ROOT / "firmware" / "fw-rel"
    shutil.rmtree(stray, ignore_errors=True)
    cmd = [sys.executable, "-m", "snapuq.cli", "harness", "--port", "qemu:m4", "--limit", "3",
           "--no-progress", "--model", os.path.relpath(MODEL, tmp_path), "--build-dir", "fw-rel",
           "--out", "R"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    made_stray = stray.exists()
    shutil.rmtree(stray, ignore_errors=True)
    assert p.returncode == 0 and p.stderr.strip() == "", p.stdout + p.stderr
    assert not made_stray
    built = tmp_path / "fw-rel" / "qemu_m4"
    assert (built / "firmware.elf").is_file() and (built / "model.sha256").is_file()
    s = json.loads((tmp_path / "R" / "summary.json").read_text())
    assert s["n"] == 3 and s["mismatches_vs_host"] == 0


def test_model_too_big_for_the_board_is_the_firmwares_own_line(tmp_path: Path) -> None:
    """A board image whose RAM pool is too small for the model (app buffers grown to leave ~5 KB of
    pool on qemu_m4): the harness CLI exits 1 with one stderr line that carries the firmware's own
    `e-arena need=N have=M msg=...` line verbatim (not "no model", not "QEMU exited")."""
    import re

    cdefs = "CDEFS=-USNAPUQ_APP_FIT_CAPACITY -DSNAPUQ_APP_FIT_CAPACITY=4400u"
    make = ["make", "-C", str(ROOT / "firmware"), "qemu_m4", f"BUILD={BUILD}", f"MODEL={MODEL}",
            "VARIANT=_arena_tiny", cdefs]
    b = subprocess.run(make, capture_output=True, text=True, timeout=600)
    assert b.returncode == 0, b.stderr[-2000:]
    elf = BUILD / "qemu_m4_arena_tiny" / "firmware.elf"
    p = _harness("--port", "qemu:m4", "--firmware", str(elf), "--limit", "2", "--out", str(tmp_path / "R"),
                 check=False)
    err = p.stderr.strip()
    assert p.returncode == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, p.stderr
    m = re.search(r'e-arena need=(\d+) have=(\d+) msg="model does not fit the board\'s RAM budget"$', err)
    assert m and int(m.group(1)) > int(m.group(2)) > 0, err
    assert "QEMU exited" not in err and not (tmp_path / "R" / "results.jsonl").exists()


def test_uploaded_blob_gets_snap_bit_exact_with_host() -> None:
    """`model` upload of a .snapuq blob: the firmware reads the blob's SNAP section with the core
    blob reader and reports U for the uploaded model, equal to the host's integer reference. The
    blob's p_err table (or logistic bias) differs from the compiled-in model's, so equal U proves the uploaded
    constants are the ones used; a truncated blob gets one e-blob line."""
    import copy

    from snapuq.commands.micropython import host_reference, load_model_files, sample_inputs
    from snapuq.native.blob import write_blob

    spec = board_spec("qemu:m4")
    elf = build_firmware(spec, MODEL, BUILD, budget="full")
    tfl, man = load_model_files(MODEL)
    man2 = copy.deepcopy(man)
    if man2["snap"].get("combine") == "perr_alarm":
        man2["snap"]["perr"]["lut"] = [min(65536, v + 5000) for v in man2["snap"]["perr"]["lut"]]
    else:
        man2["snap"]["logistic"]["b0_q16"] += 3 * 65536
    blob = write_blob(tfl, man2)
    x = sample_inputs(man, 5)
    _, ref = host_reference(tfl, man2, x)
    _, ref_builtin = host_reference(tfl, man, x)
    assert ref["U16"].tolist() != ref_builtin["U16"].tolist()
    with QemuProcess(spec, elf, icount=False) as q:
        dev = Device(open_serial(q.url), timeout=120)  # QEMU's UART takes ~3 KB/s: ~45 s per blob
        dev.wait_boot(timeout=20)
        short = blob[:4000]
        rep = dev.command(f"model {len(short)} 0x{zlib.crc32(short):08x}", payload=short, check=False)
        assert any(ln.startswith("e-blob") and "offsets" in ln for ln in rep.errors), rep.errors
        loaded = dev.load_model(blob, timeout=300)
        assert loaded["snap"] == 1 and loaded["bytes"] == len(blob)
        for i, xi in enumerate(x):
            res = dev.run_input(np.asarray(xi, np.int8).tobytes(), check_outputs=False)[1]
            assert res["u"] == int(ref["U16"][i]) and res["ebar"] == ref["ebar16"][i].tolist()
        assert dev.profile()["taps"] == len(man["snap"]["taps"])
        dev.close()
