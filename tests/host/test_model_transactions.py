"""Model directories written as one unit and checked as one (issue 29, item 1), through the real CLI on real
files (a copy of models/digits, exported here; the shipped directory is never written).

Before: `snapuq export` wrote file by file (a full disk left a new snapuq.json beside the old snapuq_model.c,
`verify` passed and the harness blamed the device for every mismatch, its guard hashing only the flatbuffer);
`snapuq micropython blob` packed one model's .tflite with another's constants (rc 0); `snapuq calibrate
--no-export` left an export of the old calibration that everything used. Now every writer stages its parts
beside D and swaps them in (snapuq.modeldir.PartsUpdate), D/MANIFEST.sha256 records each part's sha256 and
what it was made from, every consumer checks it (snapuq.modeldir.check_parts) and the firmware reports the
sha256 of the SNAP constants it scores with (the generated snapuq_model.h or an uploaded blob's section)."""

from __future__ import annotations

import copy
import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from snapuq import cli
from snapuq import modeldir as MD
from snapuq.errors import SnapuqError
from snapuq.modeldir import ModelPaths

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "digits"
KEYWORDS = ROOT / "models" / "keywords"
SKIP = shutil.ignore_patterns("eval", "baselines", "variants")  # what no consumer here reads
# a directory as an older snapuq wrote it: the shipped one without its record
LEGACY = shutil.ignore_patterns("eval", "baselines", "variants", "MANIFEST.sha256")


