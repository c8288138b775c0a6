"""The keywords12 set (12-class Speech Commands task synthesized offline): splits speaker-disjoint, classes
balanced, silence without a voice, the shifted dev split, the study arrays, resumable synthesis."""

from __future__ import annotations

import json

import numpy as np

from snapuq.data import keywords12 as K
from snapuq.data import tts

SMALL = {"train": 4, "dev": 2, "test": 2}


def test_voice_split_is_speaker_disjoint():
    vs = K.voice_split(0)
    groups = {s: {tts.group_of(v) for e in vs[s].values() for v in e} for s in vs}
    assert not groups["train"] & groups["dev"] and not groups["train"] & groups["test"]
    assert not groups["dev"] & groups["test"]
    langs = {s: {v.split(":")[1].split("+")[0] for v in vs[s]["espeak_foreign"]} for s in vs}
    assert not langs["train"] & langs["test"] and len(langs["test"]) == 2
    if tts.flite_voices():
        assert "flite:rms" in vs["test"]["ext"] and "flite:kal16" in vs["train"]["ext"]
    assert K.voice_split(0) == vs and K.voice_split(1)["test"] != vs["test"]


def test_small_build(tmp_path):
    ds = K.load_keywords12(str(tmp_path), 0, SMALL)
    assert ds.class_names == K.CLASSES and ds.n_classes == 12
    for s, n in SMALL.items():
        y = getattr(ds, f"y_{s}")
        assert np.bincount(y, minlength=12).tolist() == [n] * 12
        assert getattr(ds, f"x_{s}").shape == (12 * n, 49, 10, 1)
    ex = K.extra_arrays(ds)
    sil = K.CLASSES.index(K.SILENCE)
    for s in SMALL:
        v, y = ex[f"voice_{s}"], getattr(ds, f"y_{s}")
        assert (v[y == sil] == "").all() and (v[y != sil] != "").all()
    vs = K.voice_split(0)
    assert set(ex["voice_test"][ex["voice_test"] != ""]) <= {x for e in vs["test"].values() for x in e}
    # the dev split (calibration) is the shifted rendering; x_dev_std the same clips through the train profile
    assert ex["x_dev_std"].shape == ds.x_dev.shape and not np.allclose(ex["x_dev_std"], ds.x_dev)
    assert ex["x_test_shift"].shape == ds.x_test.shape and not np.allclose(ex["x_test_shift"], ds.x_test)
    meta = json.loads((tmp_path / K._cache_dir(tmp_path, 0, SMALL).name / "meta.json").read_text())
    assert meta["profiles"] == {"train": "train", "dev": "shift", "test": "train"}
    assert set(meta["engines_missing"]) == {e for e in ("flite", "festival") if not tts.available_voices()[e]}
    x_ood = K.ood_keywords12(str(tmp_path), 6, 0, ds)
    assert x_ood.shape == (6, 49, 10, 1) and np.isfinite(x_ood).all()


def test_synthesis_resumes_from_saved_speech(tmp_path):
    items = K.plan_split("test", 1, 0, K.voice_split(0)["test"])
    work = tmp_path / "w"
    speech = K._speech(work, "test", items, workers=1)
    assert (work / "speech_test.npz").exists() and len(speech) == 12
    assert all(len(w) > 800 for w, it in zip(speech, items) if it["voice"])
    again = K._speech(work, "test", [], workers=1)  # read back, nothing synthesized
    assert all(np.array_equal(a, b) for a, b in zip(speech, again))
