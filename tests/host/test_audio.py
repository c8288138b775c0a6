"""MFCC front end against independent computations, and SpeechCmd-C corruptions (monotone severities)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.fft
import scipy.signal

from snapuq.data import Dataset, audio
from snapuq.data import corruptions_audio as ca
from snapuq.errors import DatasetError, SnapuqError

SR = 16000


def _reference_mfcc(wave: np.ndarray) -> np.ndarray:
    """Straightforward loop implementation: scipy window, scipy rfft, explicit triangular filterbank built
    band by band from the mel-spaced edges, scipy DCT-II scaled like tf.signal.mfccs_from_log_mel_spectrograms
    """
    win = scipy.signal.get_window("hann", 640, fftbins=True)
    mel = lambda f: 1127.0 * np.log(1.0 + f / 700.0)  # noqa: E731
    freqs = np.arange(513) * (SR / 2) / 512
    edges = np.linspace(mel(20.0), mel(4000.0), 42)
    fb = np.zeros((40, 513))
    for b in range(40):
        lo, c, hi = edges[b], edges[b + 1], edges[b + 2]
        for k in range(1, 513):
            m = mel(freqs[k])
            if lo < m <= c:
                fb[b, k] = (m - lo) / (c - lo)
            elif c < m < hi:
                fb[b, k] = (hi - m) / (hi - c)
    out = np.zeros((49, 10))
    for t in range(49):
        frame = wave[t * 320 : t * 320 + 640] * win
        mag = np.abs(scipy.fft.rfft(frame, 1024))
        logmel = np.log(fb @ mag + 1e-6)
        out[t] = (scipy.fft.dct(logmel, type=2) / np.sqrt(2 * 40))[:10]
    return out


def _tone(f: float, amp: float = 0.5, n: int = SR, start: int = 0, stop: int | None = None) -> np.ndarray:
    t = np.arange(n) / SR
    w = amp * np.sin(2 * np.pi * f * t)
    env = np.zeros(n)
    env[start : stop if stop is not None else n] = 1.0
    return w * env


def _speechlike(seed: int = 0) -> np.ndarray:
    """A harmonic 'vowel' burst (150 Hz fundamental, formant-shaped) around 0.5 s over a faint noise floor."""
    rng = np.random.default_rng(seed)
    t = np.arange(SR) / SR
    x = sum(np.sin(2 * np.pi * 150 * h * t) / h * (1.5 if 4 <= h <= 6 else 1.0) for h in range(1, 20))
    env = np.exp(-0.5 * ((t - 0.5) / 0.08) ** 2)
    x = 0.3 * x * env / np.abs(x * env).max() + 1e-3 * rng.standard_normal(SR)
    return audio.to_int16(x)


# ---- MFCC ----------------------------------------------------------------------------------------
def test_mfcc_shape_and_constants():
    assert audio.N_FRAMES == 49 and audio.FEATURE_SHAPE == (49, 10, 1)
    f = audio.mfcc(np.zeros((3, SR), np.int16))
    assert f.shape == (3, 49, 10, 1) and f.dtype == np.float32
    assert audio.mfcc(np.zeros(SR)).shape == (49, 10, 1)


def test_mfcc_matches_reference_loop_implementation():
    rng = np.random.default_rng(3)
    w = 0.1 * rng.standard_normal(SR) + _tone(700.0, 0.2)
    ours = audio.mfcc(w)[:, :, 0]
    ref = _reference_mfcc(w)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-4)


def test_mfcc_matches_tensorflow_signal():
    import tensorflow as tf
    rng = np.random.default_rng(5)
    w = (0.05 * rng.standard_normal((2, SR))).astype(np.float32)
    mag = tf.abs(tf.signal.stft(w, 640, 320, 1024))
    m = tf.signal.linear_to_mel_weight_matrix(40, 513, SR, 20.0, 4000.0)
    ref = tf.signal.mfccs_from_log_mel_spectrograms(tf.math.log(tf.tensordot(mag, m, 1) + 1e-6))[..., :10]
    np.testing.assert_allclose(audio.mfcc(w)[..., 0], ref.numpy(), rtol=0, atol=1e-3)


def test_mfcc_closed_forms_silence_gain_and_tone():
    # silence: every log-mel value is log(1e-6); DCT of a constant -> only c0 = sqrt(2/40) * 40 * log(1e-6)
    f = audio.mfcc(np.zeros(SR))[:, :, 0]
    np.testing.assert_allclose(f[:, 0], np.sqrt(2 / 40) * 40 * np.log(1e-6), rtol=1e-6)
    np.testing.assert_allclose(f[:, 1:], 0.0, atol=1e-4)
    # doubling the amplitude adds log 2 to every (loud) band: c0 += sqrt(80) log 2, the rest unchanged
    w = _tone(1000.0, 0.1) + 0.01 * np.random.default_rng(0).standard_normal(SR)
    a, b = audio.mfcc(w)[:, :, 0], audio.mfcc(2 * w)[:, :, 0]
    np.testing.assert_allclose(b[:, 0] - a[:, 0], np.sqrt(80) * np.log(2), atol=1e-3)
    np.testing.assert_allclose(b[:, 1:], a[:, 1:], atol=1e-3)
    # a pure tone lands in the mel band whose centre is nearest to its frequency
    lm = audio.log_mel(_tone(1000.0, 0.5))
    centres = np.linspace(audio._hz_to_mel(20.0), audio._hz_to_mel(4000.0), 42)[1:-1]
    assert int(np.argmax(lm[10])) == int(np.argmin(np.abs(centres - audio._hz_to_mel(1000.0))))


def test_mfcc_int16_equals_scaled_float_and_bad_input():
    w = _speechlike()
    np.testing.assert_array_equal(audio.mfcc(w), audio.mfcc(w.astype(np.float64) / 32768.0))
    assert audio.mfcc(w[:8000]).shape == (49, 10, 1)  # short clips are zero-padded
    with pytest.raises(ValueError):
        audio.mfcc(np.zeros((2, 2, SR)))
    with pytest.raises(ValueError):
        audio.mfcc(np.zeros(SR, dtype=np.int32))


def test_cepstral_mean_normalization_removes_a_fixed_channel():
    w = _speechlike()
    plain = audio.mfcc(w)
    x = audio.features(w, audio.frontend(cmn=True))
    assert x.shape == plain.shape and x.dtype == np.float32
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-5)  # every coefficient has mean 0 over frames
    np.testing.assert_allclose(x, plain - plain.mean(axis=0, keepdims=True), atol=1e-5)
    # a gain adds a constant to c0 in every frame: gone after CMN (up to float32 rounding)
    np.testing.assert_allclose(audio.features(3 * w, audio.frontend(cmn=True)), x, atol=2e-3)
    # a fixed filter (a channel colour) is, where the bands hold energy, a constant per coefficient
    loud = w.astype(np.float64) / 32768.0 + 1e-3 * np.random.default_rng(1).standard_normal(SR)
    coloured = scipy.signal.lfilter([1.0, -0.9], [1.0], loud)
    gap_plain = np.abs(audio.mfcc(coloured) - audio.mfcc(loud)).mean()
    fe = audio.frontend(True)
    gap_cmn = np.abs(audio.features(coloured, fe) - audio.features(loud, fe)).mean()
    assert gap_cmn < 0.25 * gap_plain
    # a batch is the clips one by one; the plain record and no record are the plain MFCC
    b = audio.features(np.stack([w, 2 * w]), audio.frontend(True))
    np.testing.assert_array_equal(b[0], x)
    np.testing.assert_array_equal(audio.features(w, audio.frontend()), plain)
    np.testing.assert_array_equal(audio.features(w), plain)
    with pytest.raises(ValueError, match="cepstral mean"):
        audio.cepstral_mean_norm(np.zeros((49, 12, 1)))


def test_known_frontend_reads_json_records():
    rt = json.loads(json.dumps(audio.frontend(cmn=True)))  # tuples become lists in config.json
    assert audio.known_frontend(rt) == audio.frontend(cmn=True)
    assert audio.known_frontend(json.loads(json.dumps(audio.FRONTEND))) == audio.frontend()
    assert audio.known_frontend(None) == audio.frontend()
    assert audio.known_frontend({**rt, "n_mfcc": 13}) is None
    assert audio.known_frontend({**rt, "cmn": "per utterance, mean and variance"}) is None
    keep = json.loads(json.dumps(audio.frontend("keep-level")))
    assert audio.known_frontend(keep) == audio.FRONTENDS["cmn-keep-level"] != audio.FRONTENDS["cmn"]
    assert [audio.frontend_name(json.loads(json.dumps(r))) for r in audio.FRONTENDS.values()] == list(
        audio.FRONTENDS)
    assert audio.frontend_name(None) == "mfcc" and audio.frontend_name({**rt, "n_mfcc": 13}) is None
    assert audio.frontend("all") == audio.frontend(True)
    with pytest.raises(ValueError, match="unknown cepstral mean normalization"):
        audio.frontend("variance")
    with pytest.raises(ValueError, match="unknown cepstral mean normalization record"):
        audio.finish(np.zeros((49, 10, 1), np.float32), {**rt, "cmn": "per utterance, mean and variance"})


def test_cmn_keep_level_leaves_the_level_to_the_model():
    w = _speechlike()
    plain = audio.mfcc(w)
    keep = audio.features(w, audio.frontend("keep-level"))
    full = audio.features(w, audio.frontend(True))
    np.testing.assert_array_equal(keep[:, 0], plain[:, 0])  # c0, the frame level, as computed
    np.testing.assert_allclose(keep[:, 1:], full[:, 1:], atol=1e-6)  # the others as full CMN
    np.testing.assert_allclose(keep[:, 1:].mean(axis=0), 0.0, atol=1e-5)
    # a gain moves c0 only: full CMN cannot see it, the level-keeping front end can
    loud = audio.features(3 * w, audio.frontend("keep-level"))
    np.testing.assert_allclose(loud[:, 1:], keep[:, 1:], atol=2e-3)
    assert np.abs(loud[:, 0] - keep[:, 0]).mean() > 1.0
    b = audio.cepstral_mean_norm(np.stack([plain, 2 * plain]), keep_level=True)
    np.testing.assert_array_equal(b[0], keep)


# ---- corruptions ---------------------------------------------------------------------------------
def _f(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64) / 32768.0


def _snr(clean: np.ndarray, noisy: np.ndarray) -> float:
    c, n = _f(clean), _f(noisy)
    return float(10 * np.log10(np.sum(c**2) / np.sum((n - c) ** 2)))


def _dominant_hz(x: np.ndarray) -> float:
    spec = np.abs(np.fft.rfft(_f(x) * np.hanning(x.size)))
    return float(np.argmax(spec) * SR / x.size)


def _active_span(x: np.ndarray, thr: float = 0.1) -> int:
    e = np.convolve(_f(x) ** 2, np.ones(160) / 160, mode="same")
    idx = np.nonzero(e > thr * e.max())[0]
    return int(idx[-1] - idx[0])


def _sweep(x: np.ndarray, name: str, seed: int = 0) -> list[np.ndarray]:
    return [ca.corrupt_audio(x, name, s, seed) for s in range(1, 6)]


def _strictly(values, increasing: bool = True) -> bool:
    d = np.diff(values)
    return bool(np.all(d > 0) if increasing else np.all(d < 0))


def test_names_and_severity_table():
    names = ca.audio_corruption_names()
    assert len(names) == 11 and len(set(names)) == 11
    assert all(len(ca.SEVERITIES[n]) == 5 for n in names)


@pytest.mark.parametrize("name", ["gaussian_noise", "pink_noise"])
def test_noise_snr_matches_nominal_and_falls(name):
    x = _speechlike()
    snrs = [_snr(x, y) for y in _sweep(x, name)]
    np.testing.assert_allclose(snrs, ca.SEVERITIES[name], atol=0.3)
    assert _strictly(snrs, increasing=False)


def test_bit_crush_snr_falls():
    x = _speechlike()
    assert _strictly([_snr(x, y) for y in _sweep(x, "bit_crush")], increasing=False)


def test_impulse_noise_fraction_grows():
    x = _speechlike()
    frac = [np.mean(y != x) for y in _sweep(x, "impulse_noise")]
    assert _strictly(frac)
    np.testing.assert_allclose(frac, ca.SEVERITIES["impulse_noise"], rtol=0.2)


def test_gain_rms_follows_decibels():
    x = audio.to_int16(_tone(440.0, 0.8))
    rms = [np.sqrt(np.mean(_f(y) ** 2)) for y in _sweep(x, "gain")]
    assert _strictly(rms, increasing=False)
    ratio = 20 * np.log10(np.array(rms) / np.sqrt(np.mean(_f(x) ** 2)))
    np.testing.assert_allclose(ratio, ca.SEVERITIES["gain"], atol=0.5)


def test_clipping_fraction_grows():
    x = audio.to_int16(_tone(300.0, 0.5))
    frac = [np.mean(np.abs(y.astype(int)) >= np.abs(y.astype(int)).max() - 1) for y in _sweep(x, "clipping")]
    assert _strictly(frac)


def test_band_pass_spectral_spread_falls():
    x = audio.to_int16(0.2 * np.random.default_rng(1).standard_normal(SR))
    freqs = np.fft.rfftfreq(SR, 1 / SR)

    def spread(y):
        p = np.abs(np.fft.rfft(_f(y))) ** 2
        c = np.sum(freqs * p) / np.sum(p)
        return float(np.sqrt(np.sum((freqs - c) ** 2 * p) / np.sum(p)))

    assert _strictly([spread(x)] + [spread(y) for y in _sweep(x, "band_pass")], increasing=False)


def test_reverb_late_energy_grows():
    burst = 0.2 * np.random.default_rng(0).standard_normal(SR)
    burst[:2000] = 0.0
    burst[6000:] = 0.0
    x = audio.to_int16(burst)
    ys = _sweep(x, "reverb")
    late = [np.sum(_f(y)[6500:] ** 2) / np.sum(_f(y) ** 2) for y in ys]
    assert late[0] > 0.001 and _strictly(late)
    corr = [np.corrcoef(_f(y), _f(x))[0, 1] for y in ys]
    assert _strictly(corr, increasing=False)


def test_pitch_shift_frequency_ratio_grows():
    x = audio.to_int16(_tone(440.0, 0.5))
    ratios = [abs(np.log2(_dominant_hz(y) / 440.0) * 12) for y in _sweep(x, "pitch_shift")]
    np.testing.assert_allclose(ratios, ca.SEVERITIES["pitch_shift"], atol=0.35)
    assert _strictly(ratios)
    assert _active_span(_sweep(x, "pitch_shift")[-1]) > 0.9 * SR  # duration kept


def test_time_stretch_duration_ratio_grows_and_pitch_kept():
    x = audio.to_int16(_tone(440.0, 0.5, start=5000, stop=11000))
    ys = _sweep(x, "time_stretch")
    ratios = [abs(np.log(_active_span(y) / _active_span(x))) for y in ys]
    assert _strictly(ratios)
    np.testing.assert_allclose(np.exp(ratios), ca.SEVERITIES["time_stretch"], rtol=0.08)
    assert abs(_dominant_hz(ys[2]) - 440.0) < 10.0


def test_time_mask_zeroed_fraction_grows():
    x = _speechlike()
    frac = [np.mean(y == 0) for y in _sweep(x, "time_mask")]
    assert _strictly(frac)


def test_corruptions_deterministic_and_batch_consistent():
    xs = np.stack([_speechlike(0), _speechlike(1)])
    for name in ca.audio_corruption_names():
        a = ca.corrupt_audio(xs, name, 3, seed=7)
        assert a.dtype == np.int16 and a.shape == xs.shape
        np.testing.assert_array_equal(a, ca.corrupt_audio(xs, name, 3, seed=7))
        np.testing.assert_array_equal(a[0], ca.corrupt_audio(xs[0], name, 3, seed=7))
        assert not np.array_equal(a, xs), name
    for name in ("gaussian_noise", "pink_noise", "impulse_noise", "reverb", "time_mask"):
        assert not np.array_equal(ca.corrupt_audio(xs, name, 3, 1), ca.corrupt_audio(xs, name, 3, 2)), name
    np.testing.assert_array_equal(ca.corrupt_audio(xs, "reverb", 0, 1), xs)


def test_corruption_bad_arguments():
    x = _speechlike()
    with pytest.raises(SnapuqError, match="unknown audio corruption"):
        ca.corrupt_audio(x, "fog", 1)
    with pytest.raises(SnapuqError, match="severity"):
        ca.corrupt_audio(x, "gain", 6)
    with pytest.raises(SnapuqError, match="shape"):
        ca.corrupt_audio(x[None, None], "gain", 1)


def test_corrupted_features_on_dataset(tmp_path):
    waves = np.stack([_speechlike(i) for i in range(4)])
    np.save(tmp_path / "w.npy", waves)
    x = audio.mfcc(waves)
    ds = Dataset("toy", x, np.zeros(4, int), x, np.zeros(4, int), x, np.zeros(4, int), ["a"],
                 meta={"waves": {"test": str(tmp_path / "w.npy")}})  # fmt: skip
    np.testing.assert_array_equal(ca.corrupted_features(ds, "gain", 0), ds.x_test)
    full = ca.corrupted_features(ds, "gaussian_noise", 4, seed=3)
    assert full.shape == ds.x_test.shape and np.abs(full - ds.x_test).mean() > 1.0
    sub = ca.corrupted_features(ds, "gaussian_noise", 4, seed=3, idx=np.array([2, 3]))
    np.testing.assert_array_equal(sub, full[2:])
    with pytest.raises(DatasetError, match="no raw waves"):
        ca.corrupted_features(ds, "gain", 1, split="dev")
    # a set with cepstral mean normalization in its front end gets it on the corrupted clips too
    fe = audio.frontend(cmn=True)
    xc = audio.cepstral_mean_norm(x)
    cm = Dataset("toy", xc, np.zeros(4, int), xc, np.zeros(4, int), xc, np.zeros(4, int), ["a"],
                 meta={"waves": {"test": str(tmp_path / "w.npy")}, "frontend": fe})  # fmt: skip
    np.testing.assert_array_equal(ca.corrupted_features(cm, "gain", 0), xc)
    np.testing.assert_allclose(ca.corrupted_features(cm, "gaussian_noise", 4, seed=3),
                               audio.cepstral_mean_norm(full), atol=1e-5)  # fmt: skip
    bad = Dataset("toy", x, np.zeros(4, int), x, np.zeros(4, int), x[:3], np.zeros(3, int), ["a"],
                  meta={"waves": {"test": str(tmp_path / "w.npy")}})  # fmt: skip
    with pytest.raises(DatasetError, match="shape"):
        ca.split_waves(bad)
