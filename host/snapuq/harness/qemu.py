"""QEMU boards for the harness: ``--port qemu:m4`` / ``qemu:m7``.

Builds the firmware with ``make -C firmware`` when the image is missing or older than its
sources, boots ``qemu-system-arm`` with the UART on a free loopback TCP port and tears it down.
With ``icount=True`` QEMU runs ``-icount shift=0``: one instruction per nanosecond of virtual
time, so the firmware's 25 MHz SysTick counts exactly 40 instructions per tick. These are
instruction counts of an emulator without a pipeline model, not cycles of a real chip.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from snapuq import resources
from snapuq.errors import DeviceError, SnapuqError
from snapuq.modeldir import ModelPaths

FIRMWARE = resources.firmware_dir()

# QEMU's SYSCLK on the MPS2 boards; with -icount shift=0 virtual time is 1 ns per instruction.
QEMU_SYSCLK_HZ = 25_000_000
INSTR_PER_TICK_ICOUNT = 1_000_000_000 // QEMU_SYSCLK_HZ


@dataclass(frozen=True)
class QemuBoardSpec:
    name: str       # make target / board name reported by the firmware
    machine: str    # qemu -M
    cpu: str
    models: str     # the real board whose budgets the linker script uses


BOARDS: dict[str, QemuBoardSpec] = {
    "m4": QemuBoardSpec("qemu_m4", "mps2-an386", "cortex-m4", "nucleo_l432kc"),
    "m7": QemuBoardSpec("qemu_m7", "mps2-an500", "cortex-m7", "nucleo_f767zi"),
    # the STM32 port (firmware/port/stm32) on QEMU's STM32F405 (SYSCLK fixed at 168 MHz, no RCC/DWT model)
    "stm32f405": QemuBoardSpec("qemu_stm32f405", "netduinoplus2", "cortex-m4", "stm32f405rg"),
}


def board_spec(port: str) -> QemuBoardSpec:
    key = port.split(":", 1)[1] if ":" in port else port
    if key not in BOARDS:
        raise SnapuqError(f"unknown QEMU board '{port}' (known: {', '.join('qemu:' + k for k in BOARDS)})")
    return BOARDS[key]


def _newest_source_mtime(model_dir: Path | None) -> float:
    newest = 0.0
    for sub in ("app", "core", "port", "ld"):
        for p in (FIRMWARE / sub).rglob("*"):
            if p.suffix in (".c", ".h", ".ld"):
                newest = max(newest, p.stat().st_mtime)
    if model_dir is not None:
        for f in (ModelPaths.C_SOURCE, ModelPaths.C_HEADER):
            if (model_dir / f).exists():
                newest = max(newest, (model_dir / f).stat().st_mtime)
    return max(newest, (FIRMWARE / "Makefile").stat().st_mtime)


def firmware_path(spec: QemuBoardSpec, build_dir: Path, variant: str = "", budget: str = "board",
                  snap: bool = True) -> Path:
    d = spec.name + ("_full" if budget == "full" else "") + ("" if snap else "_nosnap") + variant
    return build_dir / d / "firmware.elf"


def build_firmware(spec: QemuBoardSpec, model_dir: Path | None, build_dir: Path | None = None,
                   force: bool = False, budget: str = "board", snap: bool = True, tflite: Path | None = None,
                   variant: str = "", quiet: bool = True) -> Path:
    """make -C firmware <board> MODEL=... (only when the image is stale). Returns the ELF path.
    tflite: a plain .tflite linked into a SNAP=0 image (make's TFLITE=)."""
    # absolute before anything else: make runs in firmware/ (-C), so a relative BUILD= would land
    # under firmware/ while this process looks for the ELF and its stamp relative to its own cwd
    build_dir = Path(build_dir or resources.work_dir("firmware")).resolve()
    elf = firmware_path(spec, build_dir, variant, budget, snap)
    if shutil.which("arm-none-eabi-gcc") is None:
        raise SnapuqError("arm-none-eabi-gcc not found "
                          "(Debian: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)")
    if model_dir is not None and snap and not ModelPaths(model_dir).c_source.exists():
        raise SnapuqError(f"{ModelPaths(model_dir).c_source} missing: run `snapuq export {model_dir}` first")
    cmd = ["make", "-C", str(FIRMWARE), spec.name, f"BUILD={build_dir}", f"BUDGET={budget}",
           f"SNAP={1 if snap else 0}", f"VARIANT={variant}", f"PYTHON={sys.executable}"]
    if model_dir is not None:
        cmd.append(f"MODEL={Path(model_dir).resolve()}")
    if tflite is not None:
        cmd.append(f"TFLITE={Path(tflite).resolve()}")
    build_dir.mkdir(parents=True, exist_ok=True)
    # the image records which model it was built for: an ELF of another model is rebuilt, however
    # new it is (an mtime check alone reused it, and every result mismatched)
    stamp = elf.parent / "model.sha256"
    want = _model_key(model_dir if snap else None, tflite)
    with open(build_dir / ".lock", "w") as lock:  # one make at a time per build dir (pytest -n)
        fcntl.flock(lock, fcntl.LOCK_EX)
        same_model = stamp.is_file() and stamp.read_text().strip() == want
        fresh = elf.exists() and elf.stat().st_mtime >= _newest_source_mtime(model_dir)
        if not force and same_model and fresh:
            return elf
        if elf.exists() and (force or not same_model):
            elf.unlink()  # make would consider it up to date by mtime
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            stamp.write_text(want + "\n")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise SnapuqError(f"firmware build failed ({' '.join(cmd)}):\n{tail}")
    if not quiet:
        print(proc.stdout)
    return elf


def _model_key(model_dir: Path | None, tflite: Path | None) -> str:
    import hashlib

    h = hashlib.sha256()
    if model_dir is not None:
        for p in (ModelPaths(model_dir).c_source, ModelPaths(model_dir).c_header):
            h.update(p.read_bytes() if p.is_file() else b"-")
    if tflite is not None:
        h.update(Path(tflite).read_bytes() if Path(tflite).is_file() else b"-")
    return h.hexdigest()


_PR_SET_PDEATHSIG = 1
_children: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()


def _die_with_parent_fn():
    """A preexec_fn for Popen: the child gets SIGKILL when this process dies, however it dies
    (SIGKILL included), via prctl(PR_SET_PDEATHSIG). Linux only; elsewhere None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def fn() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return fn


def popen_owned(args: list[str], **kw) -> subprocess.Popen:
    """subprocess.Popen for helper processes (QEMU, the host firmware) that must never outlive
    us: its own process group (a Ctrl-C at the terminal reaches only us; we stop it), SIGKILL
    on our death (PR_SET_PDEATHSIG), and a kill at interpreter exit."""
    kw.setdefault("start_new_session", True)
    proc = subprocess.Popen(args, preexec_fn=_die_with_parent_fn(), **kw)  # noqa: PLW1509
    _children.add(proc)
    return proc


def kill_owned(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a helper process and its process group: SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.wait(timeout=grace)


@atexit.register
def _kill_children() -> None:
    for proc in list(_children):
        try:
            kill_owned(proc, grace=2.0)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class QemuProcess:
    """A running qemu-system-arm with its UART on 127.0.0.1:<port>."""

    def __init__(self, spec: QemuBoardSpec, elf: Path, icount: bool = True, qemu: str = "qemu-system-arm",
                 plugin: str | None = None):
        if shutil.which(qemu) is None:
            raise SnapuqError(f"{qemu} not found (Debian: apt-get install qemu-system-arm)")
        self.spec = spec
        self.elf = elf
        self.icount = icount
        self.port = free_port()
        args = [qemu, "-M", spec.machine, "-nographic", "-monitor", "none", "-no-reboot",
                "-semihosting-config", "enable=on,target=native",
                "-serial", f"tcp:127.0.0.1:{self.port},server=on,wait=off,nodelay=on",
                "-kernel", str(elf)]
        if icount:
            args[1:1] = ["-icount", "shift=0"]
        if plugin:  # a TCG plugin with its arguments (snapuq.harness.cycles: the instruction stream)
            args[1:1] = ["-plugin", plugin]
        self.args = args
        self._closed = False
        self._died_first = False  # QEMU had exited by itself when close() came
        self.proc = popen_owned(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        try:
            self._wait_listening()
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return f"socket://127.0.0.1:{self.port}"

    def _wait_listening(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                raise DeviceError(f"qemu exited with {self.proc.returncode}: {out.strip()[:500]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
                # QEMU accepts one client; that probe consumed the connection slot briefly
                return
            except OSError:
                time.sleep(0.05)
        self.close()
        raise DeviceError(f"qemu did not open its serial port {self.port} within {timeout:.0f} s")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exited_by_itself(self) -> bool:
        """QEMU ended without us closing it (crash, a signal from outside), also when asked after
        close(): an error inside the run closes QEMU before the error is reported, and a firmware
        error must not be reported as \"QEMU exited\"."""
        return self._died_first if self._closed else not self.alive()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:  # a QEMU killed from outside may take a moment to be reapable after its socket closed
                self.proc.wait(timeout=0.1)
                self._died_first = True
            except subprocess.TimeoutExpired:
                pass
        kill_owned(self.proc)
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> QemuProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_serial(url: str, baudrate: int = 115200, timeout: float = 0.05):
    """pyserial for any URL: /dev/tty..., socket://host:port, rfc2217://host:port, loop://."""
    import serial

    try:
        return serial.serial_for_url(url, baudrate=baudrate, timeout=timeout)
    except (serial.SerialException, ValueError) as e:
        why = getattr(e, "strerror", None) or str(e).split(": [Errno")[0]
        raise DeviceError(f"--port {url}: cannot open the serial port ({why})") from e


def build_host_firmware(build_dir: Path, model_dir: Path | None = None, sanitize: bool = False) -> Path:
    """make -C firmware host: the firmware as a host process on stdin/stdout (with the model's
    SNAP build when model_dir is given, else a protocol-only build without a model)."""
    build_dir = Path(build_dir).resolve()  # make -C firmware: a relative BUILD= would land under firmware/
    build_dir.mkdir(parents=True, exist_ok=True)
    cmd = ["make", "-C", str(FIRMWARE), "host", f"BUILD={build_dir}", f"SANITIZE={1 if sanitize else 0}",
           f"PYTHON={sys.executable}"]
    cmd += [f"MODEL={Path(model_dir).resolve()}"] if model_dir is not None else ["SNAP=0"]
    with open(build_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise SnapuqError(f"host firmware build failed ({' '.join(cmd)}):\n{tail}")
    d = "host" + ("_san" if sanitize else "") + ("" if model_dir is not None else "_nosnap")
    return build_dir / d / "snapuq_fw"


class PipeSerial:
    """pyserial-like wrapper over a host firmware process (stdin/stdout pipes)."""

    def __init__(self, exe: Path):
        self.proc = popen_owned([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, bufsize=0)
        self.timeout: float | None = 0.05

    def write(self, data: bytes) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()
        return len(data)

    def read(self, size: int = 1) -> bytes:
        assert self.proc.stdout is not None
        r, _, _ = select.select([self.proc.stdout], [], [], self.timeout or 0)
        if not r:
            return b""
        return os.read(self.proc.stdout.fileno(), max(1, size))

    def reset_input_buffer(self) -> None:
        while self.read(4096):
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f:
                f.close()
        kill_owned(self.proc)
