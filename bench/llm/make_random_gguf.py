#!/usr/bin/env python3
"""Writes a Llama-architecture GGUF with random weights in a named shape and weight type, with the
tokenizer (vocabulary, merges, chat template) copied from another GGUF. Both vrun and llama.cpp
load it, so the two can be timed on the same file where the real checkpoint is out of reach (or
too large to copy to a lent machine).

    make_random_gguf.py --shape llama-1b --type q4_0 --tokenizer-from SmolLM2.gguf -o out.gguf
    make_random_gguf.py --tokenizer-only --tokenizer-from SmolLM2.gguf -o tok.gguf   # no tensors

Shapes: llama-1b (Llama-3.2-1B's layers: 2048 wide, 16 layers, 8192 FFN, 32 query and 8 KV
heads) and smollm2-135m (576, 30, 1536, 9, 3), each with the tokenizer's vocabulary (SmolLM2's
49,152 tokens, not Llama 3's 128,256, so the output head is smaller than the real 1B's). Weights
are N(0, 0.02) in the given type (q4_0, q4_1, q8_0 or f16); the token embedding is q8_0 for the
block types (as in SmolLM2's published Q4_1 file) and f16 for f16; the output head is tied to it.
Needs numpy and the `gguf` package (PyPI, or llama.cpp's gguf-py on PYTHONPATH).
"""
import argparse
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

SHAPES = {  # width, layers, FFN, query heads, KV heads, rope base
    "llama-1b": (2048, 16, 8192, 32, 8, 500000.0),
    "smollm2-135m": (576, 30, 1536, 9, 3, 100000.0),
}
TYPES = {"q4_0": (Q.Q4_0, 2), "q4_1": (Q.Q4_1, 3), "q8_0": (Q.Q8_0, 7), "f16": (Q.F16, 1)}
TOKENIZER_KEYS = ["tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                  "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                  "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
                  "tokenizer.ggml.add_space_prefix", "tokenizer.chat_template"]


def copy_tokenizer(reader, writer):
    n_vocab = 0
    for key in TOKENIZER_KEYS:
        field = reader.fields.get(key)
        if field is None:
            continue
        vtype = field.types[0]
        value = field.contents()
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, vtype, sub_type=field.types[-1])
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        else:
            writer.add_key_value(key, value, vtype)
    if n_vocab == 0:
        sys.exit("make_random_gguf: the tokenizer GGUF has no tokenizer.ggml.tokens")
    return n_vocab


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama-1b")
    ap.add_argument("--type", choices=sorted(TYPES), default="q4_0")
    ap.add_argument("--tokenizer-from", required=True, help="GGUF whose tokenizer is copied")
    ap.add_argument("--tokenizer-only", action="store_true", help="write only the tokenizer (no model)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    reader = gguf.GGUFReader(args.tokenizer_from)
    writer = gguf.GGUFWriter(args.output, "llama")
    n_vocab = copy_tokenizer(reader, writer)
    if not args.tokenizer_only:
        width, layers, ffn, heads, kv_heads, rope_base = SHAPES[args.shape]
        qtype, file_type = TYPES[args.type]
        writer.add_name("random %s %s" % (args.shape, args.type))
        writer.add_block_count(layers)
        writer.add_context_length(8192)
        writer.add_embedding_length(width)
        writer.add_feed_forward_length(ffn)
        writer.add_head_count(heads)
        writer.add_head_count_kv(kv_heads)
        writer.add_rope_freq_base(rope_base)
        writer.add_rope_dimension_count(width // heads)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_vocab_size(n_vocab)
        writer.add_file_type(file_type)
        rng = np.random.default_rng(args.seed)

        def matrix(name, rows, cols, t):
            a = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)
            if t == Q.F16:
                writer.add_tensor(name, a.astype(np.float16))
            else:
                q = gguf.quants.quantize(a, t)
                writer.add_tensor(name, q, raw_shape=q.shape, raw_dtype=t)

        ones = np.ones(width, np.float32)
        matrix("token_embd.weight", n_vocab, width, Q.F16 if qtype == Q.F16 else Q.Q8_0)
        writer.add_tensor("output_norm.weight", ones)
        kv_width = width // heads * kv_heads
        for i in range(layers):
            p = "blk.%d." % i
            writer.add_tensor(p + "attn_norm.weight", ones)
            writer.add_tensor(p + "ffn_norm.weight", ones)
            matrix(p + "attn_q.weight", width, width, qtype)
            matrix(p + "attn_k.weight", kv_width, width, qtype)
            matrix(p + "attn_v.weight", kv_width, width, qtype)
            matrix(p + "attn_output.weight", width, width, qtype)
            matrix(p + "ffn_gate.weight", ffn, width, qtype)
            matrix(p + "ffn_up.weight", ffn, width, qtype)
            matrix(p + "ffn_down.weight", width, ffn, qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print("wrote", args.output)


if __name__ == "__main__":
    main()
