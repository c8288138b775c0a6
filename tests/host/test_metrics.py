"""Every metric against a case computed by hand (and the ranking metrics against scikit-learn)."""

import math

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from snapuq.errors import SnapuqError
from snapuq.uq import metrics as M


def test_auroc_hand():
    # positives {0.35, 0.8} vs negatives {0.1, 0.4}: 3 of 4 pairs ordered correctly
    assert M.auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    # a tie counts 1/2: pos 1 vs neg {1, 0} -> (0.5 + 1) / 2
    assert M.auroc([1, 1, 0], [1, 0, 0]) == pytest.approx(0.75)
    assert M.auroc([3, 2, 1], [1, 1, 0]) == 1.0
    assert M.auroc([1, 2, 3], [1, 1, 0]) == 0.0
    assert math.isnan(M.auroc([1, 2], [1, 1]))


def test_aupr_hand():
    # ranks: + - + -  -> P@R: 1 @ 0.5, 2/3 @ 1.0 -> AP = 0.5*1 + 0.5*2/3
    assert M.aupr([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx(0.5 + 1 / 3)
    # tied top group: one threshold, precision 1/2 at recall 1
    assert M.aupr([1, 1, 0], [1, 0, 0]) == pytest.approx(0.5)
    assert math.isnan(M.aupr([1, 2], [0, 0]))


def test_ranking_metrics_match_sklearn():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 6, 300).astype(float)  # many ties
    y = rng.random(300) < 0.3 + 0.1 * s
    assert M.auroc(s, y) == pytest.approx(roc_auc_score(y, s))
    assert M.aupr(s, y) == pytest.approx(average_precision_score(y, s))
    fpr, tpr = M.roc_curve(s, y)
    assert fpr[0] == 0 and tpr[-1] == 1 and np.all(np.diff(fpr) >= 0)
    assert np.trapezoid(tpr, fpr) == pytest.approx(M.auroc(s, y))


def test_risk_coverage_hand():
    u, ok = [0.1, 0.2, 0.3, 0.4], [1, 0, 1, 0]
    cov, risk = M.risk_coverage(u, ok)
    np.testing.assert_allclose(cov, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0, 0.5, 1 / 3, 0.5])
    assert M.aurc(u, ok) == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)
    assert M.risk_at_coverage(u, ok, 0.5) == pytest.approx(0.5)
    assert M.risk_at_coverage(u, ok, 0.75) == pytest.approx(1 / 3)
    assert M.risk_at_coverage(u, ok, 0.6) == pytest.approx(1 / 3)  # ceil(2.4) = 3 kept
    # ties resolved by expectation: the tied pair holds one error -> 0.5 expected at k=1 and k=2
    np.testing.assert_allclose(M.risk_coverage([0, 0, 1], [1, 0, 1])[1], [0.5, 0.5, 1 / 3])
    # order of the input does not matter
    assert M.aurc([0, 0, 1], [0, 1, 1]) == pytest.approx(M.aurc([0, 0, 1], [1, 0, 1]))
    with pytest.raises(SnapuqError):
        M.risk_at_coverage(u, ok, 0.0)


def test_ece_hand():
    # bin (14/15, 1]: acc 0.5 conf 0.95; bin (8/15, 9/15]: acc 1 conf 0.55 -> 0.5*0.45 + 0.5*0.45
    assert M.ece([0.95, 0.95, 0.55, 0.55], [1, 0, 1, 1]) == pytest.approx(0.45)
    assert M.ece([1.0, 1.0], [1, 1]) == pytest.approx(0.0)
    assert M.ece([0.0, 0.0], [1, 0]) == pytest.approx(0.5)  # 0 falls in the first bin
    # the bin count matters: one bin pools 0.2 and 0.8
    assert M.ece([0.2, 0.8], [0, 1], n_bins=1) == pytest.approx(0.0)
    assert M.ece([0.2, 0.8], [0, 1], n_bins=15) == pytest.approx(0.2)
    with pytest.raises(SnapuqError):
        M.ece([1.5], [1])


def test_sliding_and_events_hand():
    np.testing.assert_allclose(M.sliding_mean([1, 0, 1, 1], 2), [0.5, 0.5, 1.0])
    mu, sd, thr = M.event_threshold([1, 1, 0, 1, 1, 0], window=3)
    assert (mu, sd, thr) == pytest.approx((2 / 3, 0.0, 1 / 3))  # sigma 0: one more error per window
    mu, sd, thr = M.event_threshold([1, 1, 0, 0], window=2)  # windows 1, .5, 0
    assert (mu, sd) == pytest.approx((0.5, math.sqrt(1 / 6)))
    assert thr == pytest.approx(0.5 - 3 * math.sqrt(1 / 6))
    ev = M.mark_events([1, 1, 1, 0, 0, 1], 0.5, window=2)  # windows end t=1..5: 1 1 .5 0 .5
    assert ev.tolist() == [False, False, False, True, True, True]
    np.testing.assert_allclose(M.windowed_alarm([1, 2, 3, 4], 2), [1, 1.5, 2.5, 3.5])
    assert M.event_runs([0, 1, 1, 0, 1]) == [(1, 3), (4, 5)]
    with pytest.raises(SnapuqError):
        M.sliding_mean([1, 2], 3)


def test_detection_delay_hand():
    ev = [0, 0, 0, 0, 1, 1, 0, 0]
    seg = [(2, 6)]
    early = [0, 0, 0, 0.9, 0.9, 0, 0, 0]  # alarm at 3, onset at 4 -> 0
    late = [0, 0, 0, 0, 0, 0.9, 0, 0]  # alarm at 5 -> 1
    never = [0.9, 0, 0, 0, 0, 0, 0, 0.9]  # alarms only outside the segment -> 6 - 4
    assert M.detection_delays(early, ev, 0.5, seg) == [0.0]
    assert M.detection_delays(late, ev, 0.5, seg) == [1.0]
    assert M.detection_delays(never, ev, 0.5, seg) == [2.0]
    # events outside every shifted segment give no delay
    assert M.detection_delays(late, [1, 0, 0, 0, 0, 0, 0, 0], 0.5, seg) == []
