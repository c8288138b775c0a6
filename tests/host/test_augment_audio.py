"""The microphone augmentations of the keywords12 set (snapuq.data.augment_audio): measured properties."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from snapuq.data import audio, tts
from snapuq.data import augment_audio as A


def _psd_slope(x: np.ndarray) -> float:
    f = np.fft.rfftfreq(len(x), 1 / A.SR)[1:]
    p = np.abs(np.fft.rfft(x))[1:] ** 2
    sel = (f > 100) & (f < 6000)
    return float(np.polyfit(np.log(f[sel]), np.log(p[sel] + 1e-30), 1)[0])


@pytest.mark.parametrize("kind,slope", [("white", 0.0), ("pink", -1.0), ("brown", -2.0), ("blue", 1.0)])
def test_noise_colours_have_their_spectral_slope(kind, slope):
    x = A.coloured_noise(kind, 16000, np.random.default_rng(0))
    assert abs(np.sqrt(np.mean(x**2)) - 1.0) < 1e-6
    assert abs(_psd_slope(x) - slope) < 0.25


def test_room_impulse_decays_by_rt60():
    rng = np.random.default_rng(1)
    h = A.room_impulse(rng, 0.5)
    assert len(h) == int(0.5 * A.SR) and np.argmax(np.abs(h)) < 20  # the direct path first
    e = h[200:] ** 2
    early, late = e[: len(e) // 4].sum(), e[-len(e) // 4 :].sum()
    assert late < early * 1e-3  # about -60 dB over the response


def test_mic_snr_and_placement():
    rng = np.random.default_rng(2)
    t = np.arange(8000) / A.SR
    word = np.sin(2 * np.pi * 300 * t) * np.hanning(8000)
    prof = A.MicProfile(speed=(1, 1), p_reverb=0, p_band=0, p_noise=1.0, snr_db=(10.0, 10.0), p_clip=0)
    clip = A.mic(word, prof, np.random.default_rng(3), [])
    clean = A.mic(word, A.MicProfile(speed=(1, 1), p_reverb=0, p_band=0, p_noise=0, p_clip=0),
                  np.random.default_rng(3), [])  # fmt: skip
    assert clip.shape == (A.N,)
    noise = clip - clean
    active = np.abs(clean) > 0.02 * np.abs(clean).max()
    snr = 10 * np.log10(np.mean(clean[active] ** 2) / np.mean(noise**2))
    assert abs(snr - 10.0) < 1.0
    s = A.silence(rng, [], A.PROFILES["train"])
    assert s.shape == (A.N,) and -81 < 20 * np.log10(np.sqrt(np.mean(s**2))) < -11


def test_spec_augment_masks_runs_with_the_mean():
    x = np.random.default_rng(4).standard_normal((8, 49, 10, 1)).astype(np.float32)
    y = A.spec_augment(x, np.random.default_rng(5), time_masks=1, max_t=8, freq_masks=1, max_f=2)
    assert y.shape == x.shape and not np.shares_memory(x, y)
    changed = (y != x).any(axis=(2, 3)).sum(1)  # frames changed per example
    assert changed.max() <= 49 and (y[:, :, 0] == x[:, :, 0]).mean() > 0.7  # energy coefficient mostly kept
    assert (y != x).any()


def test_envelope_warp_moves_formants_and_keeps_the_rest():
    d = audio.dct_matrix()
    np.testing.assert_allclose(A.envelope_warp_matrix(1.0), np.eye(audio.N_MFCC), atol=1e-9)
    # a formant-like bump on the log-mel axis: warped up by alpha > 1, down by alpha < 1
    bump = 5.0 * np.exp(-0.5 * ((np.arange(audio.N_MEL) - 15) / 2.0) ** 2)
    c = bump @ d
    peak = {a: int(np.argmax(c @ A.envelope_warp_matrix(a) @ np.linalg.pinv(d))) for a in (0.85, 1.0, 1.15)}
    assert peak[0.85] < peak[1.0] == 15 < peak[1.15]
    # the bump's centre frequency scales by alpha (to within one band)
    hz = 700.0 * np.expm1(np.linspace(audio._hz_to_mel(20.0), audio._hz_to_mel(4000.0), 42)[1:-1] / 1127.0)
    assert abs(hz[peak[1.15]] / hz[15] - 1.15) < 0.08
    # batches: one draw per example, linear so it commutes with cepstral mean normalization
    x = np.random.default_rng(4).standard_normal((16, 49, 10, 1)).astype(np.float32)
    y = A.envelope_warp(x, np.random.default_rng(5))
    assert y.shape == x.shape and y.dtype == np.float32 and not np.allclose(y, x)
    np.testing.assert_array_equal(y, A.envelope_warp(x, np.random.default_rng(5)))
    np.testing.assert_allclose(audio.cepstral_mean_norm(y), A.envelope_warp(audio.cepstral_mean_norm(x),
                               np.random.default_rng(5)), atol=1e-4)  # fmt: skip
    with pytest.raises(ValueError, match="envelope warp"):
        A.envelope_warp(x[..., :8, :], np.random.default_rng(0))
    # the training recipe's "warp" augmentation; other inputs pass through
    from snapuq.nn.recipe import augment_batch
    from snapuq.options import TrainOptions

    assert TrainOptions(augment="warp").augment == "warp"
    np.testing.assert_array_equal(augment_batch(x, "warp", np.random.default_rng(5)), y)
    flat = np.ones((4, 12), np.float32)
    assert augment_batch(flat, "warp", np.random.default_rng(0)) is flat


def test_voice_inventory_names_engines_and_speakers():
    av = tts.available_voices()
    assert len(av["espeak"]) >= 8 * 32 and all(v.startswith("espeak:en") for v in av["espeak"])
    assert tts.group_of("flite:kal16") == tts.group_of("festival:kal_diphone") == "ext:kal"
    assert tts.group_of("festival:cmu_us_slt_arctic_hts") == "ext:slt"
    for v in av["flite"]:  # whatever flite is installed speaks
        w = tts.synth_flite("yes", v.split(":")[1], 1.0, None)
        assert len(w) > 1600 and np.abs(w).max() > 0.05


def _keywords_noise_before_the_merge(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """The `keywords` set's own generator before it became augment_audio.coloured_noise (the reference)."""
    if kind == "hum":
        t = np.arange(n) / A.SR
        f0 = rng.choice([50.0, 60.0])
        x = sum(np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 2 * np.pi)) / h for h in (1, 2, 3, 5))
        x = x + 0.1 * rng.standard_normal(n)
    else:
        white = rng.standard_normal(n)
        x = white
        if kind != "white":
            spec = np.fft.rfft(white)
            f = np.fft.rfftfreq(n, 1.0 / A.SR)
            f[0] = f[1]
            x = np.fft.irfft(spec / (np.sqrt(f) if kind == "pink" else f), n)
    x = np.asarray(x, dtype=np.float64)
    return x / (np.sqrt(np.mean(x**2)) + 1e-12)