def _tree(d: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under d (hidden ones too) with its bytes and mtime, and what lies beside d."""
    out = {p.relative_to(d).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
           for p in sorted(d.rglob("*")) if p.is_file()}
    out["<beside>"] = (repr(sorted(p.name for p in d.parent.iterdir())).encode(), 0)
    return out


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    c = capsys.readouterr()
    return rc, c.out, c.err


def _one_line(err: str) -> str:
    """The one error line of a refusal (progress bars and the note on an older directory aside)."""
    lines = [ln for ln in err.replace("\r", "\n").strip().splitlines()
             if ln.strip() and "%|" not in ln and not ln.startswith("snapuq: note:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("exported") / "digits"
    shutil.copytree(SHIPPED, d, ignore=SKIP)
    assert cli.main(["export", str(d), "--n-check", "2"]) == 0
    return d


@pytest.fixture()
def D(exported: Path, tmp_path: Path) -> Path:
    d = tmp_path / "m" / "digits"
    shutil.copytree(exported, d)
    return d


def _consumers(d: Path) -> dict[str, object]:
    """Each consumer's own check, by name (the ones that need a board or QEMU: what they run first)."""
    from snapuq.bench.table import _resolve_workload
    from snapuq.commands.micropython import checked_model_files
    from snapuq.commands.verify import verify
    from snapuq.evaluation.loading import _check_model_dir
    from snapuq.harness.reference import HostReference

    return {
        "verify": lambda: verify(d, n=2),
        "eval": lambda: _check_model_dir(d),
        "harness/bench": lambda: HostReference(d),
        "bench --table": lambda: _resolve_workload(str(d)),
        "micropython push": lambda: checked_model_files(d),
    }


# ----------------------------------------------------------------------------------------------
# the record


def test_export_records_every_part_with_what_it_was_made_from(D: Path, capsys) -> None:
    p = ModelPaths(D)
    rec = MD.read_parts(D)
    assert set(rec) == {p.CONFIG, p.KERAS, p.CALIB, p.INT8, p.FLOAT, p.MANIFEST, p.C_SOURCE, p.C_HEADER}
    for name, part in rec.items():  # the sha256sum format: `sha256sum -c MANIFEST.sha256` in D
        assert part.sha256 == MD.sha256_file(D / name), name
    c = rec[p.C_SOURCE].made_from
    assert set(c) == {p.KERAS, p.CALIB, p.INT8, p.MANIFEST} and c[p.CALIB] == rec[p.CALIB].sha256
    assert rec[p.CONFIG].made_from == {}
    assert MD.read_parts(D) == MD.read_parts(D) and MD.format_parts(rec) == p.parts.read_text()
    rc, out, _ = _run(capsys, "parts", D)
    assert rc == 0 and f"{D}: 8/8 parts ok" in out, out
    # the generated header names the SNAP constants the firmware built from it reports
    from snapuq.export.cgen import header_snap_sha256
    from snapuq.native.blob import snap_sha256

    assert header_snap_sha256(p.c_header) == snap_sha256(json.loads(p.manifest.read_text()))


def test_consistent_directory_passes_every_consumer(D: Path, tmp_path: Path, capsys) -> None:
    p = ModelPaths(D)
    rc, out, err = _run(capsys, "micropython", "blob", D)
    assert rc == 0, err
    rec = MD.read_parts(D)
    assert rec[p.BLOB].sha256 == MD.sha256_file(p.blob) and rec[p.BLOB].made_from[p.MANIFEST] == \
        rec[p.MANIFEST].sha256
    for check in _consumers(D).values():
        check()  # raises on a refusal
    rc, out, err = _run(capsys, "verify", D, "--n", "3")
    assert rc == 0 and "total differing elements: 0" in out, err
    rc, out, err = _run(capsys, "eval", D, "--report", tmp_path / "R", "--methods", "snap", "--limit", "60",
                        "--n-ood", "60", "--segment", "100", "--no-progress")
    assert rc == 0, err
    assert "MANIFEST.sha256" not in err  # no note: D has its record
    rc, out, _ = _run(capsys, "parts", D)
    assert rc == 0 and "9/9 parts ok" in out, out


# ----------------------------------------------------------------------------------------------
# stale parts: refused by name


def test_stale_export_after_recalibration_refused_by_name(D: Path, capsys) -> None:
    p = ModelPaths(D)
    rc, out, err = _run(capsys, "calibrate", D, "--no-export", "--alpha", "0.5")
    assert "Traceback" not in err and "made from the previous calib.json" in out, out + err
    new_calib = MD.sha256_file(p.calib)
    for name, check in _consumers(D).items():
        with pytest.raises(SnapuqError) as e:
            check()
        msg = str(e.value)
        assert msg.startswith(f"{p.manifest}: made from another calib.json (sha256 ") and \
            f"{p.calib} is {new_calib[:12]}" in msg and f"run `snapuq export {D}`" in msg, (name, msg)
    for argv in (("verify", D, "--n", "2"), ("micropython", "blob", D),
                 ("eval", D, "--report", D.parent.parent / "R", "--methods", "snap")):
        before = _tree(D)
        rc, _, err = _run(capsys, *argv)
        assert rc == 1 and "snapuq.json: made from another calib.json" in _one_line(err), (argv, err)
        assert _tree(D) == before, argv
    rc, out, _ = _run(capsys, "parts", D)
    assert rc == 1 and f"{p.c_source}: made from another calib.json" in out, out
    # the fix the line names: the export of the new calibration, and every consumer passes again
    rc, _, err = _run(capsys, "export", D, "--n-check", "2")
    assert rc == 0, err
    for check in _consumers(D).values():
        check()


def test_recalibration_refreshes_its_export_and_blob_as_one_unit(D: Path, capsys, monkeypatch) -> None:
    p = ModelPaths(D)
    assert _run(capsys, "micropython", "blob", D)[0] == 0
    # a full disk while the refreshed export is written: calib.json is not replaced either
    import snapuq.commands.export as export_cmd  # the export step calibrate refreshes its files with

    real = export_cmd.write_c_model

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(p.c_header))

    monkeypatch.setattr(export_cmd, "write_c_model", full)
    before = _tree(D)
    rc, _, err = _run(capsys, "calibrate", D, "--alpha", "0.5")
    assert rc == 1 and "No space left on device" in _one_line(err), err
    assert _tree(D) == before
    monkeypatch.setattr(export_cmd, "write_c_model", real)
    old = MD.read_parts(D)
    rc, out, err = _run(capsys, "calibrate", D, "--alpha", "0.5")
    assert rc in (0, 1) and "Traceback" not in err, err  # 1: a failed dev check, still written
    rec = MD.read_parts(D)
    for name in (p.CALIB, p.MANIFEST, p.C_SOURCE, p.C_HEADER, p.BLOB):
        assert rec[name].sha256 != old[name].sha256, name
    assert rec[p.BLOB].made_from[p.CALIB] == rec[p.CALIB].sha256
    for check in _consumers(D).values():
        check()


