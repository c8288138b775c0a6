# API behaviour of snapuq (twin or C module) on the shipped digits model; expected output in
# api.exp (model-independent lines only: shapes, error messages, monitor and calibrator logic).
#   micropython api.py MODEL_DIR BLOB        (BLOB: `snapuq micropython blob MODEL_DIR`)
import array
import gc
import sys

import snapuq

d = sys.argv[1]
m = snapuq.Model(sys.argv[2])
buf = bytearray(open(sys.argv[2], "rb").read())
m2 = snapuq.Model(buf)
buf[100:] = b""  # the model copied a mutable buffer: shrinking it changes nothing
print("copy", m2.infer(bytearray(64)).u_q16 == m.infer(bytearray(64)).u_q16)
del m2, buf
gc.collect()
print("shape", m.input_shape, "size", m.input_size, "classes", m.n_classes, len(m.class_names))
print("taps", [name for name, _ in m.taps], "outputs", sorted(m.outputs))
print("arena > 0", m.arena_bytes > 0, "threshold in (0,1)", 0 < m.u_threshold < 1)
x = bytearray(range(64))
r = m.infer(x)
print("fields", r.u == r.u_q16 / 65536, r.s == r.s_q16 / 65536, len(r.ebar) == len(m.taps), 0 <= r.pred < 10)
print("flag", r.flag == (r.u_q16 >= round(m.u_threshold * 65536)))
print("same", m.infer(array.array("b", bytes(x))).u_q16 == r.u_q16, m.infer(memoryview(x)).u_q16 == r.u_q16)
q = m.quantize([0.0, 0.5, 1.0, 2.0] + [0.0] * 60)
print("quantize", list(q[:4]), m.infer([0.0, 0.5, 1.0, 2.0] + [0.0] * 60).u_q16 == m.infer(q).u_q16)
print("run", sorted(m.run(x)) == sorted(m.outputs), len(m.output("logits")))
for bad in (bytearray(63), [1.0] * 3, 3.5, array.array("h", [0] * 64), ["a"] * 64, "a" * 64, None):
    try:
        m.infer(bad)
    except (ValueError, TypeError) as e:
        print(type(e).__name__, e)
try:
    m.output("nope")
except ValueError as e:
    print("ValueError", e)
for v in (float("nan"), float("inf"), float("-inf"), 1e30):
    print("nonfinite", v, list(m.quantize([v] + [0.0] * 63)[:1]), m.infer([v] + [0.0] * 63).u_q16 >= 0)
blob = open(d + "/model_int8.tflite", "rb").read()
for bad in (blob[:100], b"XXXX" + blob[4:200], b"SNUQ" + bytes(40)):
    try:
        snapuq.Model(bad, d + "/snapuq.json")
    except ValueError as e:  # wording differs between the C loader and the twin
        print("ValueError", str(e).startswith("snapuq: "), "\n" not in str(e))
try:
    snapuq.Model(blob)
except ValueError as e:
    print("ValueError", e)
try:
    snapuq.Model(d + "/missing.tflite")
except OSError:
    print("OSError")
mon = snapuq.Monitor(3, 40000, 30000, 50000)
alarms = [mon.push(u) for u in (10000, 50000, 50000, 50000, 60000, 0, 0, 0)]
print("monitor", alarms, mon.first_alarm, mon.cusum, mon.count)
mon.reset()
print("reset", mon.count, mon.cusum, mon.n_seen)
cal = snapuq.Calibrator(8)
for i in range(12):
    cal.push(i / 12, 0.5, i % 3 == 0)
print("cal count", cal.count)
cal2 = snapuq.Calibrator(16)
for i in range(16):
    cal2.push(1.0 if i % 2 else 0.0, 0.25, (i % 4) in (1, 2))
try:
    cal2.push(1.0, 0.0, True)
    b, it = cal2.solve()
    print("fit", [round(v, 2) for v in b], it > 0)
except ValueError as e:
    print("ValueError", e)
cal3 = snapuq.Calibrator(4)
cal3.push(0.0, 0.0, True)
try:
    cal3.solve()
except ValueError:
    print("too few labels: ValueError")
m.beta = (0.25, 2.0, 0.5)
print("beta", m.beta)
try:
    m.set_beta((1.0, 2.0))
except ValueError as e:
    print("ValueError", e)
print("stream", [a for _, a in m.stream([x, x], snapuq.Monitor(1, 0, 0, 1))])
