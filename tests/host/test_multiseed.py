"""`snapuq eval --seeds`: seed parsing, the training arguments rebuilt from DIR's config, and the mean / sd /
criteria aggregation over per-seed metrics.json files (no training here: the files are synthetic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snapuq import cli
from snapuq.commands.multiseed import (
    aggregate,
    criteria_line,
    parse_seeds,
    seed_dir,
    train_argv,
    write_report,
)
from snapuq.errors import SnapuqError
from snapuq.evaluation.report import CONTRACT_KEYS
from snapuq.options import CalibOptions, HeadOptions, TrainOptions


def _metrics(seed: int) -> dict:
    def row(v):
        return {k: v for k in CONTRACT_KEYS}

    methods = {"snap": row(0.9 + 0.01 * seed), "msp": row(0.8), "temp_scaling": row(0.8), "energy": row(0.85)}
    methods["temp_scaling"]["ece"] = 0.02
    details = {
        n: {"shift_auroc_mean": v["auroc_ok_vs_err"], "cid_false_alarm_rate": 0.01, "accuracy": 0.95}
        for n, v in methods.items()
    }
    details["snap"].update(
        ece_p_err=0.015 + 0.001 * seed, ece_U=0.02, auroc_ok_vs_err_p_err=0.9, test_alarm_rate=0.0
    )
    return {
        "dataset": "digits",
        "n_test": 100,
        "accuracy": {"float": 0.95, "int8": 0.94},
        "methods": methods,
        "details": details,
        "dev_check": {"delta": 0.0, "ok": True},
        "test_check": {"delta": 0.001 * seed - 0.0005, "ok": seed > 0},
    }


def test_parse_seeds():
    assert parse_seeds("0,1, 2") == [0, 1, 2]
    for bad in ("", "a,b", "1,1", "-1"):
        with pytest.raises(SnapuqError):
            parse_seeds(bad)


def test_aggregate_mean_sd_and_criteria(tmp_path: Path):
    agg = aggregate({s: _metrics(s) for s in (0, 1, 2)})
    assert agg["seeds"] == [0, 1, 2]
    assert agg["methods"]["snap"]["auroc_ok_vs_err"] == pytest.approx(0.91)
    assert agg["sd"]["snap"]["auroc_ok_vs_err"] == pytest.approx(0.01)
    assert agg["sd"]["msp"]["ece"] == pytest.approx(0.0, abs=1e-12)
    acc = agg["accuracy"]
    assert acc["float"] == pytest.approx(0.95) and acc["int8"] == pytest.approx(0.94)
    assert acc["float_sd"] == pytest.approx(0.0, abs=1e-12) and acc["float_n"] == acc["int8_n"] == 3
    assert agg["methods"]["snap"]["ece_p_err"] == pytest.approx(0.016)
    c = agg["criteria"]
    assert c["U_ge_msp_test_every_seed"] is False  # seed 0 is below MSP
    assert c["U_ge_msp_dev_every_seed"] is True
    assert c["ece_p_err_le_temp_plus_0.01"] is True
    assert c["shift_ge_best_baseline_plus_0.05"] is True  # 0.91 vs energy 0.85
    assert c["cid_false_alarm_le_msp"] is True
    assert agg["checks"]["1"]["shift_auroc_mean_best_baseline"] == 0.85
    line = criteria_line(c)
    assert "test U >= MSP at every seed ✗" in line and "shift 0.9100 vs best baseline 0.8500 ✓" in line
    assert "\n" not in line and "ID/OOD" in line and "CID false alarm" in line
    write_report(tmp_path, agg)
    rep = (tmp_path / "report.md").read_text()
    assert "0.910 ± 0.010" in rep and "CID false alarm" in rep and "seed1/report.md" in rep


def test_train_argv_rebuilds_the_options(tmp_path: Path):
    d = tmp_path / "M"
    d.mkdir()
    cfg = {"dataset": "digits", "seed": 0, "epochs": 3, "rank": 32, "nll": "huber", "detach": True,
           "frozen_backbone": True, "taps": [{"layer": "relu1"}, {"layer": "relu3"}], "variant": "best"}
    calib = {"variant": "best", "fit": {"alpha": 1.0, "hinge_quantile_requested": 0.999}}
    assert seed_dir(d, cfg, 0) == d and seed_dir(d, cfg, 2) == tmp_path / "M_seed2"
    a = train_argv(d, cfg, calib, 2, tmp_path / "M_seed2", None)
    s = " ".join(a)
    assert "--seed 2" in s and "--epochs 3" in s and "--nll huber" in s and "--taps relu1,relu3" in s
    assert "--hinge-q 0.999" in s and "--no-baselines" in s and "--detach" in s
    # the train parser accepts every argument
    import argparse

    from snapuq.commands import train as T

    p = argparse.ArgumentParser()
    T.add_arguments(p)
    ns = p.parse_args(a)
    assert ns.seed == 2 and ns.rank == 32 and ns.quantile == 0.999


def test_train_argv_of_your_own_model(tmp_path: Path):
    d = tmp_path / "mine"
    d.mkdir()
    cfg = {"dataset": str(d / "data.npz"), "backbone": "user", "backbone_file": "backbone.keras", "seed": 0,
           "epochs": 4, "rank": 16, "eps": 0.01, "nll": "gauss", "taps": [{"layer": "r1"}], "variant": "best"}
    with pytest.raises(SnapuqError, match="backbone.keras"):
        train_argv(d, cfg, None, 1, tmp_path / "mine_seed1", None)
    (d / "backbone.keras").write_bytes(b"k")
    a = train_argv(d, cfg, None, 1, tmp_path / "mine_seed1", "/data")
    s = " ".join(a)
    assert f"--model {d / 'backbone.keras'} --data {d}" in s and "--seed 1" in s and "--rank 16" in s
    assert "--dataset" not in a and "--backbone" not in a and "--data-dir" not in a
    import argparse

    from snapuq.commands import train as T

    p = argparse.ArgumentParser()
    T.add_arguments(p)
    ns = p.parse_args(a)
    assert ns.model == str(d / "backbone.keras") and ns.data == str(d) and ns.backbone_epochs == 0


def test_eval_seeds_bad_list(tmp_path: Path, capsys):
    d = tmp_path / "M"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"dataset": "digits"}))
    (d / "model.keras").write_bytes(b"x")
    assert cli.main(["eval", str(d), "--report", str(tmp_path / "R"), "--seeds", "1,x"]) == 1
    err = capsys.readouterr().err
    assert "--seeds" in err and "Traceback" not in err


def test_a_non_default_recipe_survives_a_second_seed(tmp_path: Path):
    """config.json's recipe (lr, batch size, schedule, augmentation, head and baseline epochs) is what the
    other seeds retrain with, not the dataset's defaults."""
    import argparse

    from snapuq.commands import train as T
    from snapuq.options import TrainOptions

    d = tmp_path / "M"
    d.mkdir()
    (d / "baselines").mkdir()
    rec = TrainOptions(epochs=7, head_epochs=3, batch_size=32, lr=0.05, optimizer="sgd", momentum=0.8,
                       schedule="cosine", warmup_epochs=1, augment="shift", baseline_epochs=4)  # fmt: skip
    cfg = {"dataset": "digits", "seed": 0, "epochs": 3, "rank": 32, "taps": [{"layer": "relu1"}],
           "recipe": rec.to_dict()}  # fmt: skip
    a = train_argv(d, cfg, None, 1, tmp_path / "M_seed1", None)
    p = argparse.ArgumentParser()
    T.add_arguments(p)
    ns = p.parse_args(a)
    assert T.recipe_from_args(ns, "digits") == rec
    assert a.count("--epochs") == 1  # head_config's "epochs" (the head epochs) is not passed as --epochs