def test_stale_export_after_a_retrain_refused_by_name(D: Path, tmp_path: Path, capsys) -> None:
    p = ModelPaths(D)
    other = tmp_path / "other" / "digits"
    shutil.copytree(D, other)
    # a retrain replaces D as a whole: the export of the old model is gone, and named as missing
    rc, _, err = _run(capsys, "train", "--dataset", "digits", "--epochs", "2", "--no-baselines",
                      "--seed", "3", "--no-progress", "--out", D)
    assert rc == 0, err
    assert not p.int8.exists() and set(MD.read_parts(D)) == {p.CONFIG, p.KERAS, p.CALIB}
    rc, _, err = _run(capsys, "verify", D, "--n", "2")
    assert rc == 1 and f"{p.int8}: missing (run `snapuq export {D}` first)" in _one_line(err)
    # the retrained model and calibration copied over another directory's export: refused by name
    o = ModelPaths(other)
    shutil.copy2(p.keras, o.keras)
    shutil.copy2(p.calib, o.calib)
    for argv in (("verify", other, "--n", "2"), ("micropython", "blob", other)):
        rc, _, err = _run(capsys, *argv)
        line = _one_line(err)
        assert rc == 1 and f"{o.int8}: made from another model.keras (sha256 " in line, (argv, line)
    rc, _, err = _run(capsys, "export", other)
    assert rc == 1 and f"{o.keras}: changed since snapuq wrote it" in _one_line(err)


# ----------------------------------------------------------------------------------------------
# a failure mid-write leaves D exactly as it was


@pytest.mark.parametrize("legacy", [False, True], ids=["recorded", "older-snapuq"])
def test_full_disk_mid_export_leaves_the_directory_unchanged(D: Path, capsys, monkeypatch, legacy) -> None:
    if legacy:
        ModelPaths(D).parts.unlink()
    import snapuq.export.cgen as cgen

    real, calls = cgen.write_text, []

    def write_text(path, text):  # snapuq_model.h goes through, snapuq_model.c finds the disk full
        calls.append(Path(path).name)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text)

    monkeypatch.setattr(cgen, "write_text", write_text)
    before = _tree(D)
    rc, _, err = _run(capsys, "export", D, "--n-check", "2")
    assert rc == 1 and "No space left on device" in _one_line(err), err
    assert calls == ["snapuq_model.h", "snapuq_model.c"]
    assert _tree(D) == before  # not one part replaced, no staging folder left beside D
    monkeypatch.setattr(cgen, "write_text", real)
    for check in _consumers(D).values():
        check()


def test_an_error_during_the_swap_puts_every_part_back(D: Path, capsys, monkeypatch) -> None:
    real, into_d = os.replace, []

    def replace(src, dst):
        if Path(dst).parent == D:
            into_d.append(Path(dst).name)
            if len(into_d) == 3:
                raise OSError(errno.EIO, "Input/output error", str(dst))
        return real(src, dst)

    monkeypatch.setattr(MD.os, "replace", replace)
    before = _tree(D)
    rc, _, err = _run(capsys, "export", D, "--n-check", "2")
    assert rc == 1 and "Input/output error" in _one_line(err), err
    assert into_d[:3] == ["model_int8.tflite", "model_float.tflite", "snapuq.json"]
    monkeypatch.setattr(MD.os, "replace", real)
    assert {k: v[0] for k, v in _tree(D).items()} == {k: v[0] for k, v in before.items()}


def test_a_second_writer_is_refused_and_a_replaced_directory_is_not_overwritten(D: Path) -> None:
    with MD.PartsUpdate(D) as up:
        with pytest.raises(SnapuqError, match="another snapuq command is writing it"):
            MD.PartsUpdate(D).open()
        (up.path / ModelPaths.BLOB).write_bytes(b"x")
        moved = D.parent / "elsewhere"
        os.rename(D, moved)  # what `snapuq train` does at its commit
        shutil.copytree(moved, D)
        with pytest.raises(SnapuqError, match="replaced or changed by another snapuq command"):
            up.commit()
    assert not ModelPaths(D).blob.exists() and not (D.parent / ".digits.update").exists()


# ----------------------------------------------------------------------------------------------
# mixed parts


def test_blob_from_mixed_parts_refused(D: Path, tmp_path: Path, capsys) -> None:
    p = ModelPaths(D)
    shutil.copy2(KEYWORDS / p.INT8, p.int8)  # another model's flatbuffer beside this one's constants
    rc, _, err = _run(capsys, "micropython", "blob", D)
    assert rc == 1 and f"{p.int8}: changed since snapuq wrote it" in _one_line(err)
    assert not p.blob.exists()
    rc, _, err = _run(capsys, "micropython", "blob", D, "--out", tmp_path / "b.snapuq")
    assert rc == 1 and not (tmp_path / "b.snapuq").exists()
    # a directory of an older snapuq (no record): the manifest's own sha256 of the model refuses it
    old = tmp_path / "old" / "digits"
    shutil.copytree(SHIPPED, old, ignore=LEGACY)
    shutil.copy2(KEYWORDS / p.INT8, old / p.INT8)
    rc, _, err = _run(capsys, "micropython", "blob", old)
    assert rc == 1 and "snapuq.json does not match the model: sha256 differs" in _one_line(err), err
    assert not (old / p.BLOB).exists()


