#!/usr/bin/env python3
"""Goldens for models/gguf/ggml_dequant.cpp from gguf-py's own numpy dequantisers.

For each GGUF type vrun converts at import, two rows of random blocks (random bytes, with the f16/f32
scale fields set to finite values in a realistic range) and gguf-py's dequantised floats.
Writes tests/data/gguf/dequant_goldens.json: {type_name: {"type": code, "cols": n, "rows": 2,
"bytes": base64, "values": [floats, row-major]}}.

    /tmp/vrun-tok-venv/bin/python tests/reference/make_ggml_dequant_goldens.py
(the venv of setup_tokenizer_venv.sh, which holds gguf-py).
"""
import base64
import json
import os

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "gguf", "dequant_goldens.json")

# Byte offsets of f16 scale fields inside one block, per type.
F16_FIELDS = {
    T.Q5_0: [0], T.Q5_1: [0, 2], T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2],
    T.Q6_K: [208], T.IQ4_NL: [0], T.IQ4_XS: [0],
}
TYPES = [T.Q5_0, T.Q5_1, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS, T.MXFP4]


def blocks(rng, t, n):
    _, size = GGML_QUANT_SIZES[t]
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for off in F16_FIELDS.get(t, []):
        v = (rng.uniform(0.002, 0.05, size=n) * rng.choice([-1, 1], size=n)).astype(np.float16)
        raw[:, off:off + 2] = v.view(np.uint8).reshape(n, 2)
    if t == T.MXFP4:
        raw[:, 0] = rng.integers(118, 130, size=n)  # scales 2^-9 .. 2^2
    return raw


def main():
    rng = np.random.default_rng(20261122)
    out = {}
    for t in TYPES:
        be, bb = GGML_QUANT_SIZES[t]
        cols = max(be, 256) * 2  # two 256-element super-blocks' worth per row
        rows = 2
        raw = blocks(rng, t, rows * cols // be).reshape(rows, cols // be * bb)
        vals = dequantize(raw, t).astype(np.float32).reshape(rows, cols)
        assert np.isfinite(vals).all(), t.name
        out[t.name.lower()] = {"type": int(t.value), "cols": cols, "rows": rows,
                               "bytes": base64.b64encode(raw.tobytes()).decode(),
                               "values": [float(v) for v in vals.reshape(-1)]}
        print(t.name, cols, float(np.abs(vals).max()))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
