"""The synthesized `keywords` set, the Speech Commands loader (fake wav trees) and the DS-CNN backbone."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.io import wavfile

from snapuq.data import audio, load_dataset, load_ood
from snapuq.data import keywords as kw
from snapuq.data import speech_commands as sc
from snapuq.data.corruptions_audio import corrupted_features
from snapuq.data.dataset import split_waves
from snapuq.errors import DatasetError

TINY = {"train": 2, "dev": 1, "test": 1}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("kw")
    return root, kw.load_keywords(str(root), seed=0, per_word=TINY)


def test_keywords_shapes_labels_and_meta(tiny):
    _, ds = tiny
    assert ds.class_names == kw.WORDS and ds.n_classes == 10
    assert ds.x_train.shape == (20, 49, 10, 1) and ds.x_train.dtype == np.float32
    assert ds.x_dev.shape == (10, 49, 10, 1) and ds.x_test.shape == (10, 49, 10, 1)
    assert sorted(ds.y_train.tolist()) == sorted(list(range(10)) * 2)
    assert np.isfinite(ds.x_train).all()
    spk = ds.meta["speakers"]
    assert not (set(spk["train"]) & set(spk["test"])) and not (set(spk["dev"]) & set(spk["test"]))
    assert len(spk["train"]) + len(spk["dev"]) + len(spk["test"]) == len(kw.ACCENTS) * len(kw.VARIANTS)


def test_keywords_waves_reproduce_features(tiny):
    _, ds = tiny
    w = split_waves(ds, "test")
    assert w.shape == (10, 16000) and w.dtype == np.int16
    np.testing.assert_array_equal(audio.mfcc(np.asarray(w)), ds.x_test)
    np.testing.assert_array_equal(corrupted_features(ds, "gain", 0), ds.x_test)
    assert np.abs(corrupted_features(ds, "band_pass", 5, seed=1) - ds.x_test).mean() > 1.0


def test_keywords_deterministic_by_seed(tiny, tmp_path):
    _, ds = tiny
    again = kw.load_keywords(str(tmp_path), seed=0, per_word=TINY)  # rebuilt from scratch elsewhere
    for a in ("x_train", "y_train", "x_dev", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(ds, a), getattr(again, a))
    other = kw.load_keywords(str(tmp_path), seed=1, per_word=TINY)
    assert not np.array_equal(ds.x_train, other.x_train)
    assert ds.meta["speakers"]["test"] != other.meta["speakers"]["test"]


def test_keywords_cache_is_reused(tiny, monkeypatch):
    root, ds = tiny

    def boom(*a, **k):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(kw, "synth_split", boom)
    again = kw.load_keywords(str(root), seed=0, per_word=TINY)
    np.testing.assert_array_equal(again.x_test, ds.x_test)


def test_keywords_registry_and_ood(tiny, monkeypatch):
    root, ds = tiny
    monkeypatch.setattr(kw, "PER_WORD", TINY)
    via_registry = load_dataset("keywords", str(root), 0)
    np.testing.assert_array_equal(via_registry.x_dev, ds.x_dev)
    ood = load_ood("keywords", ds, n=6, seed=0)
    assert ood.shape == (6, 49, 10, 1) and ood.dtype == np.float32
    np.testing.assert_array_equal(ood, kw.ood_keywords(None, 6, 0, ds))
    assert not np.array_equal(ood, kw.ood_keywords(None, 6, 1, ds))
    with pytest.raises(DatasetError, match="positive"):
        kw.ood_keywords(None, 0, 0, ds)


def test_espeak_rejects_unknown_voice_and_synthesizes():
    e = kw.Espeak.get()
    w = e.synth("yes", "en-us")
    assert w.dtype == np.int16 and 3000 < w.size < 22050 and np.abs(w).max() > 1000
    with pytest.raises(DatasetError, match="no voice"):
        e.synth("yes", "xx-nonexistent-voice")


def test_keywords_corrupt_cache_is_reported(tiny, tmp_path):
    import shutil

    src = kw.build_keywords(tiny[0], 0, TINY)  # cached: returns at once
    d = tmp_path / src.name
    shutil.copytree(src, d)
    (d / "x_dev.npy").write_bytes(b"garbage")
    with pytest.raises(DatasetError, match="corrupt cache"):
        kw.load_keywords(str(tmp_path), 0, per_word=TINY)


# ---- Speech Commands wav tree --------------------------------------------------------------------
def _wav(path, n=16000, rate=16000, channels=1, seed=0, dtype=np.int16):
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    data = (rng.standard_normal((n, channels) if channels > 1 else n) * 3000).astype(dtype)
    wavfile.write(path, rate, data)


def _tree(root, words=kw.WORDS, per_word=3, unknown=("bed", "cat")):
    val, test = [], []
    for wi, w in enumerate(list(words) + list(unknown)):
        for j in range(per_word):
            rel = f"{w}/{wi:02d}{j:06x}_nohash_0.wav"
            _wav(root / rel, n=16000 if j else 12000, seed=wi * 10 + j)
            (val if j == 1 else test if j == 2 else []).append(rel)
    (root / "validation_list.txt").write_text("\n".join(val) + "\n")
    (root / "testing_list.txt").write_text("\n".join(test) + "\n")
    return root


def test_speech_commands_fake_tree(tmp_path, monkeypatch):
    monkeypatch.setenv("SNAPUQ_CACHE", str(tmp_path / "cache"))
    root = _tree(tmp_path / "speech_commands_v0.02")
    ds = load_dataset("speech_commands", str(tmp_path), seed=0)  # parent dir works too
    assert ds.x_train.shape == (10, 49, 10, 1) and ds.x_dev.shape == (10, 49, 10, 1)
    assert ds.class_names == kw.WORDS and sorted(ds.y_test.tolist()) == list(range(10))
    sr, first = wavfile.read(root / "yes" / "00000000_nohash_0.wav")
    assert audio.mfcc(audio.fit_length(first)).shape == (49, 10, 1)
    np.testing.assert_array_equal(audio.mfcc(np.asarray(split_waves(ds, "test"))), ds.x_test)
    again = sc.load_speech_commands(str(root), seed=0)
    np.testing.assert_array_equal(again.x_train, ds.x_train)
    other = sc.load_speech_commands(str(root), seed=1)
    assert sorted(map(bytes, other.x_train)) == sorted(map(bytes, ds.x_train))
    ood = load_ood("speech_commands", ds, data_dir=str(root), n=5, seed=0)
    assert ood.shape == (2, 49, 10, 1)  # only two unused-word test files exist


def test_speech_commands_error_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("SNAPUQ_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DatasetError, match="needs --data-dir"):
        sc.load_speech_commands(None)
    with pytest.raises(DatasetError, match="not a directory"):
        sc.load_speech_commands(str(tmp_path / "nope"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetError, match=r"lacks validation_list.txt, testing_list.txt.*wav tree"):
        sc.load_speech_commands(str(empty))

    root = _tree(tmp_path / "t1", words=kw.WORDS[:9])
    with pytest.raises(DatasetError, match=r"t1/go is missing"):
        sc.load_speech_commands(str(root))

    root = _tree(tmp_path / "t2")
    _wav(root / "up" / "zz_nohash_0.wav", rate=4000)
    with pytest.raises(DatasetError, match=r"speech_commands: .*zz_nohash_0.wav: 4000 Hz; the front end "
                                           r"needs at least 8000 Hz"):  # fmt: skip
        sc.load_speech_commands(str(root))

    root = _tree(tmp_path / "t4")
    (root / "left" / "yy_nohash_0.wav").write_bytes(b"RIFF-not-a-wav")
    with pytest.raises(DatasetError, match="yy_nohash_0.wav: cannot read the wav file"):
        sc.load_speech_commands(str(root))

    root = _tree(tmp_path / "t5")
    (root / "testing_list.txt").write_text("not a path\n")
    with pytest.raises(DatasetError, match="testing_list.txt line 1"):
        sc.load_speech_commands(str(root))

    root = _tree(tmp_path / "t6", unknown=())
    ds = sc.load_speech_commands(str(root))
    with pytest.raises(DatasetError, match="unused-word folders"):
        sc.ood_speech_commands(str(root), 5, 0, ds)


# ---- DS-CNN --------------------------------------------------------------------------------------
def test_dscnn_shape_names_and_size():
    from snapuq.nn.backbones import build_backbone
    from snapuq.nn.backbones.dscnn import DEFAULT_TAPS, TAP_LAYERS, TAP_PREV

    m = build_backbone("dscnn", (49, 10, 1), 10)
    names = [layer.name for layer in m.layers]
    assert m.output_shape == (None, 10)
    assert all(t in names for t in TAP_LAYERS) and set(DEFAULT_TAPS) <= set(TAP_PREV)
    assert all(TAP_LAYERS.index(p) < TAP_LAYERS.index(t) for t, p in TAP_PREV.items())
    assert m.get_layer("feat").output.shape[1:] == (64,)
    assert m.get_layer("relu0").output.shape[1:] == (25, 5, 64)
    assert m.get_layer("block4").output.shape[1:] == (25, 5, 64)
    drops = [layer for layer in m.layers if layer.__class__.__name__ == "Dropout"]
    assert len(drops) == 2 and all(d.name.startswith("drop") for d in drops)
    # MLPerf Tiny DS-CNN (small): ~23 k parameters with 12 classes; 10 classes here
    assert 20_000 < m.count_params() < 26_000


def test_dscnn_converts_to_int8_subset():
    import tensorflow as tf
    from tflite.Model import Model

    from snapuq.nn.backbones.dscnn import build_dscnn

    m = build_dscnn((49, 10, 1), 10)
    rng = np.random.default_rng(0)
    reps = [rng.normal(-3, 20, (1, 49, 10, 1)).astype(np.float32) for _ in range(8)]
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([r] for r in reps)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    buf = conv.convert()
    model = Model.GetRootAs(buf, 0)
    from tflite.BuiltinOperator import BuiltinOperator

    names = {v: k for k, v in BuiltinOperator.__dict__.items() if not k.startswith("_")}
    ops = set()
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        ops.add(names[max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())])
    allowed = {"CONV_2D", "DEPTHWISE_CONV_2D", "MEAN", "AVERAGE_POOL_2D", "FULLY_CONNECTED", "RESHAPE"}
    assert ops <= allowed, ops


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_wav_of_any_rate_and_channels_is_read_at_16k(tmp_path, rate):
    """A clip recorded at another rate (a phone's 8 kHz, a laptop's 44.1 / 48 kHz) or in stereo is resampled
    to 16 kHz (channels averaged): a 1 kHz tone stays 1 kHz, a 0.75 s file stays 0.75 s; the Speech Commands
    reader and the test-tree reader take it like a 16 kHz mono clip."""
    t = np.arange(int(0.75 * rate)) / rate
    tone = 0.5 * np.sin(2 * np.pi * 1000.0 * t)
    f = tmp_path / "stereo.wav"
    wavfile.write(f, rate, np.stack([tone, 0.5 * tone], 1).astype(np.float32))  # L and R: one scene
    w = sc.read_audio(f)
    assert w.dtype == np.int16 and abs(len(w) - 12000) <= 1
    spec = np.abs(np.fft.rfft(w.astype(np.float64) * np.hanning(len(w))))
    assert abs(np.argmax(spec) * 16000 / len(w) - 1000.0) < 2.0
    assert abs(np.abs(w[2000:10000]).max() / 32768 - 0.375) < 0.01  # the channels' average
    clip = sc.read_wav(f)
    assert clip.shape == (16000,) and not clip[12100:].any() and np.array_equal(clip[:11900], w[:11900])
    empty = tmp_path / "empty.wav"  # a header and no samples: a silent second
    wavfile.write(empty, 44100, np.zeros(0, np.int16))
    assert not sc.read_wav(empty).any() and sc.read_audio(empty).shape == (0,)
    u8 = tmp_path / "u8.wav"
    wavfile.write(u8, 16000, np.array([128, 255, 0, 192], np.uint8))
    assert sc.read_wav(u8)[:4].tolist() == [0, 32512, -32768, 16384]
    i16 = tmp_path / "i16.wav"  # 16 kHz int16: the bytes unchanged
    x = (np.random.default_rng(0).standard_normal(16000) * 3000).astype(np.int16)
    wavfile.write(i16, 16000, x)
    assert np.array_equal(sc.read_wav(i16), x)
    root = tmp_path / "tree"
    (root / "yes").mkdir(parents=True)
    (root / "three").mkdir()
    wavfile.write(root / "yes" / "a.wav", rate, tone.astype(np.float32))
    wavfile.write(root / "three" / "b.wav", rate, np.stack([tone, tone], 1).astype(np.float32))
    tree = sc.read_test_tree(str(root), list(kw.WORDS) + ["_silence_", "_unknown_"], split="all")
    assert tree["waves"].shape == (2, 16000) and tree["labels"].tolist() == [11, 0]
