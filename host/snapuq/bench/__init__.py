"""Deployment cost per method and board: the kernel, table, TFLM and variant measurements."""
