"""Bad files, through the real command line (snapuq.cli.main in this process, on real files): a calib.json
or config.json that `snapuq export` refuses is refused by `snapuq eval` (and calibrate, harness) in the same
one line (snapuq.formats), and the harness's --out trusts nothing it reads back (snapuq.harness.results):
tampered result lines are dropped and run again, a model changed in place is refused on --resume, a run
that cannot reach its device leaves --out as it was, and a second run on the same --out stops in one line.

The harness runs against the host build of the firmware (`make -C firmware host MODEL=models/digits`, the
same app and core as on a board) behind a TCP socket, so `--port socket://...` exercises the real serial
client, runner and result files without QEMU."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from snapuq import cli
from snapuq.formats import read_calib, read_config
from snapuq.harness.qemu import build_host_firmware, free_port, kill_owned, popen_owned

ROOT = Path(__file__).resolve().parents[2]  # the checkout (tests run from it)

MODEL = ROOT / "models" / "digits"
BUILD = ROOT / "build" / "test-harness-host"

pytestmark = pytest.mark.skipif(not (MODEL / "snapuq_model.c").exists(), reason="models/digits not exported")


def _calib() -> dict:
    return json.loads((MODEL / "calib.json").read_text())


def _config() -> dict:
    return json.loads((MODEL / "config.json").read_text())


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _main(capsys, *argv: str) -> tuple[int, str]:
    rc = cli.main(list(argv))
    return rc, capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# calib.json / config.json: one validator, every reader


def _set(path: str, value) -> Callable[[dict], None]:
    """An edit of a JSON object at a dotted path (list indices as numbers); value DEL removes the key."""

    def edit(d: dict) -> None:
        keys = [int(k) if k.lstrip("-").isdigit() else k for k in path.split(".")]
        for k in keys[:-1]:
            d = d[k]
        if value is DEL:
            del d[keys[-1]]
        else:
            d[keys[-1]] = value

    return edit


DEL = object()

# (case, edit of calib.json, what the one line must say)
CALIB_CASES = [
    ("hinge.sd < 0 (eval gave ID-vs-OOD AUROC 0.0, rc 0)", _set("hinge.sd", -0.5), "hinge.sd must be > 0"),
    ("hinge.sd = 0", _set("hinge.sd", 0), "hinge.sd must be > 0"),
    ("alarm.k < 0 (passed eval silently)", _set("alarm.k", -1.0), "alarm.k must be in [2^-16, 2^14)"),
    ("u_threshold NaN (passed eval silently)", _set("u_threshold", math.nan), "u_threshold must be finite"),
    ("u_threshold 2", _set("u_threshold", 2.0), "u_threshold must be <= 1"),
    ("weights strings (traceback in SnapScorer.features)", _set("weights", ["a", "b"]),
     "weights[0] must be a number"),
    ("weights mis-sized (traceback)", _set("weights", [0.2, 0.2, 0.1]), "weights must have 2 values, got 3"),
    ("weight negative", _set("weights.1", -0.1), "weights[1] must be >= 0"),
    ("tap sd a string", _set("taps.0.sd", "0.3"), "taps[0].sd must be a number"),
    ("tap sd 0", _set("taps.1.sd", 0.0), "taps[1].sd must be > 0"),
    ("tap two_sided a string", _set("taps.0.two_sided", "yes"), "taps[0].two_sided must be true or false"),
    ("tap mean Infinity", _set("taps.0.mean", math.inf), "taps[0].mean must be finite"),
    ("tap d vs config.json", _set("taps.0.d", 31), "taps[0].d is 31, config.json's tap 0 has d 32"),
    ("three taps for a two-tap model", lambda c: c["taps"].append(dict(c["taps"][0])),
     "taps has 3 entries, config.json has 2 taps"),
    ("no taps", _set("taps", DEL), "taps is missing"),
    ("beta of 2", _set("beta", [0.0, 0.0]), "beta must have 3 values"),
    ("conf.alpha 2", _set("conf.alpha", 2), "conf.alpha must be <= 1"),
    ("perr.knots 256", lambda c: c["perr"]["knots"].pop(), "perr.knots must have 257 values"),
    ("perr knot above 1", _set("perr.knots.7", 1.5), "perr.knots[7] must be <= 1"),
    ("perr without alarm (silently the logistic form)", _set("alarm", DEL), "'perr' without 'alarm'"),
    ("input tap sigma short", lambda c: c["intap"]["sigma"].pop(), "intap.sigma must have 32 values"),
    ("input tap sigma 0", _set("intap.sigma.3", 0), "intap.sigma[3] must be > 0"),
    ("input tap 4 x 8 for an 8 x 8 input", _set("intap.rows", 4), "intap views the input as 4 x 8"),
    ("input tap weight a string", _set("intap.weight", "0.5"), "intap.weight must be a number"),
    ("literal variant weights mis-sized", _set("variants.literal.weights", [1.0]),
     "variants.literal.weights must have 2 values"),
    ("literal variant one-sided with c_l", _set("variants.literal.taps.0.c_l", 0.5),
     "variants.literal.taps[0] is one-sided"),
    ("taps not a list", lambda c: c.clear() or c.update({"taps": 3}), "taps must be a list"),
]

# (case, edit of config.json, what the one line must say)
CONFIG_CASES = [
    ("seed -1", _set("seed", -1), "seed must be an integer in [0, 4294967295], got -1"),
    ("seed a string", _set("seed", "0"), "seed must be an integer, got '0'"),
    ("seed 1.5", _set("seed", 1.5), "seed must be an integer, got 1.5"),
    ("input_shape with a string", _set("input_shape.1", "8"), "input_shape[1] must be an integer"),
    ("tap d 0", _set("taps.0.d", 0), "taps[0].d must be an integer in [1, 16384]"),
    ("class_names vs n_classes", _set("class_names", ["0", "1"]), "class_names must have 10 values"),
    ("recipe lr -1", _set("recipe", {"lr": -1}), "config.json recipe: --lr must be a finite number > 0"),
    ("recipe unknown key", _set("recipe", {"epochs": 3, "bogus": 1}), "recipe: unknown keys bogus"),
    ("recipe not an object", _set("recipe", [1]), "recipe must be an object"),
    ("variant unknown", _set("variant", "odds"), "variant must be one of best, literal"),
]


def _model_copy(root: Path, name: str, calib=None, config=None) -> Path:
    d = root / name
    d.mkdir()
    c, g = _calib(), _config()
    if calib is not None:
        calib(c)
    if config is not None:
        config(g)
    (d / "calib.json").write_text(json.dumps(c))  # NaN / Infinity as Python's json writes them
    (d / "config.json").write_text(json.dumps(g))
    for f in ("model.keras", "model_int8.tflite", "snapuq.json"):  # present, never reached
        (d / f).symlink_to(MODEL / f)
    return d


def test_shipped_models_pass_the_validators() -> None:
    shipped = sorted(p.parent for p in (ROOT / "models").glob("*/calib.json")  # not a running train's
                     if not p.parent.name.startswith(".") and "_seed" not in p.parent.name)  # fmt: skip
    assert {"digits", "keywords", "resnet8"} <= {d.name for d in shipped}, shipped  # tracked in git
    for d in shipped:
        raw = json.loads((d / "config.json").read_text())
        cfg = read_config(d / "config.json", need=("dataset", "input_shape", "taps"))
        assert cfg["dataset"] == raw["dataset"] and list(cfg["taps"]) == list(raw["taps"]), d
        assert read_calib(d / "calib.json", cfg), d


@pytest.mark.parametrize("case,edit,want", CALIB_CASES, ids=[c[0] for c in CALIB_CASES])
def test_bad_calib_is_refused_alike_by_eval_and_export(tmp_path: Path, capsys, case, edit, want) -> None:
    d = _model_copy(tmp_path, "M", calib=edit)
    rc_e, err_e = _main(capsys, "eval", str(d), "--report", str(tmp_path / "R"), "--no-progress")
    rc_x, err_x = _main(capsys, "export", str(d))
    line_e, line_x = _one_line(err_e), _one_line(err_x)
    assert rc_e == rc_x == 1
    assert line_e.removeprefix("snapuq eval: error: ") == line_x.removeprefix("snapuq export: error: ")
    assert f"{d / 'calib.json'}: " in line_e and want in line_e, line_e
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("case,edit,want", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_bad_config_is_refused_alike_by_every_reader(tmp_path: Path, capsys, case, edit, want) -> None:
    d = _model_copy(tmp_path, "M", config=edit)
    lines = {}
    for argv in (["eval", str(d), "--report", str(tmp_path / "R")], ["export", str(d)], ["calibrate", str(d)],
                 ["harness", "--port", "qemu:m4", "--model", str(d), "--out", str(tmp_path / "H")]):
        rc, err = _main(capsys, *argv)
        assert rc == 1, (argv, err)
        lines[argv[0]] = _one_line(err).removeprefix(f"snapuq {argv[0]}: error: ")
    assert len(set(lines.values())) == 1, lines
    assert want in lines["eval"] and str(d / "config.json") in lines["eval"], lines
    assert not (tmp_path / "H").exists()


def test_calibrate_replaces_a_calib_json_that_export_refuses(tmp_path: Path, capsys) -> None:
    """`snapuq calibrate` repairs a bad calib.json: it says what was wrong and writes a valid one."""
    d = _model_copy(tmp_path, "M", calib=_set("hinge.sd", -0.5))
    (d / "snapuq.json").unlink()  # no int8 export to refresh
    rc, err = _main(capsys, "calibrate", str(d))
    assert rc == 0, err
    assert f"warning: {d / 'calib.json'}: hinge.sd must be > 0, got -0.5; replacing it" in err
    new = read_calib(d / "calib.json", read_config(d / "config.json"))
    assert new["hinge"]["sd"] > 0


def test_in_memory_calibration_is_validated_too() -> None:
    """SnapScorer.from_calib and build_snap (the float score and the fixed-point export) share the check."""
    from snapuq.errors import ModelFormatError
    from snapuq.export.fixedpoint import build_snap
    from snapuq.uq.score import SnapScorer

    c = _calib()
    c["weights"] = ["a", "b"]
    with pytest.raises(ModelFormatError, match=r"calib.json: weights\[0\] must be a number"):
        SnapScorer.from_calib(c)
    with pytest.raises(ModelFormatError, match=r"calib.json: weights\[0\] must be a number"):
        build_snap(c, {})
    good = _calib()
    assert SnapScorer.from_calib(good).params is good


# ----------------------------------------------------------------------------------------------
# the harness: a TCP serial port in front of the host firmware


class FirmwareBridge:
    """socket://127.0.0.1:PORT in front of the host build of the firmware: each connection gets a fresh
    snapuq_fw process (a board after reset). `gate` cleared holds a new connection's device back (a board
    that has not booted yet); `connections` counts the connections seen."""

    def __init__(self, exe: Path) -> None:
        self.exe = exe
        self.gate = threading.Event()
        self.gate.set()
        self.connections = 0
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
                cli_sock, _ = self.lsock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(cli_sock,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        while not self.gate.wait(0.2):
            if self.stop.is_set():
                s.close()
                return
        proc = popen_owned([str(self.exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, bufsize=0)
        self.procs.append(proc)

        def down() -> None:  # device -> harness
            while True:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    return
                try:
                    s.sendall(chunk)
                except OSError:
                    return

        threading.Thread(target=down, daemon=True).start()
        try:
            while True:  # harness -> device
                chunk = s.recv(4096)
                if not chunk:
                    break
                proc.stdin.write(chunk)
        except OSError:
            pass
        finally:
            s.close()
            kill_owned(proc)

    def close(self) -> None:
        self.stop.set()
        self.gate.set()
        self.lsock.close()
        for p in self.procs:
            kill_owned(p)


@pytest.fixture(scope="module")
def bridge():
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("gcc / make missing (the host firmware build)")
    b = FirmwareBridge(build_host_firmware(BUILD, MODEL))
    yield b
    b.close()


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    """A copy of models/digits with what the harness reads (its files may be changed in place)."""
    d = tmp_path / "digits"
    d.mkdir()
    for f in ("config.json", "calib.json", "snapuq.json", "model_int8.tflite", "snapuq_model.c",
              "snapuq_model.h"):
        shutil.copy(MODEL / f, d / f)
    return d


def _harness(capsys, bridge: FirmwareBridge, model: Path, out: Path, *args: str) -> tuple[int, str]:
    return _main(capsys, "harness", "--port", bridge.url, "--model", str(model), "--dataset", "digits",
                 "--no-progress", "--out", str(out), *args)


def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def _files(out: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(out.iterdir())}


def test_resume_keeps_only_lines_that_check_out(bridge, model: Path, tmp_path: Path, capsys) -> None:
    """Before: lines with i = 999 or -3 and `pred: null` with `match: true` were kept (n = 9 for --limit 8)
    and a line without `cycles` crashed write_summary after every input ran. Now each line is checked
    against the run and the host reference; what fails is dropped and its input runs again."""
    out = tmp_path / "R"
    rc, err = _harness(capsys, bridge, model, out, "--limit", "8")
    assert rc == 0, err
    good = {r["i"]: r for r in _lines(out)}
    assert sorted(good) == list(range(8)) and all(r["match"] for r in good.values())
    bad = copy.deepcopy(good)
    bad[2]["pred"] = None  # match still true
    del bad[3]["cycles"]
    bad[4]["u"] += 1  # not what the device (or the host) computes for input 4
    bad[5]["label"] = (bad[5]["label"] + 1) % 10
    bad[6]["i"] = "6"
    bad[7]["u"] = math.nan
    text = "".join(json.dumps(bad[i], sort_keys=True) + "\n" for i in range(8))
    text += json.dumps({**good[0], "i": 999}) + "\n" + json.dumps({**good[0], "i": -3}) + "\n"
    text += json.dumps(good[1], sort_keys=True) + "\n" + "[1, 2]\n" + '{"i": 5, "torn'
    (out / "results.jsonl").write_text(text)

    rc, err = _harness(capsys, bridge, model, out, "--limit", "8", "--resume")
    assert rc == 0, err
    assert "--resume: kept 2 lines of results.jsonl, dropped 11" in err, err
    recs = _lines(out)
    assert [r["i"] for r in recs] == list(range(8))
    assert recs[0] == good[0] and recs[1] == good[1]  # kept as they were, not run again
    assert all(r["match"] and isinstance(r["pred"], int) and r["cycles"] >= 0 for r in recs)
    assert [r["u"] for r in recs] == [good[i]["u"] for i in range(8)]
    s = json.loads((out / "summary.json").read_text())
    assert s["complete"] and s["n"] == 8 and s["mismatches_vs_host"] == 0


def test_resume_refuses_a_model_changed_in_place(bridge, model: Path, tmp_path: Path, capsys) -> None:
    """Before: run.json named the model by path, so a model replaced in place gave a "complete" run of old
    and new results. Now it pins the content of the files the device result depends on."""
    out = tmp_path / "R"
    rc, err = _harness(capsys, bridge, model, out, "--limit", "3")
    assert rc == 0, err
    before = _files(out)
    meta = json.loads((out / "run.json").read_text())
    assert set(meta["model_files"]) == {"model_int8.tflite", "snapuq.json", "calib.json", "snapuq_model.c",
                                        "snapuq_model.h"}
    assert meta["device"]["model_sha256"] and meta["inputs_sha256"]
    for name in ("calib.json", "snapuq.json", "snapuq_model.c"):
        p = model / name
        orig = p.read_bytes()
        p.write_bytes(orig + b"\n")  # the same content to a path check, another file to a hash
        rc, err = _harness(capsys, bridge, model, out, "--limit", "3", "--resume")
        line = _one_line(err)
        assert rc == 1 and "was written for a different run" in line and f"model_files.{name}" in line, line
        p.write_bytes(orig)
    rc, err = _harness(capsys, bridge, model, out, "--limit", "4", "--resume")
    assert rc == 1 and "limit 3 -> 4" in _one_line(err)
    assert _files(out) == before  # refusals leave --out as it was
    # the same files back: the run resumes (nothing left to do) and is complete
    rc, err = _harness(capsys, bridge, model, out, "--limit", "3", "--resume")
    assert rc == 0 and "dropped" not in err, err
    # another firmware on the board (here: run.json says the first session ran the DSP kernels)
    meta = json.loads((out / "run.json").read_text())
    meta["device"]["kernels"] = "dsp"
    (out / "run.json").write_text(json.dumps(meta))
    before = _files(out)
    rc, err = _harness(capsys, bridge, model, out, "--limit", "3", "--resume")
    line = _one_line(err)
    assert rc == 1 and "different device or firmware: kernels dsp -> ref" in line, line
    assert _files(out) == before
    # result lines with no run.json to tie them to
    (out / "run.json").unlink()
    rc, err = _harness(capsys, bridge, model, out, "--limit", "3", "--resume")
    assert rc == 1 and "run.json is missing" in _one_line(err)


def test_a_run_that_cannot_reach_its_device_leaves_out_alone(bridge, model: Path, tmp_path: Path,
                                                            capsys) -> None:
    """Before: a fresh run with a wrong --port into a used --out deleted summary.json and rewrote run.json
    before contacting the device."""
    out = tmp_path / "R"
    rc, err = _harness(capsys, bridge, model, out, "--limit", "2")
    assert rc == 0, err
    before = _files(out)
    wrong = f"socket://127.0.0.1:{free_port()}"
    for extra in (["--limit", "5"], ["--limit", "2", "--resume"]):
        rc = cli.main(["harness", "--port", wrong, "--model", str(model), "--dataset", "digits",
                       "--no-progress", "--out", str(out), *extra])
        err = capsys.readouterr().err
        assert rc == 1, err
        assert _files(out) == before
    _one_line(err)
    # a new --out is not left behind either
    rc = cli.main(["harness", "--port", wrong, "--model", str(model), "--no-progress", "--out",
                   str(tmp_path / "new"), "--limit", "2"])
    assert rc == 1 and not (tmp_path / "new").exists()
    capsys.readouterr()


def test_a_second_run_on_the_same_out_is_refused(bridge, model: Path, tmp_path: Path, capsys) -> None:
    """Before: two runs on one --out both exited 0 and one run's lines were lost. Now --out is locked."""
    out = tmp_path / "R"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"), TF_CPP_MIN_LOG_LEVEL="2")
    bridge.gate.clear()  # the first run's board does not answer until the second run has tried
    seen = bridge.connections
    first = subprocess.Popen(
        [sys.executable, "-m", "snapuq.cli", "harness", "--port", bridge.url, "--model", str(model),
         "--dataset", "digits", "--no-progress", "--out", str(out), "--limit", "6"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 240
        while bridge.connections == seen:  # it holds the lock before it opens the port
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never connected"
            time.sleep(0.1)
        rc, err = _harness(capsys, bridge, model, out, "--limit", "6")
        line = _one_line(err)
        assert rc == 1 and "another harness run is writing it" in line, line
    finally:
        bridge.gate.set()
    so, se = first.communicate(timeout=240)
    assert first.returncode == 0, so + se
    assert [r["i"] for r in _lines(out)] == list(range(6))
    assert json.loads((out / "summary.json").read_text())["n"] == 6
