"""`snapuq tokens eval` end to end on a small digits run (tiny model, one epoch)."""

from __future__ import annotations

import json
import os

from snapuq.cli import main


def test_tokens_eval_writes_report(tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["tokens", "eval", "--dataset", "digits", "--out", str(out), "--epochs", "1", "--dim", "16",
               "--rhos", "1.0,0.8", "--random-seeds", "2", "--snap-epochs", "3", "--max-train", "256",
               "--max-test", "96"])
    assert rc == 0
    rep = json.loads((out / "tokens.json").read_text())
    assert rep["dataset"] == "digits" and rep["config"]["n_classes"] == 10
    assert rep["keep_counts"] == {"1.0": 16, "0.8": 13}
    for mode, rows in (("prune", ["uncert", "random", "magnitude", "spikes", "similarity", "uncert_mean",
                                  "uncert_std", "uncert_int8"]),
                       ("merge", ["uncert", "random", "magnitude", "spikes", "similarity"])):
        for c in rows:
            r = rep["results"][mode][c]
            assert r["1.0"]["acc"] == rep["accuracy_full"]
            assert 0.0 <= r["0.8"]["acc"] <= 1.0
            assert 0 < r["0.8"]["sops"] <= rep["sops_full"] * 1.5
    # pruning 3 of 16 tokens removes their spikes from the last block
    assert rep["results"]["prune"]["uncert"]["0.8"]["block_sops"] < rep["block_sops_full"]
    assert set(rep["fault_detection"]["auroc_ok_vs_err"]) >= {"msp", "snap", "snap_nll2"}
    for f in ("tokens.md", "accuracy_prune.png", "accuracy_merge.png", "sops.png", "ablation.png",
              "model.weights.h5"):
        assert os.path.getsize(out / f) > 0
    md = (out / "tokens.md").read_text()
    assert "ρ=0.8 (K=13)" in md and "Uncert (mean+λ·std)" in md
    assert "Uncert prune ρ=0.8" in capsys.readouterr().out
    # bad arguments are one-line errors (exit 1), before any training
    assert main(["tokens", "eval", "--dataset", "digits", "--out", str(out), "--block", "7",
                 "--epochs", "1", "--max-train", "64"]) == 1
    assert main(["tokens", "eval", "--dataset", "nope", "--out", str(out)]) == 1