def test_generated_c_of_another_export_refused(D: Path, exported: Path, tmp_path: Path, capsys) -> None:
    """The C the firmware is built from, swapped for the C of another export of the same flatbuffer (what an
    ENOSPC in the old file-by-file export left): refused by verify, the harness and bench, by name."""
    p = ModelPaths(D)
    rc, _, err = _run(capsys, "calibrate", D, "--alpha", "0.5")
    assert "Traceback" not in err
    shutil.copy2(exported / p.C_SOURCE, p.c_source)
    shutil.copy2(exported / p.C_HEADER, p.c_header)
    for name, check in _consumers(D).items():
        if name in ("eval", "micropython push"):
            continue  # they read neither
        with pytest.raises(SnapuqError, match=f"{p.c_source}: changed since snapuq wrote it"):
            check()
    # without a record (an older snapuq's directory): the header's SNAP sha256 still tells
    p.parts.unlink()
    from snapuq.harness.reference import HostReference

    with pytest.raises(SnapuqError, match=f"{p.c_header}: the SNAP constants of another snapuq.json"):
        HostReference(D)
    rc, _, err = _run(capsys, "verify", D, "--n", "2")
    assert rc == 1 and "the SNAP constants of another snapuq.json" in _one_line(err)


# ----------------------------------------------------------------------------------------------
# the harness's device guard covers the generated C


def test_device_guard_covers_the_snap_constants(D: Path, exported: Path, tmp_path: Path) -> None:
    from snapuq.harness.identity import ModelMismatchError, check_model_identity
    from snapuq.harness.protocol import Device
    from snapuq.harness.qemu import PipeSerial, build_host_firmware
    from snapuq.harness.reference import HostReference
    from snapuq.native.blob import snap_sha256, write_blob

    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("gcc / make missing (the host firmware build)")
    ref = HostReference(D)
    dev = Device(PipeSerial(build_host_firmware(tmp_path / "fw", D)), timeout=20.0)
    try:
        dev.wait_boot(timeout=10)
        prof = dev.profile()
        kw_man = json.loads((KEYWORDS / "snapuq.json").read_text())
        dev.load_model(write_blob((KEYWORDS / "model_int8.tflite").read_bytes(), kw_man))
        up = dev.profile()
    finally:
        dev.close()
    assert prof["snap_sha256"] == snap_sha256(ref.manifest)  # from the generated snapuq_model.h
    assert up["snap_sha256"] == snap_sha256(kw_man)  # hashed by the device from the uploaded blob's section
    check_model_identity(prof, ref.tflite, D, ref.manifest)
    # the same flatbuffer, other constants (a firmware flashed before `snapuq calibrate`): refused
    other = copy.deepcopy(ref.manifest)
    other["snap"]["taps"][0]["w_q16"] += 1
    with pytest.raises(ModelMismatchError, match="scores with other SNAP constants"):
        check_model_identity(prof, ref.tflite, D, other)
    # a firmware that does not say, built for a directory whose header does: refused; neither says: passes
    quiet = {k: v for k, v in prof.items() if k != "snap_sha256"}
    with pytest.raises(ModelMismatchError, match="does not report the sha256 of its SNAP constants"):
        check_model_identity(quiet, ref.tflite, D, ref.manifest)
    old = tmp_path / "old" / "digits"  # a header of an older snapuq: no SNAPUQ_MODEL_SNAP_SHA256
    shutil.copytree(D, old)
    h = old / "snapuq_model.h"
    h.write_text("".join(ln for ln in h.read_text().splitlines(True) if "SNAPUQ_MODEL_SNAP_SHA256" not in ln))
    check_model_identity(quiet, ref.tflite, old, ref.manifest)
    check_model_identity({**quiet, "snap": 0}, ref.tflite, D, ref.manifest)  # no SNAP on the device


