"""Uncert: Dirichlet uncertainty, importance, token reduction, SOP counting, integer spec."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snapuq.errors import SnapuqError
from snapuq.tokens import fixed
from snapuq.tokens.reduce import (
    criterion_scores,
    gather,
    keep_count,
    keep_mask,
    make_reducer,
    merge,
    prune,
    topk_indices,
)
from snapuq.tokens.sops import attention_sops, block_sops, dense_sops
from snapuq.tokens.uncertainty import dirichlet_uncertainty, importance, softplus, trajectory


def test_dirichlet_uncertainty_hand_cases():
    # logits 0: evidence ln 2 per class, alpha = 1 + ln 2, U = C / (C (1 + ln 2))
    assert dirichlet_uncertainty(np.zeros(2)) == pytest.approx(1.0 / (1.0 + math.log(2.0)), abs=1e-12)
    assert dirichlet_uncertainty(np.zeros(10)) == pytest.approx(1.0 / (1.0 + math.log(2.0)), abs=1e-12)
    # [10, -10]: e = (10 + log1p(e^-10), log1p(e^-10)), sum alpha = 12 + 2 log1p(e^-10)
    u = dirichlet_uncertainty(np.array([10.0, -10.0]))
    assert u == pytest.approx(2.0 / (12.0 + 2.0 * math.log1p(math.exp(-10.0))), rel=1e-12)
    # no evidence at all -> U -> 1; lots of evidence -> U -> 0
    assert dirichlet_uncertainty(np.full(3, -50.0)) == pytest.approx(1.0, abs=1e-12)
    assert dirichlet_uncertainty(np.array([1000.0, 0.0, 0.0])) < 0.004
    np.testing.assert_allclose(softplus(np.array([-800.0, 0.0, 800.0])), [0.0, math.log(2.0), 800.0])
    with pytest.raises(SnapuqError):
        dirichlet_uncertainty(np.zeros(1))
    with pytest.raises(SnapuqError):
        trajectory(np.zeros((2, 3, 4)))


def _logits_for_u(u: np.ndarray, c: int = 4) -> np.ndarray:
    """Logits (equal over classes) that give exactly the Dirichlet uncertainty u."""
    # U = C / (C (softplus(l) + 1)) -> softplus(l) = 1/U - 1 -> l = log(expm1(1/U - 1))
    e = 1.0 / np.asarray(u, np.float64) - 1.0
    return np.repeat(np.log(np.expm1(e))[..., None], c, axis=-1)


def test_importance_is_mean_plus_lambda_std_and_orders_tokens():
    # tokens: stable-confident, stable-ambiguous, fluctuating; trajectories over T = 4
    traj = np.array([[0.2, 0.2, 0.2, 0.2], [0.6, 0.6, 0.6, 0.6], [0.1, 0.7, 0.1, 0.7]]).T  # (T, N)
    lg = _logits_for_u(traj)[None]  # (1, T, N, C)
    np.testing.assert_allclose(trajectory(lg)[0], traj, rtol=1e-9)
    s = importance(lg, lam=0.9)[0]
    np.testing.assert_allclose(s, [0.2, 0.6, 0.4 + 0.9 * 0.3], rtol=1e-9)
    assert list(topk_indices(s[None], 3)[0]) == [2, 1, 0]
    np.testing.assert_allclose(importance(lg, lam=0.0)[0], [0.2, 0.6, 0.4], rtol=1e-9)  # mean only
    np.testing.assert_allclose(importance(lg, lam=1.0, w_mean=0.0)[0], [0.0, 0.0, 0.3], atol=1e-9)


def test_topk_ties_and_keep_count():
    s = np.array([[1.0, 3.0, 3.0, 0.5, 3.0]])
    assert topk_indices(s, 2).tolist() == [[1, 2]]
    assert topk_indices(s, 4).tolist() == [[1, 2, 4, 0]]
    assert [keep_count(16, r) for r in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4)] == [16, 15, 13, 12, 10, 8, 7]
    assert keep_count(3, 0.01) == 1
    with pytest.raises(SnapuqError):
        keep_count(16, 0.0)
    with pytest.raises(SnapuqError):
        topk_indices(s, 6)


def test_prune_and_merge_preserve_shapes_and_kept_tokens():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3, 4, 6, 5)).astype(np.float32)
    idx = np.array([[0, 2, 5], [1, 3, 4], [5, 4, 0]])
    zp, m = prune(z, idx)
    assert zp.shape == z.shape and m.shape == (3, 6) and (m.sum(1) == 3).all()
    for b in range(3):
        for i in range(6):
            if i in idx[b]:
                np.testing.assert_array_equal(zp[b, :, i], z[b, :, i])
            else:
                assert not zp[b, :, i].any()
    assert gather(z, idx).shape == (3, 4, 3, 5)
    np.testing.assert_array_equal(gather(z, idx)[1, :, 0], z[1, :, 1])

    # merge: token 1 is a copy of kept token 0 (+ tiny noise) and must merge into it
    z2 = rng.normal(size=(1, 2, 4, 8)).astype(np.float32)
    z2[0, :, 1] = z2[0, :, 0] + 1e-3
    zm, mm = merge(z2, np.array([[0, 2, 3]]))
    assert zm.shape == z2.shape and mm.tolist() == [[1, 0, 1, 1]]
    np.testing.assert_allclose(zm[0, :, 0], (z2[0, :, 0] + z2[0, :, 1]) / 2, rtol=1e-6)
    assert not zm[0, :, 1].any()
    # every dropped token lands in exactly one anchor: count-weighted sums are conserved
    zr = rng.normal(size=(2, 3, 7, 4)).astype(np.float32)
    idx = np.array([[0, 1, 2], [6, 5, 3]])
    zm, mm = merge(zr, idx)
    cos = _cos(zr.mean(1))
    for b in range(2):
        kept = list(idx[b])
        anchor = {i: (i if i in kept else kept[int(np.argmax(cos[b, i, kept]))]) for i in range(7)}
        for a in kept:
            members = [i for i in range(7) if anchor[i] == a]
            np.testing.assert_allclose(zm[b, :, a], zr[b][:, members].mean(axis=1), rtol=1e-5, atol=1e-6)
            if members == [a]:
                np.testing.assert_array_equal(zm[b, :, a], zr[b, :, a])


def _cos(f):
    g = f / np.linalg.norm(f, axis=-1, keepdims=True)
    return g @ np.swapaxes(g, 1, 2)


def test_sop_counter_on_hand_built_spikes():
    s = np.zeros((2, 2, 3, 4), np.float32)  # (B, T, N, D)
    s[0, 0, 0, :2] = 1  # 2 spikes
    s[0, 1, 2, 3] = 1  # 1 spike
    assert dense_sops(s, 10).tolist() == [30, 0]
    # attention, 2 heads of width 2: token (t0, n0) has k spikes (1 in head 0, 2 in head 1), v spikes
    # (2 in head 0, 1 in head 1) -> K^T V = 1*2 + 2*1 = 4; q has 3 spikes -> 3 * d_h = 6
    q = np.zeros((1, 1, 2, 4), np.float32)
    k = np.zeros_like(q)
    v = np.zeros_like(q)
    k[0, 0, 0] = [1, 0, 1, 1]
    v[0, 0, 0] = [1, 1, 0, 1]
    q[0, 0, 1] = [1, 1, 1, 0]
    assert attention_sops(q, k, v, heads=2).tolist() == [4 + 6]
    assert attention_sops(q, k, v, heads=1).tolist() == [3 * 3 + 3 * 4]
    rec = {"s": s[:1], "q": s[:1], "k": s[:1], "v": s[:1], "a": s[:1], "s2": s[:1], "h": s[:1]}
    # D=4, 2 heads: qkv 3*4*3 = 36; attn: kv pairs (t0 n0 head0: 2*2=4) + (t1 n2 head1: 1*1=1) = 5,
    # q 3 spikes * 2 = 6; proj 3*4 = 12; fc1 3*8 = 24; fc2 3*4 = 12
    assert block_sops(rec, dim=4, heads=2, mlp_ratio=2).tolist() == [36 + 11 + 12 + 24 + 12]
    with pytest.raises(SnapuqError):
        dense_sops(s * 0.5 + 0.25, 3)


def test_fixed_point_tracks_float_importance():
    rng = np.random.default_rng(3)
    lg = rng.normal(0.0, 2.5, size=(4, 16, 10))
    q, sc, zp = fixed.quantize_logits(lg)
    deq = (q.astype(np.float64) - zp) * (sc / 65536.0)
    ref = importance(deq[None], lam=0.9)[0]
    got = fixed.importance_int(q, sc, zp) / 65536.0
    np.testing.assert_allclose(got, ref, atol=2e-3)
    # softplus table: linear interpolation error below 2e-3 over the whole range
    for x in np.linspace(-20, 20, 401):
        assert fixed.softplus_q16(int(round(x * 65536))) / 65536.0 == pytest.approx(
            float(softplus(np.array(x))), abs=2e-3)
    with pytest.raises(SnapuqError):
        fixed.evidence_lut(0, 0)
    with pytest.raises(SnapuqError):
        fixed.importance_int(q.astype(np.int16), sc, zp)


def test_masked_block_equals_physical_removal():
    from snapuq.tokens.model import TokenSNNConfig, build_layers

    cfg = TokenSNNConfig(input_shape=(8, 8, 1), n_classes=10, dim=16, depth=1, heads=2, T=3)
    model = build_layers(cfg)
    model(np.zeros((1, 8, 8, 1), np.float32))
    rng = np.random.default_rng(0)
    z = rng.normal(0.0, 2.0, size=(2, 3, 16, 16)).astype(np.float32)
    idx = np.array([[3, 0, 7, 9, 15], [1, 2, 4, 8, 10]])
    zp, m = prune(z, idx)
    blk = model.blocks[0]
    out_masked = np.asarray(blk(zp, keep=m))
    out_small = np.asarray(blk(gather(z, idx)))
    np.testing.assert_allclose(gather(out_masked, idx), out_small, rtol=1e-5, atol=1e-5)
    # the reducers and the criteria all produce (B, N) scores / K kept tokens
    for c in ("uncert", "uncert_mean", "uncert_std", "random", "magnitude", "spikes", "similarity"):
        sc = criterion_scores(c, z, model)
        assert sc.shape == (2, 16) and np.isfinite(sc).all()
        for mode in ("prune", "merge"):
            zn, mn = make_reducer(c, mode, 0.8)(z, model)
            assert zn.shape == z.shape and (mn.sum(1) == 13).all()
    with pytest.raises(SnapuqError):
        criterion_scores("nope", z, model)
    with pytest.raises(SnapuqError):
        make_reducer("uncert", "squash", 0.5)
    assert keep_mask(idx, 16).sum() == 10
