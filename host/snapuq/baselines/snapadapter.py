"""The bridge from eval to snapuq.uq.score: build the SNAP scorer for the variant calib.json selects, or for
another variant calib.json carries (the paper's literal recipe for the ablation)."""

from __future__ import annotations

from snapuq.uq.score import SnapScorer


def make_scorer(calib: dict, variant: str | None = None):
    """Return (scorer with .score(outs) -> {"S", "U", ...}, variant name)."""

    if variant is None:
        return SnapScorer.from_calib(calib), str(calib.get("variant", "default"))
    return SnapScorer.from_calib(calib, variant=variant), variant


def available_variants(calib: dict) -> list[str]:
    """Variant names calib.json can score besides the default."""
    v = calib.get("variants")
    if isinstance(v, dict):
        return sorted(v)
    if isinstance(v, list):
        return [str(x) for x in v]
    return []