@pytest.mark.parametrize("kind", ["white", "pink", "brown", "hum"])
def test_one_noise_generator_renders_the_keywords_set_as_before(kind):
    """keywords.render_clip draws its noise from coloured_noise ("hum" as "hum_plain"): the int16 clips are
    the ones its own generator made, and the random generator is left where it was."""
    from snapuq.data import audio

    for i in range(40):
        r_old, r_new, base = (np.random.default_rng([i, 5]) for _ in range(3))
        clip = base.standard_normal(16000) * 0.05
        a = _keywords_noise_before_the_merge(kind, 16000, r_old)
        b = A.coloured_noise("hum_plain" if kind == "hum" else kind, 16000, r_new)
        assert np.max(np.abs(a - b)) < 1e-12 and r_old.random() == r_new.random()
        for k in (0.01, 0.1, 0.5):
            assert np.array_equal(audio.to_int16(clip + k * a), audio.to_int16(clip + k * b))
    with pytest.raises(ValueError, match="unknown noise kind"):
        A.coloured_noise("purple", 100, np.random.default_rng(0))


def test_peaking_filter_boosts_its_band_and_leaves_the_rest():
    from scipy.signal import sosfreqz

    f, h = sosfreqz(A._peaking(1000.0, 9.0, 2.0)[None, :], worN=[100.0, 1000.0, 5000.0], fs=A.SR)
    db = 20 * np.log10(np.abs(h))
    assert abs(db[1] - 9.0) < 0.05 and abs(db[0]) < 0.5 and abs(db[2]) < 0.5


def test_timbre_colours_a_word_keeps_its_peak_and_only_train_eq_uses_it():
    """A random timbre changes the word's spectral envelope (by several dB in some band), not its peak
    level; it draws from the rng only in profiles that ask for it: "train", "shift", "clean" keep their clips.
    """
    w = np.random.default_rng(4).standard_normal(8000) * 0.1
    y = A.timbre(w, np.random.default_rng(5), 9.0)
    assert abs(np.abs(y).max() - np.abs(w).max()) < 1e-12 and np.isfinite(y).all()
    f = np.fft.rfftfreq(len(w), 1 / A.SR)
    yw = [np.abs(np.fft.rfft(v)) for v in (y, w)]
    bands = [(f >= lo) & (f < hi) for lo, hi in ((100, 300), (300, 1000), (1000, 3000), (3000, 8000))]
    db = [20 * np.log10(yw[0][b].mean() / yw[1][b].mean()) for b in bands]
    assert max(db) - min(db) > 6.0
    assert np.array_equal(y, A.timbre(w, np.random.default_rng(5), 9.0))  # deterministic by its rng
    assert A.PROFILES["train_eq"].p_eq > 0
    assert all(A.PROFILES[p].p_eq == 0 for p in ("clean", "train", "shift"))
    assert list(A.PROFILES)[:3] == ["clean", "train", "shift"]  # the rng key of a clip uses this order