@pytest.mark.qemu
@pytest.mark.arm
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                    reason="qemu-system-arm / arm-none-eabi-gcc missing")
def test_harness_refuses_a_board_flashed_before_a_recalibration(D: Path, tmp_path: Path, capsys) -> None:
    """The probe on QEMU: a firmware with D's flatbuffer and other SNAP constants (built from the C of an
    export before `snapuq calibrate`: the same .tflite, a weight differs). Before: the guard, hashing only the
    flatbuffer, passed and every result mismatched. Now one line, before any input."""
    from snapuq.export.cgen import write_c_model
    from snapuq.harness.qemu import board_spec, build_firmware

    common = ("harness", "--port", "qemu:m4", "--model", D, "--limit", "3", "--no-progress")
    rc, out, err = _run(capsys, *common, "--out", tmp_path / "H1", "--build-dir", tmp_path / "hb")
    assert rc == 0 and "mismatches_vs_host=0" in out + err, err
    man = json.loads(ModelPaths(D).manifest.read_text())
    man["snap"]["taps"][0]["w_q16"] += 1
    write_c_model(tmp_path / "E", man, ModelPaths(D).int8.read_bytes())
    old = build_firmware(board_spec("qemu:m4"), tmp_path / "E", tmp_path / "hbE")
    rc, out, err = _run(capsys, *common, "--out", tmp_path / "H2", "--firmware", old)
    line = _one_line(err)
    assert rc == 1 and "the firmware scores with other SNAP constants" in line and "snapuq calibrate" in line
    assert not (tmp_path / "H2" / "results.jsonl").exists()


# ----------------------------------------------------------------------------------------------
# directories of an older snapuq (the shipped models until re-exported)


def test_directory_without_a_record_works_and_migrates(tmp_path: Path, capsys, monkeypatch) -> None:
    import sys

    d = tmp_path / "old" / "digits"
    shutil.copytree(SHIPPED, d, ignore=LEGACY)
    p = ModelPaths(d)
    rc, out, err = _run(capsys, "verify", d, "--n", "2")
    assert rc == 0 and "snapuq: note:" not in err  # not a terminal: a script's stderr stays as it was
    MD._LEGACY_NOTED.clear()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # on a terminal: one note per directory
    rc, out, err = _run(capsys, "verify", d, "--n", "2")
    notes = [ln for ln in err.splitlines() if ln.startswith("snapuq: note:")]
    assert rc == 0 and len(notes) == 1 and "no MANIFEST.sha256" in notes[0] and "parts" in notes[0], err
    monkeypatch.undo()
    rc, out, _ = _run(capsys, "parts", d)
    assert rc == 0 and "not recorded" in out and not p.parts.exists()
    # a blob added to it keeps it without a record (nothing in it was checked), and still works
    assert _run(capsys, "micropython", "blob", d)[0] == 0 and not p.parts.exists()
    # the migration checks what it can: the C of another model's export is refused, the directory stays as
    # it was (a re-export of this model may give the very same C: the shipped one is the current exporter's)
    shutil.copy2(p.c_source, tmp_path / "c")
    shutil.copy2(SHIPPED.parent / "keywords" / p.C_SOURCE, p.c_source)
    rc, _, err = _run(capsys, "parts", d, "--write")
    assert rc == 1 and f"{p.c_source}: not what `snapuq export` makes" in _one_line(err)
    assert not p.parts.exists()
    shutil.copy2(tmp_path / "c", p.c_source)
    rc, out, err = _run(capsys, "parts", d, "--write")
    assert rc == 0 and "wrote" in out, err
    assert set(MD.read_parts(d)) == {p.CONFIG, p.KERAS, p.CALIB, p.INT8, p.FLOAT, p.MANIFEST, p.C_SOURCE,
                                     p.C_HEADER, p.BLOB}
    rc, out, err = _run(capsys, "verify", d, "--n", "2")
    assert rc == 0 and "snapuq: note:" not in err
    # a deliberate edit of config.json: refused by name until recorded again
    cfg = json.loads(p.config.read_text())
    cfg["note"] = "edited"
    p.config.write_text(json.dumps(cfg))
    rc, _, err = _run(capsys, "eval", d, "--report", tmp_path / "R")
    assert rc == 1 and f"{p.config}: changed since snapuq wrote it" in _one_line(err)
    assert _run(capsys, "parts", d, "--write")[0] == 0
    assert _run(capsys, "parts", d)[0] == 0


def test_damaged_record_refused_in_one_line(D: Path, capsys) -> None:
    p = ModelPaths(D)
    p.parts.write_text(p.parts.read_text() + "not a line\n")
    rc, _, err = _run(capsys, "verify", D, "--n", "2")
    assert rc == 1 and f"{p.parts}: line " in _one_line(err)
