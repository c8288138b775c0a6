"""Uncertainty arithmetic on arrays (numpy only): the SNAP score, calibration fits, metrics, streams."""
