# Runs under MicroPython (and CPython): score N int8 inputs with the pure-MicroPython twin and
# print one JSON line per input with every number the twin computes.
#   micropython twin_dump.py MODEL MANIFEST|- INPUTS N
# MODEL: .tflite or .snapuq blob; MANIFEST "-" = interpreter only (outputs by position).
import json
import sys

import snapuq

model_path, man_path, in_path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
data = open(in_path, "rb").read()
size = len(data) // n
if man_path == "-":
    it = snapuq.Interpreter(open(model_path, "rb").read())
    for i in range(n):
        res = it.invoke(snapuq._int8_array(data[i * size:(i + 1) * size]))
        print(json.dumps({"i": i, "outs": [list(res[t]) for t in it.outputs]}))
else:
    m = snapuq.Model(model_path, None if man_path == "+" else man_path)
    for i in range(n):
        r = m.infer(bytearray(data[i * size:(i + 1) * size]))
        outs = {name: [v - 256 if v > 127 else v for v in m.output(name)] for name in m.outputs}
        print(json.dumps({"i": i, "pred": r.pred, "u_q16": r.u_q16, "z_q16": r.z_q16, "s_q16": r.s_q16,
                          "f_q16": r.f_q16, "m_q16": r.m_q16, "ebar_q16": list(r.ebar_q16),
                          "tap_q16": list(r.tap_q16), "flag": r.flag, "u": r.u, "p_q16": r.p_q16,
                          "a_q16": r.a_q16, "p_err": r.p_err, "alarm": r.alarm, "outs": outs}))
