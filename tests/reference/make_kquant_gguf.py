#!/usr/bin/env python3
"""A tiny random-weight Llama GGUF whose matrices use the types vrun converts at import (q2_K,
q3_K, q4_K, q5_K, q6_K, q5_0, q5_1, iq4_nl, iq4_xs), and float64 reference logits from gguf-py's
dequantised weights (make_llama_gguf_goldens.py's NumpyLlama).

Writes tests/data/gguf/tiny_kquant.gguf and tests/data/gguf/tiny_kquant_logits.json
({"tokens": [...], "logits": [[vocab floats] per position], "gaps": [top-1 minus top-2 per position],
"noise_sensitivity": relative logit change under q8_0-sized weight noise, "types": {tensor: type}}).

    /tmp/vrun-tok-venv/bin/python tests/reference/make_kquant_gguf.py
"""
import importlib.util
import json
import os

import numpy as np
from gguf import GGUFWriter
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "gguf")
DIM, FFN, HEADS, KV_HEADS, LAYERS, VOCAB, CTX = 256, 512, 4, 2, 2, 512, 64
HEAD_DIM = DIM // HEADS
TYPES = {
    "token_embd": T.Q6_K, "output": T.Q4_K,
    "attn_q": T.Q4_K, "attn_k": T.Q5_K, "attn_v": T.Q6_K, "attn_output": T.Q3_K,
    "ffn_gate": T.Q2_K, "ffn_up": T.IQ4_XS, "ffn_down": T.Q5_0,
}
LAYER_TYPES = [{}, {"attn_q": T.Q5_1, "ffn_up": T.IQ4_NL}]  # per-layer overrides
# f16 scale fields (byte offsets in a block) and the range each is drawn from: small enough that
# the random weights keep activations of order one.
F16_FIELDS = {
    T.Q5_0: [0], T.Q5_1: [0, 2], T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2],
    T.Q6_K: [208], T.IQ4_NL: [0], T.IQ4_XS: [0],
}
SCALE = {T.Q5_0: 0.01, T.Q5_1: 0.01, T.Q2_K: 0.003, T.Q3_K: 0.0015, T.Q4_K: 0.0003, T.Q5_K: 0.00015,
         T.Q6_K: 0.00005, T.IQ4_NL: 0.0015, T.IQ4_XS: 0.00007}


def load_numpy_llama():
    spec = importlib.util.spec_from_file_location("goldens", os.path.join(HERE, "make_llama_gguf_goldens.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.NumpyLlama


def random_blocks(rng, t, rows, cols):
    be, bb = GGML_QUANT_SIZES[t]
    n = rows * cols // be
    raw = rng.integers(0, 256, size=(n, bb), dtype=np.uint8)
    for off in F16_FIELDS[t]:
        v = (rng.uniform(0.5, 1.0, size=n) * SCALE[t]).astype(np.float16)
        raw[:, off:off + 2] = v.view(np.uint8).reshape(n, 2)
    return raw.reshape(rows, cols // be * bb)


def main():
    rng = np.random.default_rng(7)
    path = os.path.join(OUT, "tiny_kquant.gguf")
    w = GGUFWriter(path, "llama")
    w.add_context_length(CTX)
    w.add_embedding_length(DIM)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(VOCAB)
    types = {}

    def matrix(name, kind, rows, cols, layer=None):
        t = (LAYER_TYPES[layer].get(kind) if layer is not None else None) or TYPES[kind]
        w.add_tensor(name, random_blocks(rng, t, rows, cols), raw_dtype=t)
        types[name] = t.name.lower()

    def norm(name):
        w.add_tensor(name, rng.uniform(0.8, 1.2, size=DIM).astype(np.float32))

    matrix("token_embd.weight", "token_embd", VOCAB, DIM)
    for l in range(LAYERS):
        p = "blk.%d." % l
        norm(p + "attn_norm.weight")
        matrix(p + "attn_q.weight", "attn_q", DIM, DIM, l)
        matrix(p + "attn_k.weight", "attn_k", KV_HEADS * HEAD_DIM, DIM, l)
        matrix(p + "attn_v.weight", "attn_v", KV_HEADS * HEAD_DIM, DIM, l)
        matrix(p + "attn_output.weight", "attn_output", DIM, DIM, l)
        norm(p + "ffn_norm.weight")
        matrix(p + "ffn_gate.weight", "ffn_gate", FFN, DIM, l)
        matrix(p + "ffn_up.weight", "ffn_up", FFN, DIM, l)
        matrix(p + "ffn_down.weight", "ffn_down", DIM, FFN, l)
    norm("output_norm.weight")
    matrix("output.weight", "output", VOCAB, DIM)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    model = load_numpy_llama()(path)
    tokens = [int(t) for t in rng.integers(0, VOCAB, size=12)]
    logits = model.logits(np.array(tokens))
    top2 = np.sort(logits, axis=-1)[:, -2:]
    print("logit range %.3f..%.3f, smallest top-1/top-2 gap %.4f" % (logits.min(), logits.max(),
                                                                     (top2[:, 1] - top2[:, 0]).min()))
    # How much this random model amplifies weight noise of q8_0's size (half a step, amax/254, per
    # row): the C++ test's tolerance for the as-imported (re-quantised) weights rests on it.
    noisy = load_numpy_llama()(path)
    for k, a in noisy.w.items():
        if a.ndim == 2:
            noisy.w[k] = a + rng.normal(size=a.shape) * np.abs(a).max(axis=1, keepdims=True) / 508
    noisy.out = noisy.w.get("output.weight", noisy.w["token_embd.weight"])
    sens = (np.abs(noisy.logits(np.array(tokens)) - logits).max(axis=1) / np.abs(logits).max(axis=1)).max()
    print("relative logit change under q8_0-sized weight noise: %.4f" % sens)
    with open(os.path.join(OUT, "tiny_kquant_logits.json"), "w") as f:
        json.dump({"tokens": tokens, "logits": logits.tolist(), "gaps": (top2[:, 1] - top2[:, 0]).tolist(),
                   "noise_sensitivity": float(sens), "types": types}, f)
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
