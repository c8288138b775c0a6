"""`snapuq eval models/keywords --data-dir TREE --split test` on a Speech Commands-style folder holding test
clips alone (a small tree written here: synthesized words, another word, background noise)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.io import wavfile

from snapuq.data import keywords as K
from snapuq.data.speech_commands import UNKNOWN_TO_MODEL, read_test_tree
from snapuq.errors import DatasetError
from snapuq.evaluation.testdir import keyword_gate, report_md

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "keywords"


def _tree(root: Path, with_list: bool) -> dict:
    words = K.WORDS + ["bed", "marvin"]
    voices = K.speaker_split(0)["test"]
    waves, y = K.synth_split(words, voices, 2, seed=5, split="test")
    listed, files = [], {}
    for i, (w, lab) in enumerate(zip(waves, y)):
        word = words[lab]
        (root / word).mkdir(parents=True, exist_ok=True)
        rel = f"{word}/spk{i % 3}_nohash_{i}.wav"  # three speakers, Speech Commands' naming
        wavfile.write(root / rel, 16000, w)
        files[rel] = word
        if i % 2 == 0:
            listed.append(rel)
    (root / "_background_noise_").mkdir()
    noise = (np.random.default_rng(0).standard_normal(16000 * 3 + 500) * 800).astype(np.int16)
    wavfile.write(root / "_background_noise_" / "white.wav", 16000, noise)
    if with_list:
        (root / "testing_list.txt").write_text("\n".join(listed) + "\n")
    return {"files": files, "listed": listed}


def test_read_test_tree_maps_words_by_name(tmp_path):
    t = _tree(tmp_path, with_list=True)
    names = ["yes", "no", "_silence_", "_unknown_"]
    r = read_test_tree(str(tmp_path), names, "test")
    assert r["listed"] == "testing_list.txt"
    # the listed files + 3 one-second pieces of the noise recording (in no list)
    assert len(r["labels"]) == len(t["listed"]) + 3
    by_word = {w: set(r["labels"][r["words"] == w].tolist()) for w in set(r["words"].tolist())}
    noise = r["words"] == "_silence_"
    assert sorted(r["files"][noise].tolist()) == [f"_background_noise_/white.wav#{k}" for k in range(3)]
    assert sorted(r["files"][~noise].tolist()) == sorted(t["listed"])
    assert by_word["yes"] == {0} and by_word["_silence_"] == {2}
    assert by_word["bed"] == {3} and by_word["stop"] == {3}  # not a class of this model: _unknown_
    # without _unknown_ / _silence_ classes: other words and noise are unknown to the model
    r2 = read_test_tree(str(tmp_path), K.WORDS, "all")
    assert len(r2["labels"]) == len(t["files"]) + 3
    assert set(r2["labels"][np.isin(r2["words"], ["bed", "marvin", "_silence_"])].tolist()) == {
        UNKNOWN_TO_MODEL
    }
    # the archive's own folder inside DIR is found
    nested = tmp_path / "outer"
    nested.mkdir()
    (nested / "speech_commands_test_set_v0.02").symlink_to(tmp_path)
    r3 = read_test_tree(str(nested), names, "test")
    assert len(r3["labels"]) == len(r["labels"]) and r3["root"].endswith("speech_commands_test_set_v0.02")
    with pytest.raises(DatasetError, match="validation_list.txt"):
        read_test_tree(str(tmp_path), names, "dev")
    with pytest.raises(DatasetError, match="not a directory"):
        read_test_tree(str(tmp_path / "nope"), names, "test")


@pytest.mark.parametrize("with_list", [True, False])
def test_eval_split_test_on_a_test_only_tree(tmp_path, with_list):
    if not (MODEL / "model.keras").is_file():
        pytest.skip("models/keywords is not in this checkout")
    tree = tmp_path / "tree"
    t = _tree(tree, with_list)
    rdir = tmp_path / "rep"
    cmd = [sys.executable, "-m", "snapuq.cli", "eval", str(MODEL), "--data-dir", str(tree), "--split", "test",
           "--report", str(rdir)]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    m = json.loads((rdir / "metrics.json").read_text())
    names = m["class_names"]
    n_files = len(t["listed"]) if with_list else len(t["files"])
    assert m["n_clips"] == n_files + 3
    assert m["list"] == ("testing_list.txt" if with_list else "none (every clip in the word folders)")
    cm = np.asarray(m["confusion"]["counts"])
    assert cm.sum() == m["n_clips"] and cm.shape == (len(names) + 1, len(names))
    # unknown words: their own row (no _unknown_ class) or the _unknown_ class
    n_other = sum(
        1 for rel, w in t["files"].items() if w in ("bed", "marvin") and (not with_list or rel in t["listed"])
    )
    if "_unknown_" in names:
        assert m["per_word"]["bed"]["label"] == "_unknown_"
        assert m["per_word"]["_silence_"]["label"] == "_silence_"
    else:
        assert m["n_unknown_to_model"] == n_other + 3 and cm[-1].sum() == n_other + 3
    # the model hears its own kind of speech: most keyword clips right, by name
    kw = [m["per_class_accuracy"][w] for w in K.WORDS if m["per_class_accuracy"][w] is not None]
    assert len(kw) == 10 and np.mean(kw) >= 0.7
    assert 0.7 <= m["accuracy"]["float"] <= 1.0 and m["accuracy"]["int8"] is not None
    for meth in ("snap", "msp"):
        row = m["methods"][meth]
        assert 0.0 <= row["ece"] <= 1.0 and row["aurc"] is not None
    assert 0.0 <= m["methods"]["snap"]["mean_p_err"] <= 1.0
    assert (rdir / "confusion.png").stat().st_size > 5000
    assert "confusion.png" in (rdir / "report.md").read_text()
    # per speaker (the file name before its first '_'; the noise pieces have none), clips of known words
    sp = m["per_speaker"]
    assert sorted(sp) == ["spk0", "spk1", "spk2"]
    assert sum(r["n"] for r in sp.values()) == m["n_known"] - (3 if "_silence_" in names else 0)
    assert all(0.0 <= r["accuracy"] <= 1.0 and "mean_U" in r for r in sp.values())
    rep = (rdir / "report.md").read_text()
    assert "Per speaker (3 speakers" in rep
    # per folder word: its class, its accuracy and what it is called instead
    assert "| word | clips | class | accuracy | mean U | called instead |" in rep
    assert all(f"| {w} | " in rep for w in m["per_word"])
    # keywords gated on U: fewer keyword answers let through, on keyword clips and on the others
    g = m["keyword_gate"]
    assert g["n_keyword_clips"] + g["n_other_clips"] == m["n_clips"]
    for k in ("snap@0.95", "snap@0.9", "msp@0.95"):
        assert g[k]["keyword_recall"] <= g["ungated"]["keyword_recall"]
        assert g[k]["false_keyword_rate"] <= g["ungated"]["false_keyword_rate"]
    assert "| ungated |" in rep and "| snap@0.95 |" in rep


def test_keyword_gate_counts():
    """The gate's threshold keeps the given share of the right keyword clips; the false keywords are the
    keyword answers let through on the other clips."""
    names = K.WORDS + ["_silence_", "_unknown_"]
    y = np.array([0, 0, 0, 0, 10, 11])
    pred = np.array([0, 0, 0, 1, 2, 11])  # 3 right keywords, 1 wrong; silence called "up"; unknown right
    r = SimpleNamespace(u=np.array([0.1, 0.2, 0.3, 0.9, 0.8, 0.1]))
    g = keyword_gate({"snap": r}, y, pred, names)
    assert g["ungated"] == {"keyword_recall": 0.75, "false_keyword_rate": 0.5}
    assert g["snap@0.95"]["keyword_recall"] == 0.5 and g["snap@0.95"]["false_keyword_rate"] == 0.0
    assert abs(g["snap@0.95"]["threshold"] - np.quantile([0.1, 0.2, 0.3], 0.95)) < 1e-12
    assert keyword_gate({"snap": r}, y[4:], pred[4:], names) is None  # no keyword clips: no gate


def test_report_of_a_tree_without_keyword_clips():
    """A folder of other words and background noise alone (e.g. real recordings of `_unknown_` words): the
    keyword classes read "no clips", the keywords-only accuracy a dash, the figures are rounded."""
    names = K.WORDS + ["_silence_", "_unknown_"]
    counts = np.zeros((len(names) + 1, len(names)), int)
    counts[-3, -3], counts[-3, 2] = 9, 1  # _silence_: 9 right, 1 called "up"
    counts[-2, -1], counts[-2, 6] = 7, 3  # _unknown_: 7 right, 3 called "on"
    o = {"model_dir": "m", "data_dir": "d", "split": "test", "list": "none", "n_clips": 20, "n_known": 20,
         "n_unknown_to_model": 0, "class_names": names,
         "accuracy": {"float": 0.8, "int8": 0.75, "keywords_only": None},
         "per_class_accuracy": {n: None for n in K.WORDS} | {"_silence_": 0.9, "_unknown_": 0.7},
         "confusion": {"counts": counts.tolist()},
         "per_word": {"four": {"n": 10, "label": "_unknown_", "predicted": {"on": 3, "_unknown_": 7},
                               "accuracy": 0.7, "mean_U": 0.41234}},
         "methods": {}}  # fmt: skip
    rep = report_md(o)
    assert "Accuracy float 0.800, int8 0.750, keywords only – (no keyword clips)." in rep
    assert "| yes | 0 | – (no clips) |" in rep and "| _silence_ | 10 | 0.900 |" in rep
    assert "| four | 10 | _unknown_ | 0.700 | 0.412 | on 3 |" in rep


def test_eval_split_one_line_errors(tmp_path):
    if not (MODEL / "model.keras").is_file():
        pytest.skip("models/keywords is not in this checkout")
    (tmp_path / "yes").mkdir()
    base = [
        sys.executable,
        "-m",
        "snapuq.cli",
        "eval",
        str(MODEL),
        "--split",
        "test",
        "--report",
        str(tmp_path / "r"),
    ]
    for extra, msg in ((["--data-dir", str(tmp_path / "nope")], "not a directory"),
                       (["--data-dir", str(tmp_path)], "holds no .wav")):  # fmt: skip
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=300)
        assert p.returncode != 0 and msg in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_test_tree_uses_the_models_front_end():
    from snapuq.data import audio
    from snapuq.errors import SnapuqError
    from snapuq.evaluation.testdir import _check_frontend

    shape = list(audio.FEATURE_SHAPE)
    for fe in (audio.frontend(), audio.frontend(cmn=True)):
        cfg = json.loads(json.dumps({"input_shape": shape, "data_meta": {"frontend": fe}}))
        assert _check_frontend(cfg) == fe
    assert _check_frontend({"input_shape": shape}) == audio.frontend()  # no record: plain MFCC
    other = {"input_shape": shape, "data_meta": {"frontend": {**audio.frontend(), "n_mel": 64}}}
    with pytest.raises(SnapuqError, match="front end"):
        _check_frontend(other)
    with pytest.raises(SnapuqError, match="not MFCC"):
        _check_frontend({"input_shape": [32, 32, 3]})
