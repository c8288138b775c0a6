"""snapuq.io: atomic result files, staged report directories, output-path checks."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from snapuq.errors import ModelFormatError, SnapuqError
from snapuq.io import (
    atomic_open,
    captured_output,
    check_out_dir,
    check_out_file,
    read_json,
    save_arrays,
    staged_dir,
    write_json,
    write_text,
)


def test_save_arrays_writes_npy_and_npz_whole_or_not_at_all(tmp_path: Path) -> None:
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    np.testing.assert_array_equal(np.load(save_arrays(tmp_path / "x.npy", x)), x)
    z = np.load(save_arrays(tmp_path / "s.npz", flat=x.ravel(), off=np.array([0, 12])))
    assert sorted(z.files) == ["flat", "off"] and int(z["off"][1]) == 12
    class Unsaveable:
        def __array__(self, *a: object, **k: object) -> np.ndarray:
            raise ValueError("no array")

    with pytest.raises(ValueError, match="no array"):  # a failed save leaves no file and no temporary
        save_arrays(tmp_path / "bad.npy", Unsaveable())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.npz", "x.npy"]


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path: Path) -> None:
    p = tmp_path / "metrics.json"
    write_json(p, {"run": 1})
    with pytest.raises(KeyboardInterrupt):
        with atomic_open(p) as f:
            f.write('{"run": 2, "tor')
            raise KeyboardInterrupt
    assert read_json(p) == {"run": 1}
    assert [q.name for q in tmp_path.iterdir()] == ["metrics.json"]  # no temporary file left
    assert oct(p.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


def test_staged_dir_never_mixes_two_runs(tmp_path: Path) -> None:
    r = tmp_path / "report"
    with staged_dir(r) as s:
        write_text(s / "report.md", "run 1")
        write_text(s / "old_plot.png", "png 1")
        write_json(s / "metrics.json", {"run": 1})
    with pytest.raises(RuntimeError):  # run 2 dies half way: run 1 stays whole
        with staged_dir(r) as s:
            write_text(s / "report.md", "run 2")
            raise RuntimeError
    assert (r / "report.md").read_text() == "run 1" and read_json(r / "metrics.json") == {"run": 1}
    with staged_dir(r) as s:  # run 3 completes: run 1's files are gone, even those run 3 does not write
        write_text(s / "report.md", "run 3")
        write_json(s / "metrics.json", {"run": 3})
    assert sorted(p.name for p in r.iterdir()) == ["metrics.json", "report.md"]
    assert (r / "report.md").read_text() == "run 3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no staging dir left


def test_output_path_checks(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(SnapuqError, match="not a directory"):
        check_out_dir(f)
    with pytest.raises(SnapuqError, match="is a file"):
        check_out_dir(f / "sub")
    with pytest.raises(SnapuqError, match="not writable"):
        check_out_dir("/proc/snapuq_nowhere")
    with pytest.raises(SnapuqError, match="is a directory"):
        check_out_file(tmp_path)
    assert check_out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checking creates nothing
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SnapuqError, match="bad.json: not valid JSON"):
        read_json(tmp_path / "bad.json")


def test_calib_json_gets_the_usual_permissions(tmp_path):
    """calib.json and the --seeds metrics.json go through snapuq.io.write_json (once 0600)."""
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "calib.json", {"a": 1}, indent=1)
    finally:
        os.umask(old)
    assert (tmp_path / "calib.json").stat().st_mode & 0o777 == 0o644
    assert read_json(tmp_path / "calib.json") == {"a": 1}


def test_held_output_goes_to_a_log_named_in_the_one_line(capfd):
    with pytest.raises(ModelFormatError) as ei:
        with captured_output():
            os.write(1, b"converter dump line\n" * 300)
            raise ModelFormatError("the model does not convert")
    out, err = capfd.readouterr()
    assert "converter dump" not in out + err
    msg = str(ei.value)
    assert msg.startswith("the model does not convert (log: ")
    log = msg.split("(log: ")[1].rstrip(")")
    assert open(log).read().count("converter dump line") == 300
    os.remove(log)

def test_other_errors_get_one_line_naming_the_log(capfd):
    with pytest.raises(ValueError):
        with captured_output():
            os.write(1, b"held python print\n")
            raise ValueError("boom")
    out, err = capfd.readouterr()
    assert "held python print" not in out
    assert err.count("\n") == 1 and "snapuq: the failed step's own output is in " in err
    os.remove(err.strip().rsplit(" ", 1)[1])

def test_success_drops_the_held_output(capfd):
    with captured_output():
        os.write(2, b"noise\n")
    out, err = capfd.readouterr()
    assert "noise" not in out + err
