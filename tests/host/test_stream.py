"""CID stream construction, events and monitoring on synthetic streams."""

import numpy as np
import pytest

from snapuq.errors import SnapuqError
from snapuq.uq import stream as S


def _corrupt(x, idx, name, severity, seed):
    return x + {"a": 10.0, "b": 20.0}[name] * severity


def test_stream_layout_and_gather():
    pool = np.arange(50, dtype=np.float32).reshape(50, 1)
    y = np.arange(50) % 3
    st = S.build_stream(pool, y, ["a", "b"], _corrupt, severity=1, seg_len=120, clean_len=100, seed=3)
    assert len(st) == 100 + 120 + 100 + 120 + 100
    assert [s[2] for s in st.segments] == ["clean", "a", "clean", "b", "clean"]
    assert st.shifted_segments == [(100, 220), (320, 440)]
    assert st.shifted.sum() == 240 and st.x_corrupt.shape == (240, 1)
    frames = st.gather(pool, st.x_corrupt)
    # clean frames are pool values, corrupted ones are pool values + 10 (a) or + 20 (b)
    assert np.all(frames[:100] < 50)
    assert np.all((frames[100:220] >= 10) & (frames[100:220] < 60))
    assert np.all(frames[320:440] >= 20)
    # labels follow the frames
    np.testing.assert_array_equal(st.y[:100], y[frames[:100, 0].astype(int)])
    # deterministic by seed
    st2 = S.build_stream(pool, y, ["a", "b"], _corrupt, severity=1, seg_len=120, clean_len=100, seed=3)
    np.testing.assert_array_equal(st.src, st2.src)
    with pytest.raises(SnapuqError):
        S.build_stream(pool, y, ["a"], _corrupt, clean_len=50)


def test_events_and_monitor_separate_a_good_from_a_blind_detector():
    rng = np.random.default_rng(0)
    pool = np.zeros((200, 1), np.float32)
    y = np.zeros(200, int)
    st = S.build_stream(pool, y, ["a", "b"], _corrupt, seg_len=300, clean_len=300, seed=0)
    # base classifier: 97% right on clean frames, 50% on corrupted ones
    correct = np.where(st.shifted, rng.random(len(st)) < 0.5, rng.random(len(st)) < 0.97)
    clean_correct = rng.random(3000) < 0.97
    spec = S.stream_events(correct, clean_correct)
    assert 0.9 < spec.mu < 1.0 and spec.threshold < spec.mu
    assert spec.events[~st.shifted][:300].sum() < 20  # few chance events in the first clean segment
    assert spec.events[st.shifted].mean() > 0.6  # most corrupted frames are events
    good_u = np.where(st.shifted, 1.0, 0.0) + 0.1 * rng.random(len(st))
    blind_u = rng.random(len(st))
    clean_u_good = 0.1 * rng.random(3000)
    good = S.monitor(good_u, clean_u_good, spec, st)
    blind = S.monitor(blind_u, rng.random(3000), spec, st)
    assert good["cid_auprc"] > 0.8 > blind["cid_auprc"]
    assert good["n_event_segments"] == 2
    assert good["cid_delay"] < blind["cid_delay"]
    assert good["cid_delay"] <= 30


def test_resampled_clean_false_alarm():
    """The clean-segment false-alarm rate averaged over draws: 0 when every clean test score sits below
    every dev score, about the rate of a shifted-up test pool otherwise, deterministic, and it matches
    `monitor`'s definition (full windows inside clean segments, tau = mean + 3 sd of the dev windows)."""
    rng = np.random.default_rng(1)
    u_dev = rng.random(300)
    kw = {"n_segments": 4, "seg_len": 300, "dev_len": 2000}
    assert S.resampled_clean_false_alarm(u_dev * 0.1, u_dev, **kw) == 0.0
    hi = S.resampled_clean_false_alarm(u_dev + 1.0, u_dev, **kw)
    assert hi == 1.0
    pool = np.r_[u_dev, np.full(30, 5.0)]
    mid = S.resampled_clean_false_alarm(pool, u_dev, **kw)
    assert 0.0 < mid < 1.0 and mid == S.resampled_clean_false_alarm(pool, u_dev, **kw)
    assert np.isnan(S.resampled_clean_false_alarm(u_dev, u_dev[:0], **kw))