def test_environmental_noises_have_their_kinds_properties():
    """The everyday backgrounds (ENV_KINDS): unit RMS, reproducible from the generator, and each with the
    property that names it: clatter is impulsive, water lies in 300 Hz-6 kHz, a machine has a low drone
    line, an animal call a voiced pitch within 250 Hz-2.5 kHz."""
    from scipy.stats import kurtosis

    f = np.fft.rfftfreq(A.N, 1 / A.SR)
    for s in range(4):
        x = {k: A.environmental_noise(k, A.N, np.random.default_rng(s)) for k in A.ENV_KINDS}
        for k, v in x.items():
            assert v.shape == (A.N,) and np.isfinite(v).all(), k
            np.testing.assert_allclose(np.sqrt(np.mean(v**2)), 1.0, rtol=1e-6)
            np.testing.assert_array_equal(v, A.environmental_noise(k, A.N, np.random.default_rng(s)))
            assert not np.array_equal(v, A.environmental_noise(k, A.N, np.random.default_rng(s + 10)))
        assert kurtosis(x["clatter"]) > 3.0  # Gaussian noise: 0
        assert kurtosis(x["water"]) < 3.0
        p = np.abs(np.fft.rfft(x["water"])) ** 2
        assert p[(f >= 300) & (f <= 6000)].sum() > 0.9 * p.sum()
        p = np.abs(np.fft.rfft(x["machine"])) ** 2
        assert p[(f >= 15) & (f <= 85)].max() > 100 * np.median(p[(f >= 15) & (f <= 400)])
        frames = x["animal"].reshape(-1, 1600)
        loud = frames[np.argmax((frames**2).sum(1))]
        pa = np.abs(np.fft.rfft(loud * np.hanning(1600))) ** 2
        assert 250 <= np.fft.rfftfreq(1600, 1 / A.SR)[pa.argmax()] <= 2500
    with pytest.raises(ValueError, match="unknown environmental noise kind 'traffic'"):
        A.environmental_noise("traffic", A.N, np.random.default_rng(0))


def test_silence_can_draw_everyday_backgrounds_and_keeps_its_default_draws():
    pool = [np.sin(np.arange(8000) / 7.0)]
    for s in range(5):
        a = A.silence(np.random.default_rng(s), pool, A.PROFILES["train"])
        b = A.silence(np.random.default_rng(s), pool, A.PROFILES["train"], kinds=A.NOISE_KINDS)
        np.testing.assert_array_equal(a, b)
    env = [A.silence(np.random.default_rng(s), [], A.PROFILES["train"], kinds=A.ENV_KINDS) for s in range(5)]
    for e in env:
        assert e.shape == (A.N,) and np.isfinite(e).all()
        assert -81.0 <= 20 * np.log10(np.sqrt(np.mean(e**2))) <= -11.0



def test_a_profile_env_share_puts_everyday_sounds_behind_words_and_in_silence(monkeypatch):
    """env_share: the share of background draws (behind a word, each part of a `_silence_` clip) that are
    ENV_KINDS: 0 never (the set's profiles), 1 always, train_env about its share; the clip stays a clip."""
    seen: list[str] = []
    real = A.noise_of

    def noise_of(kind, n, rng, pool):
        seen.append(kind)
        return real(kind, n, rng, pool)

    monkeypatch.setattr(A, "noise_of", noise_of)
    word = np.sin(2 * np.pi * 300 * np.arange(8000) / A.SR) * np.hanning(8000)
    pool = [word]

    def kinds(prof: A.MicProfile, n: int = 40) -> list[str]:
        seen.clear()
        for s in range(n):
            x = A.mic(word, prof, np.random.default_rng(s), pool)
            y = A.silence(np.random.default_rng(s), pool, prof)
            assert x.shape == y.shape == (A.N,) and np.isfinite(x).all() and np.isfinite(y).all()
        return list(seen)

    always = replace(A.PROFILES["train"], p_noise=1.0)
    assert A.PROFILES["train"].env_share == A.PROFILES["shift"].env_share == 0.0
    assert not set(kinds(always)) & set(A.ENV_KINDS)
    assert set(kinds(replace(always, env_share=1.0))) == set(A.ENV_KINDS)
    for name in ("train_env", "train_env_light"):
        got = kinds(replace(A.PROFILES[name], p_noise=1.0), 200)
        share = np.mean([k in A.ENV_KINDS for k in got])
        assert abs(share - A.PROFILES[name].env_share) < 0.08, (name, share)