def test_the_recorded_calibration_options_survive_a_second_seed(tmp_path: Path):
    """config.json's `calibration` (CalibOptions) is what the other seeds calibrate with."""
    import argparse

    from snapuq.commands import train as T
    from snapuq.options import CalibOptions

    d = tmp_path / "M"
    d.mkdir()
    rec = CalibOptions(alpha=0.5, quantile=0.99, variant="best", input_tap=False, alarm_rate=1e-3)
    cfg = {"dataset": "digits", "seed": 0, "epochs": 3, "rank": 32, "taps": [{"layer": "relu1"}],
           "variant": "best", "calibration": rec.to_dict()}  # fmt: skip
    p = argparse.ArgumentParser()
    T.add_arguments(p)
    ns = p.parse_args(train_argv(d, cfg, None, 1, tmp_path / "M_seed1", None))
    assert T.check_args(ns)[2] == rec


def test_every_recorded_option_survives_a_second_seed(tmp_path: Path):
    """Recipe, head and calibration options, none at its default, come back whole from a second seed's argv
    (the options' own round trip: tests/host/test_options.py)."""
    import argparse
    import dataclasses

    from test_options import NON_DEFAULT

    from snapuq.commands import train as T
    from snapuq.nn.training import head_config

    d = tmp_path / "M"
    d.mkdir()
    rec, heads, calib = (NON_DEFAULT[c] for c in (TrainOptions, HeadOptions, CalibOptions))
    plain = dataclasses.replace(rec, distill_alpha=0.0)  # distillation does not go with --joint: below
    cfg = {"dataset": "digits", "seed": 0, "backbone": "cnn4", "recipe": plain.to_dict(),
           "calibration": calib.to_dict(), **head_config(heads, calib.variant, [{"layer": "relu1"}], 3, 1)}
    p = argparse.ArgumentParser()
    T.add_arguments(p)
    ns = p.parse_args(train_argv(d, cfg, None, 1, tmp_path / "M_seed1", None))
    assert T.check_args(ns) == (plain, heads, calib) and ns.seed == 1 and ns.backbone == "cnn4"
    # a distilled model's second seed learns from the same teachers, by the same alpha and temperature
    cfg.update(recipe=rec.to_dict(), distill={"from": str(tmp_path / "T"), "members": 5},
               **head_config(HeadOptions(), calib.variant, [{"layer": "relu1"}], 3, 1))  # fmt: skip
    ns = p.parse_args(train_argv(d, cfg, None, 2, tmp_path / "M_seed2", None))
    assert T.check_args(ns)[0] == rec and ns.distill_from == str(tmp_path / "T")


