#!/usr/bin/env python3
"""Print the -D flags that size snapuq_model_t to the largest of the given .tflite models
(tensors, operators, inputs/outputs of subgraph 0): caps.py A.tflite [B.tflite ...]

Used by firmware/Makefile for CAPS=fit builds (the Small-MCU default): the model struct then holds
exactly the compiled-in model instead of the generic 96 tensors / 48 operators. A model uploaded
later with more tensors is refused by snapuq_model_init with a LIMIT error naming the capacity."""

import struct
import sys


def _u32(b: bytes, p: int) -> int:
    return struct.unpack_from("<I", b, p)[0]


def _field(b: bytes, table: int, index: int) -> int | None:
    vt = table - struct.unpack_from("<i", b, table)[0]
    vt_size = struct.unpack_from("<H", b, vt)[0]
    if 4 + 2 * index >= vt_size:
        return None
    off = struct.unpack_from("<H", b, vt + 4 + 2 * index)[0]
    return table + off if off else None


def _vector(b: bytes, table: int, index: int) -> tuple[int, int]:
    p = _field(b, table, index)
    if p is None:
        return 0, 0
    v = p + _u32(b, p)
    return v + 4, _u32(b, v)


def counts(b: bytes) -> tuple[int, int, int]:
    root = _u32(b, 0)
    subs, n_subs = _vector(b, root, 2)  # Model.subgraphs
    if n_subs < 1:
        raise ValueError("no subgraph")
    sg = subs + _u32(b, subs)
    return (_vector(b, sg, 0)[1], _vector(b, sg, 3)[1],  # tensors, operators
            max(_vector(b, sg, 1)[1], _vector(b, sg, 2)[1]))  # inputs, outputs


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: caps.py MODEL.tflite [...]", file=sys.stderr)
        return 2
    t = o = io = 1
    for path in argv[1:]:
        try:
            c = counts(open(path, "rb").read())
        except (OSError, ValueError, struct.error) as e:
            print(f"caps.py: {path}: {e}", file=sys.stderr)
            return 1
        t, o, io = max(t, c[0]), max(o, c[1]), max(io, c[2])
    print(f"-DSNAPUQ_MAX_TENSORS={t} -DSNAPUQ_MAX_OPS={o} -DSNAPUQ_MAX_IO={io}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
