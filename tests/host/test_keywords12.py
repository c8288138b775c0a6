"""The keywords12 set (12-class Speech Commands task synthesized offline): splits speaker-disjoint, classes
balanced, silence without a voice, the shifted dev split, the study arrays, resumable synthesis."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from snapuq.data import audio, tts
from snapuq.data import augment_audio as A
from snapuq.data import keywords12 as K
from snapuq.data.dataset import split_waves
from snapuq.errors import DatasetError

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
        n = n * K.TRAIN_TAKES if s == "train" else n  # every train utterance rendered TRAIN_TAKES times
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
    meta = json.loads(
        (tmp_path / K._cache_dir(tmp_path, 0, SMALL, K.TRAIN_TAKES).name / "meta.json").read_text()
    )
    assert meta["profiles"] == {"train": "train_env_light", "dev": "shift", "test": "train"}
    assert meta["train_takes"] == K.TRAIN_TAKES and meta["per_class"] == SMALL
    assert set(meta["engines_missing"]) == {e for e in ("flite", "festival") if not tts.available_voices()[e]}
    x_ood = K.ood_keywords12(str(tmp_path), 6, 0, ds)
    assert x_ood.shape == (6, 49, 10, 1) and np.isfinite(x_ood).all()
    # the set's front end: cepstral mean normalization over the cached plain MFCC, on every feature array
    assert ds.meta["frontend"] == K.FRONT_END and K.FRONT_END["cmn"]
    raw = K.load_cache(K._cache_dir(tmp_path, 0, SMALL, K.TRAIN_TAKES), raw=True)
    assert raw.meta["frontend"] == audio.frontend()
    for s in SMALL:
        np.testing.assert_array_equal(getattr(ds, f"x_{s}"), audio.cepstral_mean_norm(getattr(raw, f"x_{s}")))
    np.testing.assert_allclose(ds.x_test.mean(axis=1), 0.0, atol=1e-4)
    shift_raw = K.extra_arrays(raw)["x_test_shift"]
    np.testing.assert_array_equal(ex["x_test_shift"], audio.cepstral_mean_norm(shift_raw))
    np.testing.assert_allclose(x_ood.mean(axis=1), 0.0, atol=1e-4)
    cached = np.load(K._cache_dir(tmp_path, 0, SMALL, K.TRAIN_TAKES) / "ood-s0-n6.npy")  # the plain MFCC
    np.testing.assert_array_equal(K.ood_keywords12(str(tmp_path), 6, 0, raw), cached)
    # the clips through the front end give the features (what `snapuq eval --data-dir TREE` computes)
    from_clips = audio.features(split_waves(ds, "test"), ds.meta["frontend"])
    np.testing.assert_allclose(from_clips, ds.x_test, atol=1e-5)


def test_synthesis_resumes_from_saved_speech(tmp_path, monkeypatch):
    items = K.plan_split("test", 1, 0, K.voice_split(0)["test"])
    work = tmp_path / "w"
    speech = K._speech(work, "test", items, workers=1)
    assert [f.name for f in work.glob("speech_test_*.npz")] == [f"speech_test_{K._digest(items)}.npz"]
    assert len(speech) == 12 and all(len(w) > 800 for w, it in zip(speech, items) if it["voice"])

    def no_synthesis(*a, **k):
        raise AssertionError("synthesized again")

    monkeypatch.setattr(K, "run_fresh", no_synthesis)
    again = K._speech(work, "test", items, workers=1)  # read back, nothing synthesized
    assert all(np.array_equal(a, b) for a, b in zip(speech, again))
    # another plan (here: other voices) never reads this speech: its file name differs
    other = [dict(it, voice="espeak:en-us") if it["voice"] else it for it in items]
    with pytest.raises(AssertionError, match="synthesized again"):
        K._speech(work, "test", other, workers=1)


def test_caches_are_named_by_the_voices_a_machine_has(tmp_path):
    """Two machines with other voice inventories (e.g. festival's speakers of other languages installed or
    not) never share a feature cache; the same inventory always finds the same one."""
    vs = K.voice_split(0)
    fewer = {s: dict(e) for s, e in vs.items()}
    fewer["train"]["ext"] = [v for v in vs["train"]["ext"] if tts.group_of(v) in ("ext:kal", "ext:slt")][:1]
    assert K._cache_dir(tmp_path, 0, SMALL, 3) == K._cache_dir(tmp_path, 0, SMALL, 3, vs)
    assert K._cache_dir(tmp_path, 0, SMALL, 3, fewer) != K._cache_dir(tmp_path, 0, SMALL, 3, vs)


def test_festival_inventory_lists_voices_that_read_latin_text(tmp_path, monkeypatch):
    for lang, name, festvox in [("english", "kal_diphone", True), ("finnish", "suopuhe.common", False),
                                ("czech", "czech_dita", True), ("hindi", "hindi_NSK_diphone", True)]:
        (tmp_path / lang / name / ("festvox" if festvox else "x")).mkdir(parents=True)
    monkeypatch.setattr(tts, "FESTIVAL_VOICE_DIR", tmp_path)
    monkeypatch.setattr(tts.shutil, "which", lambda exe: f"/usr/bin/{exe}")
    tts.festival_voices.cache_clear()
    try:
        # shared files are no voice; the Hindi / Marathi / Telugu voices crash on Latin text
        assert tts.festival_voices() == ["czech_dita", "kal_diphone"]
    finally:
        tts.festival_voices.cache_clear()


def test_train_takes_render_each_utterance_again(tmp_path):
    """takes=2: every train utterance twice through the microphone; take 0 is the one-take set's clip (the
    same bytes), take 1 another rendering; dev / test unchanged; the build records its takes."""
    small = {"train": 2, "dev": 1, "test": 1}
    one = K.load_keywords12(str(tmp_path), 0, small, takes=1)
    two = K.load_keywords12(str(tmp_path), 0, small, takes=2)
    assert two.meta["train_takes"] == 2 and one.meta["train_takes"] == 1
    assert two.meta["cache_dir"] != one.meta["cache_dir"] and two.meta["per_class"] == small
    e1, e2 = K.extra_arrays(one), K.extra_arrays(two)
    assert len(two.y_train) == 2 * len(one.y_train) == 2 * 12 * small["train"]
    assert sorted(e2["take_train"].tolist()) == [0] * 24 + [1] * 24
    assert np.bincount(e2["utt_train"]).tolist() == [2] * 24
    for j, u in enumerate(e1["utt_train"]):
        k0 = np.nonzero((e2["utt_train"] == u) & (e2["take_train"] == 0))[0][0]
        k1 = np.nonzero((e2["utt_train"] == u) & (e2["take_train"] == 1))[0][0]
        assert np.array_equal(one.x_train[j], two.x_train[k0]) and two.y_train[k0] == one.y_train[j]
        assert two.y_train[k1] == one.y_train[j] and not np.allclose(two.x_train[k1], two.x_train[k0])
        assert e2["voice_train"][k1] == e1["voice_train"][j]
    assert np.array_equal(one.x_test, two.x_test) and np.array_equal(one.x_dev, two.x_dev)
    with pytest.raises(DatasetError, match="takes"):
        K.load_keywords12(str(tmp_path), 0, small, takes=0)


FAKE_FESTIVAL = r'''#!/usr/bin/env python3
"""A festival stand-in: writes a short wave per utt.save.wave line, and dies with SIGSEGV (as festival's
pc_diphone does on "no" at a duration stretch of 1.29) when it reaches the text "crash" at stretch 1.000."""
import os, re, signal, sys, wave
stretch = 1.0
for line in open(sys.argv[-1]):
    m = re.search(r"Duration_Stretch ([0-9.]+)", line)
    if m:
        stretch = float(m.group(1))
    m = re.search(r'Utterance Text "([^"]*)"\)\) "([^"]+)"', line)
    if m:
        if m.group(1) == "crash" and abs(stretch - 1.0) < 1e-9:
            os.kill(os.getpid(), signal.SIGSEGV)
        with wave.open(m.group(2), "wb") as w:
            w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
            w.writeframes(int(1000 * stretch).to_bytes(2, "little", signed=True) * 1600)
'''


def test_festival_batch_survives_a_crash_on_one_utterance(tmp_path, monkeypatch):
    """Festival dies on one utterance: the waves before it are kept, that one is spoken alone with its
    duration stretch nudged, the rest of the batch goes on; an utterance it always dies on: a clear error."""
    exe = tmp_path / "festival"
    exe.write_text(FAKE_FESTIVAL)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    out = tts.synth_festival_batch("x", [("yes", 1.1), ("crash", 1.0), ("go", 0.9), ("crash", 1.2)])
    assert [len(w) for w in out] == [1600] * 4
    levels = [round(float(w[0]) * 32768) for w in out]
    assert levels == [1100, 1020, 900, 1200]  # the crash was spoken at 1.0 + FESTIVAL_NUDGES[0]
    monkeypatch.setattr(tts, "FESTIVAL_NUDGES", (0.0,))
    with pytest.raises(DatasetError, match="crashes on 'crash'"):
        tts.synth_festival_batch("x", [("crash", 1.0)])


def test_a_model_of_another_front_end_reads_the_set_through_its_own(tmp_path, monkeypatch):
    import snapuq.data as D

    small = K.load_keywords12(str(tmp_path), 0, SMALL)
    monkeypatch.setattr(D, "_load", lambda name, data_dir, seed, build=None: small)
    # a model trained before the set's front end gained CMN (config.json: the plain MFCC record)
    plain = D.load_dataset("keywords12", None, 0, frontend=json.loads(json.dumps(audio.frontend())))
    raw = K.load_cache(K._cache_dir(tmp_path, 0, SMALL, K.TRAIN_TAKES), raw=True)
    np.testing.assert_array_equal(plain.x_test, raw.x_test)
    assert plain.meta["frontend"] == audio.frontend()
    ood_plain = K.ood_keywords12(str(tmp_path), 6, 0, plain)  # its OOD words too: c0's mean is the level
    assert np.abs(ood_plain.mean(axis=1)).max() > 1.0
    assert D.load_dataset("keywords12", None, 0, frontend=json.loads(json.dumps(K.FRONT_END))) is small
    assert D.load_dataset("keywords12", None, 0) is small  # no model: the set as it is
    # a set that cannot give another front end refuses in one line
    with pytest.raises(DatasetError, match="front end"):
        D.load_dataset("keywords", None, 0, frontend=audio.frontend())

    # a model trained with --frontend cmn-keep-level: the cache's MFCC through it, its OOD words too
    keep_fe = json.loads(json.dumps(audio.FRONTENDS["cmn-keep-level"]))
    keep = D.load_dataset("keywords12", None, 0, frontend=keep_fe)
    np.testing.assert_array_equal(keep.x_test[..., 0, :], raw.x_test[..., 0, :])
    np.testing.assert_allclose(keep.x_test[..., 1:, :], small.x_test[..., 1:, :], atol=1e-6)
    assert keep.meta["frontend"] == audio.FRONTENDS["cmn-keep-level"]
    ood_keep = K.ood_keywords12(str(tmp_path), 6, 0, keep)
    np.testing.assert_array_equal(ood_keep[..., 0, :], ood_plain[..., 0, :])


def test_a_plain_mfcc_set_gives_any_cmn_front_end(tmp_path, monkeypatch):
    """CMN is a function of the MFCC alone: a set of plain MFCC (keywords, speech_commands, a folder of clips)
    is given through a model's CMN front end; one whose inputs a moved-out normalization changed is
    refused."""
    import dataclasses

    import snapuq.data as D

    small = K.load_keywords12(str(tmp_path), 0, SMALL)
    plain = K.load_cache(K._cache_dir(tmp_path, 0, SMALL, K.TRAIN_TAKES), raw=True)
    plain = dataclasses.replace(plain, x_ood=plain.x_test[:3])
    monkeypatch.setattr(D, "_load", lambda name, data_dir, seed, build=None: plain)
    for name, fe in audio.FRONTENDS.items():
        got = D.load_dataset("speech_commands", None, 0, frontend=json.loads(json.dumps(fe)))
        assert got.meta["frontend"] == fe, name
        for k in ("x_train", "x_dev", "x_test"):
            np.testing.assert_array_equal(getattr(got, k), audio.finish(getattr(plain, k), fe))
        np.testing.assert_array_equal(got.x_ood, audio.finish(plain.x_test[:3], fe))
    np.testing.assert_allclose(D.load_dataset("keywords", None, 0, frontend=audio.FRONTENDS["cmn"]).x_test,
                               small.x_test, atol=1e-6)  # fmt: skip
    normed = dataclasses.replace(plain, meta={**plain.meta, "normalization": {"kind": "standard"}})
    monkeypatch.setattr(D, "_load", lambda name, data_dir, seed, build=None: normed)
    with pytest.raises(DatasetError, match=r"front end \(config.json data_meta.frontend: cmn\) is not the "
                       r"set's \(mfcc\) and cannot be made from it"):  # fmt: skip
        D.load_dataset("speech_commands", None, 0, frontend=audio.FRONTENDS["cmn"])


def test_train_with_another_front_end(tmp_path, monkeypatch, capsys):
    """`snapuq train --frontend cmn-keep-level`: the model reads the set's clips through the level-keeping
    CMN; config.json records it, every later load of the set for the model gives the same features, and a
    second seed's command carries it; on a set without audio, or with --model, it is refused in one line."""
    import snapuq.data as D
    from snapuq.cli import main
    from snapuq.commands.multiseed import train_argv

    monkeypatch.setattr(K, "PER_CLASS", SMALL)
    out = tmp_path / "m"
    argv = ["train", "--dataset", "keywords12", "--data-dir", str(tmp_path / "data"), "--no-progress",
            "--no-baselines", "--epochs", "1", "--head-epochs", "1"]  # fmt: skip
    assert main(argv + ["--out", str(out), "--frontend", "cmn-keep-level"]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert audio.frontend_name(cfg["data_meta"]["frontend"]) == "cmn-keep-level"
    ds = D.load_dataset("keywords12", str(tmp_path / "data"), 0, frontend=D.frontend_of(cfg))
    raw = K.load_cache(K._cache_dir(tmp_path / "data", 0, SMALL, K.TRAIN_TAKES), raw=True)
    np.testing.assert_array_equal(ds.x_dev[..., 0, :], raw.x_dev[..., 0, :])  # c0 kept
    assert np.abs(ds.x_dev[..., 1:, :].mean(axis=1)).max() < 1e-4  # c1-9 mean-normalized
    a = train_argv(out, cfg, None, 1, tmp_path / "m_seed1", None)
    assert a[a.index("--frontend") + 1] == "cmn-keep-level"
    capsys.readouterr()
    bad = [(["--dataset", "digits", "--frontend", "cmn"], "--frontend: digits is not an audio set"),
           (["--model", str(out / "model.keras"), "--data", str(tmp_path), "--frontend", "cmn"],
            "--frontend goes with --dataset")]  # fmt: skip
    for extra, msg in bad:
        assert main(["train", "--out", str(tmp_path / "x"), "--no-progress", "--epochs", "1"] + extra) == 1
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, (extra, err)


def test_train_on_another_build_and_read_it_back(tmp_path, monkeypatch, capsys):
    """`snapuq train --backgrounds set`: config.json records the build, every later load of the set for the
    model (dataset_of) gives its train split, not the default build's, and a second seed's command carries it;
    a model recorded before the option reads the set's build; on a set made one way it is refused in one
    line, an unknown name too."""
    import snapuq.data as D
    from snapuq.cli import main
    from snapuq.commands.multiseed import train_argv

    monkeypatch.setattr(K, "PER_CLASS", SMALL)
    monkeypatch.setattr(K, "TRAIN_TAKES", 1)
    data, out = str(tmp_path / "data"), tmp_path / "m"
    argv = ["train", "--dataset", "keywords12", "--data-dir", data, "--no-progress", "--no-baselines",
            "--epochs", "1", "--head-epochs", "1"]  # fmt: skip
    assert main(argv + ["--out", str(out), "--backgrounds", "set"]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["data_meta"]["backgrounds"] == "set"
    default = D.load_dataset("keywords12", data, 0)
    assert default.meta["backgrounds"] == K.DEFAULT_BACKGROUNDS == "everyday-light"
    mine = D.dataset_of(cfg, data)
    assert mine.meta["backgrounds"] == "set" and not np.array_equal(mine.x_train, default.x_train)
    np.testing.assert_array_equal(mine.x_test, default.x_test)
    older = {**cfg, "data_meta": {k: v for k, v in cfg["data_meta"].items() if k != "backgrounds"}}
    np.testing.assert_array_equal(D.dataset_of(older, data).x_train, mine.x_train)
    a = train_argv(out, cfg, None, 1, tmp_path / "m_seed1", None)
    assert a[a.index("--backgrounds") + 1] == "set"
    capsys.readouterr()
    bad = [(["--dataset", "digits", "--backgrounds", "set"], "--backgrounds goes with --dataset keywords12"),
           (argv[1:3] + ["--data-dir", data, "--backgrounds", "street"], "unknown backgrounds 'street'")]
    for extra, msg in bad:
        assert main(["train", "--out", str(tmp_path / "x"), "--no-progress", "--epochs", "1"] + extra) == 1
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err, (extra, err)


def test_teachers_must_have_read_the_sets_front_end(tmp_path):
    from types import SimpleNamespace

    from snapuq.commands.train import check_teacher_frontend
    from snapuq.errors import SnapuqError

    t = tmp_path / "t"
    (t / "baselines").mkdir(parents=True)
    ds = SimpleNamespace(meta={"frontend": audio.FRONTENDS["cmn"]})
    odd = {**audio.FRONTENDS["cmn"], "n_mfcc": 13}
    for fe, ok in ((audio.FRONTENDS["cmn"], True), (audio.FRONTENDS["mfcc"], False), (odd, False)):
        (t / "config.json").write_text(json.dumps({"data_meta": {"frontend": fe}}))
        for src in (t, t / "baselines"):  # the model directory or its baselines/
            if ok:
                check_teacher_frontend(src, ds)
            else:
                with pytest.raises(SnapuqError, match="another front end"):
                    check_teacher_frontend(src, ds)
    # two records of front ends this package does not know are not the same front end
    with pytest.raises(SnapuqError, match="another front end"):
        check_teacher_frontend(t, SimpleNamespace(meta={"frontend": {**odd, "n_mel": 64}}))
    # teachers of another build of the set: a warning (their targets on everyday sounds are the old build's)
    ds = SimpleNamespace(name="keywords12", meta={"frontend": audio.FRONTENDS["cmn"],
                                                  "backgrounds": "everyday-light"})  # fmt: skip
    cases = (({}, True), ({"backgrounds": "everyday"}, True), ({"backgrounds": "everyday-light"}, False))
    for rec, warned in cases:
        (t / "config.json").write_text(json.dumps({"data_meta": {"frontend": audio.FRONTENDS["cmn"], **rec}}))
        said: list[str] = []
        check_teacher_frontend(t, ds, log=said.append)
        assert bool(said) == warned and all("another build of keywords12" in m for m in said), (rec, said)


def test_everyday_backgrounds_change_only_the_train_split(tmp_path):
    """backgrounds="everyday": the train split through the train_env profile (everyday sounds behind a share
    of the words and in `_silence_`), its own cache and meta; dev and test the same bytes as the set's build;
    an unknown name is one line."""
    small = {"train": 2, "dev": 1, "test": 1}
    base = K.load_keywords12(str(tmp_path), 0, small, takes=1, backgrounds="set")
    env = K.load_keywords12(str(tmp_path), 0, small, takes=1, backgrounds="everyday")
    assert env.meta["cache_dir"] != base.meta["cache_dir"] and "-everyday-" in env.meta["cache_dir"]
    assert env.meta["backgrounds"] == "everyday" and base.meta["backgrounds"] == "set"
    assert env.meta["profiles"]["train"] == "train_env" and base.meta["profiles"]["train"] == "train"
    assert np.array_equal(env.x_test, base.x_test) and np.array_equal(env.x_dev, base.x_dev)
    assert np.array_equal(env.y_train, base.y_train) and not np.allclose(env.x_train, base.x_train)
    assert {K.BACKGROUNDS[b] for b in ("everyday", "everyday-light")} <= set(A.PROFILES)
    assert "-everyday-light-" in K._cache_dir(tmp_path, 0, small, 1, backgrounds="everyday-light").name
    with pytest.raises(DatasetError, match="unknown backgrounds 'street'"):
        K.load_keywords12(str(tmp_path), 0, small, takes=1, backgrounds="street")