def test_shared_baselines_train_the_other_seeds_without_their_own(tmp_path: Path):
    d = tmp_path / "M"
    (d / "baselines").mkdir(parents=True)
    cfg = {"dataset": "digits", "seed": 0, "epochs": 3, "rank": 32, "taps": [{"layer": "relu1"}]}
    assert "--no-baselines" not in train_argv(d, cfg, None, 1, tmp_path / "M_seed1", None)
    assert "--no-baselines" in train_argv(d, cfg, None, 1, tmp_path / "M_seed1", None, shared_baselines=True)


def _fake_model(d: Path, seed: int, baselines: bool) -> None:
    d.mkdir(parents=True)
    tap = {"layer": "relu1", "prev": "relu0", "name": "tap0", "d_prev": 8, "d": 8}
    (d / "config.json").write_text(json.dumps({"dataset": "digits", "seed": seed, "epochs": 3, "rank": 32,
                                               "taps": [tap]}))  # fmt: skip
    (d / "model.keras").write_bytes(b"x")
    if baselines:
        (d / "baselines").mkdir()
        (d / "baselines" / "baselines.json").write_text(json.dumps({"seed": seed}))


def _eval_args(d: Path, rdir: Path, **kw):
    import argparse

    from snapuq.commands import evaluate as E

    p = argparse.ArgumentParser()
    E.add_arguments(p)
    argv = [str(d), "--report", str(rdir), "--seeds", "0,1,2", "--no-progress"]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return p.parse_args(argv)


