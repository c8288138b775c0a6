# The public surface of `snapuq` (C module or twin) as one JSON object, for tests/host/test_twin_parity.py:
# names (module, classes, a loaded Model, a Result, a Monitor, a Calibrator), the constants and the
# exception (type, message) of each bad input below, every case on the same blob.
#   micropython parity.py BLOB
import array
import json
import sys

import snapuq


def public(obj):
    return sorted(n for n in dir(obj) if not n.startswith("_"))


def methods(cls):  # class level: the methods (the twin's properties and class constants are instance names)
    return sorted(n for n in public(cls) if callable(getattr(cls, n)))


blob = open(sys.argv[1], "rb").read()
m = snapuq.Model(blob)
x = bytearray(64)
r = m.infer(x)
out = {
    "module": public(snapuq),
    "IMPLEMENTATION": snapuq.IMPLEMENTATION,
    "SPEC_VERSION": snapuq.SPEC_VERSION,
    "Model": methods(snapuq.Model),
    "model": public(m),
    "result": public(r),
    "result_len": len(r),
    "Monitor": methods(snapuq.Monitor),
    "monitor": public(snapuq.Monitor()),
    "Calibrator": methods(snapuq.Calibrator),
    "calibrator": public(snapuq.Calibrator()),
    "snap_sha256": getattr(m, "snap_sha256", None),
}


def fresh():
    return snapuq.Model(blob)


def set_beta_attr(v):
    m.beta = v


def bad_crc():
    b = bytearray(blob)
    b[len(b) - 8] ^= 1
    return bytes(b)


def bad_version():
    b = bytearray(blob)
    b[4] = 7
    return bytes(b)


cal = snapuq.Calibrator()
mon = snapuq.Monitor()
cases = (
    ("Model(int)", lambda: snapuq.Model(123)),
    ("Model(missing file)", lambda: snapuq.Model("/nonexistent/model.snapuq")),
    ("Model(not a blob)", lambda: snapuq.Model(b"XXXX" + blob[4:])),
    ("Model(short)", lambda: snapuq.Model(blob[:20])),
    ("Model(truncated)", lambda: snapuq.Model(blob[:200])),
    ("Model(bad crc)", lambda: snapuq.Model(bad_crc())),
    ("Model(bad version)", lambda: snapuq.Model(bad_version())),
    ("infer(63 bytes)", lambda: m.infer(bytearray(63))),
    ("infer(3 floats)", lambda: m.infer([1.0] * 3)),
    ("infer(float)", lambda: m.infer(3.5)),
    ("infer(array h)", lambda: m.infer(array.array("h", [0] * 64))),
    ("infer(array f short)", lambda: m.infer(array.array("f", [0.0] * 3))),
    ("infer(str list)", lambda: m.infer(["a"] * 64)),
    ("infer(str)", lambda: m.infer("a" * 64)),
    ("infer(None)", lambda: m.infer(None)),
    ("run(63 bytes)", lambda: m.run(bytearray(63))),
    ("quantize(3 floats)", lambda: m.quantize([0.0] * 3)),
    ("output before infer", lambda: fresh().output("logits")),
    ("output(unknown)", lambda: m.output("nope")),
    ("output(int)", lambda: m.output(3)),
    ("set_beta(2 values)", lambda: m.set_beta((1.0, 2.0))),
    ("set_beta(huge)", lambda: m.set_beta((1e9, 0.0, 0.0))),
    ("set_beta(nan)", lambda: m.set_beta((float("nan"), 0.0, 0.0))),
    ("beta = 2 values", lambda: set_beta_attr((1.0, 2.0))),
    ("monitor(window=0)", lambda: m.monitor(window=0)),
    ("stream(monitor=int)", lambda: list(m.stream([x], 5))),
    ("Monitor(window=0)", lambda: snapuq.Monitor(window=0)),
    ("Monitor(cusum_h=0)", lambda: snapuq.Monitor(cusum_h=0)),
    ("Monitor(window=100001)", lambda: snapuq.Monitor(window=100001)),
    ("Calibrator(capacity=0)", lambda: snapuq.Calibrator(0)),
    ("Calibrator(tol=0)", lambda: snapuq.Calibrator(tol=0.0)),
    ("Calibrator(l2=-1)", lambda: snapuq.Calibrator(l2=-1.0)),
    ("Calibrator(max_iter=0)", lambda: snapuq.Calibrator(max_iter=0)),
    ("Calibrator(capacity=100001)", lambda: snapuq.Calibrator(100001)),
    ("Calibrator(max_iter=1001)", lambda: snapuq.Calibrator(max_iter=1001)),
    ("Calibrator(l2=nan)", lambda: snapuq.Calibrator(l2=float("nan"))),
    ("calibrator(capacity=0)", lambda: m.calibrator(0)),
    ("solve(empty)", lambda: snapuq.Calibrator().solve()),
    ("push(nan)", lambda: cal.push(float("nan"), 0.0, True)),
    ("push(inf)", lambda: cal.push(0.0, float("inf"), False)),
    ("calibrate(one class)", lambda: m.calibrate([x, x, x], [r.pred] * 3)),
    ("add(int)", lambda: cal.add(5, 1)),
    ("Monitor.push(str)", lambda: mon.push("x")),
)
errors = {}
for name, fn in cases:
    try:
        fn()
        errors[name] = None
    except Exception as e:  # every exception is a result here
        msg = "errno " + str(e.args[0]) if isinstance(e, OSError) else str(e)
        errors[name] = [type(e).__name__, msg]
out["errors"] = errors
print(json.dumps(out))
