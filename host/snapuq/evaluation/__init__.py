"""Evaluation of SNAP and the baselines on a model directory: loading, scoring, reports."""