def test_run_seeds_scores_dir_baselines_at_every_seed(tmp_path: Path, monkeypatch):
    """--shared-baselines: every seed's eval gets DIR/baselines, the aggregate and report say so, a missing
    seed trains without baselines of its own (and continues its checkpoint with --resume), and --resume
    reuses a seed's report only when it scored the same baselines."""
    from snapuq.commands import multiseed as MS
    from snapuq.commands import train as T

    d = tmp_path / "M"
    _fake_model(d, 0, baselines=True)
    _fake_model(tmp_path / "M_seed1", 1, baselines=False)
    trained: list[list[str]] = []

    def fake_train(ns):
        trained.append([ns.out, ns.no_baselines, ns.resume])
        _fake_model(Path(ns.out), ns.seed, baselines=False)
        return 0

    monkeypatch.setattr(T, "run", fake_train)
    seen: list[tuple[str, str | None]] = []

    def fake_eval(a):
        seen.append((a.model_dir, a.baselines))
        m = _metrics(a.seed)
        own = Path(a.model_dir) / "baselines"
        b = Path(a.baselines) if a.baselines else own
        m["baselines"] = {"dir": str(b) if b.is_dir() else None, "own": b == own, "seed": 0}
        Path(a.report).mkdir(parents=True, exist_ok=True)
        (Path(a.report) / "metrics.json").write_text(json.dumps(m))
        return 0

    rdir = tmp_path / "R"
    assert MS.run_seeds(_eval_args(d, rdir, shared_baselines=True, resume=True), fake_eval) == 0
    assert trained == [[str(tmp_path / "M_seed2"), True, True]]
    assert [b for _, b in seen] == [str(d / "baselines")] * 3
    agg = json.loads((rdir / "metrics.json").read_text())
    assert agg["baselines"] == {"dir": str(d / "baselines"), "seed": 0, "ensemble_seeds": None}
    assert agg["n_seeds"]["snap"]["auroc_ok_vs_err"] == 3
    assert "trained with seed 0" in (rdir / "report.md").read_text()
    # --resume: the same baselines -> reused; each seed's own baselines -> evaluated again
    seen.clear()
    assert MS.run_seeds(_eval_args(d, rdir, shared_baselines=True, resume=True), fake_eval) == 0
    assert seen == []
    assert MS.run_seeds(_eval_args(d, rdir, resume=True), fake_eval) == 0
    assert [p for p, _ in seen] == [str(tmp_path / "M_seed1"), str(tmp_path / "M_seed2")]
    agg = json.loads((rdir / "metrics.json").read_text())
    assert agg["baselines"] is None


def test_shared_baselines_need_trained_ones(tmp_path: Path, capsys):
    d = tmp_path / "M"
    _fake_model(d, 0, baselines=False)
    rc = cli.main(["eval", str(d), "--report", str(tmp_path / "R"), "--seeds", "0,1", "--shared-baselines"])
    err = capsys.readouterr().err
    assert rc == 1 and "--shared-baselines" in err and "no trained baselines" in err
    assert "Traceback" not in err


def test_aggregate_counts_the_seeds_behind_each_figure():
    per = {s: _metrics(s) for s in (0, 1, 2)}
    for s in (1, 2):  # a method unavailable at two seeds (e.g. no baselines there)
        per[s]["methods"]["energy"] = dict.fromkeys(CONTRACT_KEYS, float("nan"))
    agg = aggregate(per)
    assert agg["n_seeds"]["energy"]["auroc_ok_vs_err"] == 1 and agg["n_seeds"]["msp"]["auroc_ok_vs_err"] == 3
    assert agg["baselines"] is None  # no record: not shared


def test_eval_baselines_folder_is_checked_and_recorded(tmp_path: Path, capsys):
    from snapuq.evaluation.loading import baselines_record

    d = tmp_path / "M"
    _fake_model(d, 0, baselines=True)
    rc = cli.main(["eval", str(d), "--report", str(tmp_path / "R"), "--baselines", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert rc == 1 and "--baselines" in err and "no such folder" in err and "Traceback" not in err
    rec = baselines_record(d / "baselines", own=False)
    assert rec == {"dir": str(d / "baselines"), "own": False, "seed": 0, "ensemble_seeds": None}
    none = baselines_record(tmp_path / "none", own=True)
    assert none == {"dir": None, "own": True, "seed": None, "ensemble_seeds": None}
