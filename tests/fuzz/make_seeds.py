#!/usr/bin/env python3
"""Writes the binary seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/.

Each seed is a small, well-formed file of the kind the target reads (a few hundred bytes to a few
KiB), so the fuzzer starts from inputs that reach deep into the reader. Only the standard library
is used; audio seeds other than WAV are made with sox when it is installed. The program loader's
seed (corpus/program_loader/demo.vrp) is the program tests/runtime/make_demo_program writes.

    python3 tests/fuzz/make_seeds.py
"""
import gzip
import io
import json
import math
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tarfile
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def pattern(n, seed=1):
    """n deterministic, non-zero-looking bytes."""
    out = bytearray()
    x = seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((x >> 16) & 0xFF)
    return bytes(out)


def f16_bytes(values):
    return b"".join(struct.pack("<e", v) for v in values)


def f32_bytes(values):
    return b"".join(struct.pack("<f", v) for v in values)


# ---- GGUF

GGUF_TYPES = {  # code: (block elements, block bytes), as models/gguf/gguf_file.cpp lists them
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18),
}


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(v):
    if isinstance(v, bool):
        return struct.pack("<IB", 7, v)
    if isinstance(v, int):
        return struct.pack("<Iq", 11, v) if v < 0 else struct.pack("<IQ", 10, v)
    if isinstance(v, float):
        return struct.pack("<If", 6, v)
    if isinstance(v, str):
        return struct.pack("<I", 8) + gguf_str(v)
    if isinstance(v, tuple) and v[0] == "u32":
        return struct.pack("<II", 4, v[1])
    if isinstance(v, list):
        if all(isinstance(e, str) for e in v):
            return struct.pack("<IIQ", 9, 8, len(v)) + b"".join(gguf_str(e) for e in v)
        if all(isinstance(e, float) for e in v):
            return struct.pack("<IIQ", 9, 6, len(v)) + b"".join(struct.pack("<f", e) for e in v)
        return struct.pack("<IIQ", 9, 5, len(v)) + b"".join(struct.pack("<i", e) for e in v)
    raise TypeError(v)


def gguf(meta, tensors, version=3, align=32):
    """tensors: (name, ne list innermost first, type code, data bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(meta))
    for k, v in meta.items():
        out += gguf_str(k) + gguf_value(v)
    offset = 0
    infos, blobs = b"", b""
    for name, ne, t, data in tensors:
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", t, offset)
        pad = (-len(data)) % align
        blobs += data + b"\0" * pad
        offset += len(data) + pad
    out += infos
    out += b"\0" * ((-len(out)) % align)
    return out + blobs


def gguf_tensor(name, ne, t):
    be, bb = GGUF_TYPES[t]
    n = 1
    for d in ne:
        n *= d
    data = bytearray(pattern(n // be * bb, seed=t + 7))
    # Keep f16 scales finite: zero the top bits of every 2-byte word's high byte.
    for i in range(1, len(data), 2):
        data[i] &= 0x3B
    return (name, ne, t, bytes(data))


def make_gguf():
    vocab = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"] + [chr(c) for c in range(97, 123)] + ["\u0120t", "he", "\u0120the"]
    tok_meta = {
        "general.architecture": "llama",
        "general.name": "fuzz-seed",
        "llama.context_length": ("u32", 64),
        "llama.embedding_length": ("u32", 32),
        "llama.block_count": ("u32", 1),
        "llama.feed_forward_length": ("u32", 64),
        "llama.attention.head_count": ("u32", 2),
        "llama.attention.head_count_kv": ("u32", 1),
        "llama.rope.freq_base": 10000.0,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "smollm",
        "tokenizer.ggml.tokens": vocab,
        "tokenizer.ggml.token_type": [2, 3, 3, 3, 3] + [1] * (len(vocab) - 5),
        "tokenizer.ggml.merges": ["\u0120 t", "h e", "\u0120t he"],
        "tokenizer.ggml.bos_token_id": ("u32", 1),
        "tokenizer.ggml.eos_token_id": ("u32", 2),
        "tokenizer.chat_template": "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}",
    }
    d, v, ff = 32, len(vocab), 64
    llama_tensors = [
        gguf_tensor("token_embd.weight", [d, v], 8),
        gguf_tensor("output_norm.weight", [d], 0),
        gguf_tensor("blk.0.attn_norm.weight", [d], 0),
        gguf_tensor("blk.0.ffn_norm.weight", [d], 0),
        gguf_tensor("blk.0.attn_q.weight", [d, d], 2),
        gguf_tensor("blk.0.attn_k.weight", [d, 16], 3),
        gguf_tensor("blk.0.attn_v.weight", [d, 16], 1),
        gguf_tensor("blk.0.attn_output.weight", [d, d], 8),
        gguf_tensor("blk.0.ffn_gate.weight", [d, ff], 2),
        gguf_tensor("blk.0.ffn_up.weight", [d, ff], 6),
        gguf_tensor("blk.0.ffn_down.weight", [ff, d], 7),
    ]
    put("gguf", "llama_tiny.gguf", gguf(tok_meta, llama_tensors))
    # One tensor of every type the reader knows, each exactly one block row.
    every = [gguf_tensor("t%d" % t, [GGUF_TYPES[t][0]], t) for t in sorted(GGUF_TYPES)]
    put("gguf", "every_type.gguf", gguf({"general.architecture": "llama", "general.alignment": ("u32", 64)}, every, align=64))
    # K-quants in rows of 256 across two rows.
    kq = [gguf_tensor("k%d" % t, [256, 2], t) for t in (10, 11, 12, 13, 14, 23)]
    put("gguf", "kquants_v2.gguf", gguf({"general.architecture": "llama"}, kq, version=2))
    put("gguf", "metadata_only.gguf", gguf({"a.u8": ("u32", 1), "b.f": [1.0, 2.5], "c.i": [1, -2, 3], "d.b": True, "e.s": "x"}, []))


# ---- safetensors / Hugging Face folders

def safetensors(tensors, metadata=None):
    """tensors: (name, dtype, shape, data)."""
    header, blob = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + blob


def make_safetensors():
    put("safetensors", "mixed.safetensors", safetensors([
        ("a.weight", "F32", [2, 3], f32_bytes([0.5, -1, 2, 3, 4, 5])),
        ("b.weight", "F16", [4], f16_bytes([1, 2, 3, 4])),
        ("c.weight", "BF16", [2], b"\x80\x3f\x00\x40"),
        ("d.ids", "I64", [2], struct.pack("<qq", 1, 2)),
        ("e.mask", "BOOL", [3], b"\x01\x00\x01"),
        ("f.scalar", "F32", [], f32_bytes([7])),
        ("g.empty", "F32", [0, 4], b""),
    ], metadata={"format": "pt"}))
    put("safetensors", "one.safetensors", safetensors([("x", "F8_E4M3", [4], b"\x01\x02\x03\x04")]))

    # A tiny Llama: config.json, model.safetensors, tokenizer.json (fuzz_util.h's marker between them).
    d, ff, v, heads, kv = 8, 16, 16, 2, 1
    hd = d // heads
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d, "intermediate_size": ff,
           "num_hidden_layers": 1, "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": v,
           "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
           "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16"}
    def w(name, shape):
        n = 1
        for s in shape:
            n *= s
        return (name, "F16", shape, f16_bytes([((i * 7919) % 17 - 8) / 16.0 for i in range(n)]))
    tensors = [w("model.embed_tokens.weight", [v, d]), w("model.norm.weight", [d]), w("lm_head.weight", [v, d]),
               w("model.layers.0.input_layernorm.weight", [d]), w("model.layers.0.post_attention_layernorm.weight", [d]),
               w("model.layers.0.self_attn.q_proj.weight", [d, d]), w("model.layers.0.self_attn.k_proj.weight", [kv * hd, d]),
               w("model.layers.0.self_attn.v_proj.weight", [kv * hd, d]), w("model.layers.0.self_attn.o_proj.weight", [d, d]),
               w("model.layers.0.mlp.gate_proj.weight", [ff, d]), w("model.layers.0.mlp.up_proj.weight", [ff, d]),
               w("model.layers.0.mlp.down_proj.weight", [d, ff])]
    tok = {"version": "1.0", "added_tokens": [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
                                              {"id": 2, "content": "</s>", "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4, "c": 5, "h": 6, "e": 7, "l": 8, "o": 9,
                                              "\u0120": 10, "he": 11, "ll": 12, "hell": 13, "hello": 14, "\u0120h": 15},
                     "merges": ["h e", "l l", "he ll", "hell o", "\u0120 h"]}}
    marker = b"\n--vrun-fuzz-part--\n"
    put("hf_checkpoint", "tiny_llama", json.dumps(cfg).encode() + marker + safetensors(tensors) + marker + json.dumps(tok).encode())
    cfg_q = dict(cfg, model_type="qwen2", architectures=["Qwen2ForCausalLM"], tie_word_embeddings=True)
    put("hf_checkpoint", "tiny_qwen2_tied", json.dumps(cfg_q).encode() + marker + safetensors(tensors[:2] + tensors[3:]))
    put("tokenizer_json", "bytelevel_bpe.json", json.dumps(tok))


# ---- pickles, PyTorch zips, .nemo archives

_FAKE_TORCH = None


def fake_torch():
    """Just enough of torch's names for pickle to write the globals a real checkpoint holds."""
    global _FAKE_TORCH
    if _FAKE_TORCH:
        return _FAKE_TORCH
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    coll = sys.modules["collections"]

    class FloatStorage:
        pass

    class HalfStorage:
        pass
    FloatStorage.__module__ = HalfStorage.__module__ = "torch"
    FloatStorage.__qualname__, HalfStorage.__qualname__ = "FloatStorage", "HalfStorage"
    torch.FloatStorage, torch.HalfStorage = FloatStorage, HalfStorage

    def _rebuild_tensor_v2(*args):
        pass
    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    sys.modules["torch"], sys.modules["torch._utils"] = torch, utils

    class Storage:
        def __init__(self, key, cls, numel):
            self.key, self.cls, self.numel = key, cls, numel

    class Tensor:
        def __init__(self, key, storage, shape):
            n = 1
            for d in shape:
                n *= d
            self.storage, self.shape = Storage(key, storage, n), shape

        def __reduce__(self):
            stride, s = [], 1
            for d in reversed(self.shape):
                stride.insert(0, s)
                s *= d
            return (_rebuild_tensor_v2, (self.storage, 0, tuple(self.shape), tuple(stride), False, coll.OrderedDict()))

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Storage):
                return ("storage", obj.cls, obj.key, "cpu", obj.numel)
            return None

    _FAKE_TORCH = (Tensor, Pickler, FloatStorage, HalfStorage)
    return _FAKE_TORCH


def torch_zip(tensors, prefix="archive", deflate_pickle=False, zip64=False):
    """tensors: name -> (storage class, shape, bytes)."""
    import collections
    Tensor, Pickler, _, _ = fake_torch()
    state = collections.OrderedDict()
    storages = {}
    for i, (name, (cls, shape, data)) in enumerate(tensors.items()):
        state[name] = Tensor(str(i), cls, shape)
        storages[str(i)] = data
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(state)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        info = zipfile.ZipInfo(prefix + "/data.pkl")
        info.compress_type = zipfile.ZIP_DEFLATED if deflate_pickle else zipfile.ZIP_STORED
        with z.open(info, "w", force_zip64=zip64) as f:
            f.write(buf.getvalue())
        for key, data in storages.items():
            with z.open(zipfile.ZipInfo(prefix + "/data/" + key), "w", force_zip64=zip64) as f:
                f.write(data)
        z.writestr(prefix + "/version", "3\n")
    return out.getvalue(), buf.getvalue()


def pb_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_field(num, wire, payload):
    key = pb_varint(num << 3 | wire)
    if wire == 0:
        return key + pb_varint(payload)
    if wire == 5:
        return key + payload
    return key + pb_varint(len(payload)) + payload


def spm_model(pieces, model_type):
    """A SentencePiece ModelProto: pieces (text, score, type), trainer spec, identity normaliser."""
    out = b""
    for text, score, kind in pieces:
        p = pb_field(1, 2, text.encode()) + pb_field(2, 5, struct.pack("<f", score)) + pb_field(3, 0, kind)
        out += pb_field(1, 2, p)
    trainer = pb_field(3, 0, model_type) + pb_field(40, 0, 0) + pb_field(41, 0, 1) + pb_field(42, 0, 2)
    out += pb_field(2, 2, trainer)
    norm = pb_field(1, 2, b"identity") + pb_field(3, 0, 1) + pb_field(4, 0, 1) + pb_field(5, 0, 1)
    return out + pb_field(3, 2, norm)


def spm_pieces():
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    words = ["\u2581", "\u2581the", "\u2581a", "he", "ll", "o", "\u2581hello", "\u2581world", "w", "r", "d", "l", "h", "e", "t", "a"]
    pieces += [(w, -float(i + 1), 1) for i, w in enumerate(words)]
    return pieces


def make_archives():
    Tensor, Pickler, FloatStorage, HalfStorage = fake_torch()
    tensors = {"encoder.weight": (FloatStorage, [2, 4], f32_bytes([0.25 * i for i in range(8)])),
               "decoder.bias": (HalfStorage, [4], f16_bytes([1, -1, 0.5, 2]))}
    ckpt, pkl = torch_zip(tensors)
    put("zip", "state_dict.ckpt", ckpt)
    put("zip", "deflated_pickle.ckpt", torch_zip(tensors, prefix="model_weights", deflate_pickle=True)[0])
    put("zip", "zip64.ckpt", torch_zip(tensors, zip64=True)[0])
    put("pickle", "state_dict.pkl", pkl)
    put("pickle", "plain_values_p2.pkl", pickle.dumps({"a": [1, 2.5, None, True, "x", b"y"], "b": (1, (2, 3)), "c": -(2 ** 40)}, protocol=2))
    put("pickle", "plain_values_p4.pkl", pickle.dumps([{"k": i, "v": str(i) * 3} for i in range(5)], protocol=4))
    put("pickle", "plain_values_p0.pkl", pickle.dumps({"n": 3, "s": "text", "l": [1, 2]}, protocol=0))

    spm = spm_model(spm_pieces(), 1)
    put("tokenizer_model", "unigram.model", spm)
    put("tokenizer_model", "bpe.model", spm_model(spm_pieces(), 2))
    import base64
    ranks = "".join("%s %d\n" % (base64.b64encode(bytes([b])).decode(), b) for b in range(256))
    ranks += "%s 256\n%s 257\n" % (base64.b64encode(b"th").decode(), base64.b64encode(b"the").decode())
    put("tokenizer_model", "tiktoken.model", ranks)

    with tarfile.open(os.path.join(os.path.dirname(HERE), "data", "parakeet", "tdt_small.nemo")) as t:
        yaml_text = t.extractfile("./model_config.yaml").read()
    put("yaml", "model_config.yaml", yaml_text)
    put("yaml", "scalars.yaml", "a: 1\nb: 1e-05\nc: .inf\nd: ~\ne: 'quoted'\nf: [1, 2, {g: yes}]\nh:\n  - x\n  - y: null\n")

    def tar_bytes(entries, fmt=tarfile.USTAR_FORMAT):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=fmt) as t:
            for name, data in entries:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 0
                t.addfile(info, io.BytesIO(data))
        return out.getvalue()
    entries = [("./model_config.yaml", yaml_text), ("./abc_tokenizer.model", spm), ("./model_weights.ckpt", ckpt)]
    plain = tar_bytes(entries)
    put("nemo", "plain.nemo", plain)
    put("nemo", "gzip.nemo", gzip.compress(tar_bytes(entries), mtime=0))
    put("nemo", "gnu_longname.nemo", tar_bytes([("./" + "d" * 120 + "/model_config.yaml", b"a: 1\n")], fmt=tarfile.GNU_FORMAT))
    put("nemo", "pax.nemo", tar_bytes([("./" + "p" * 120 + "/x.yaml", b"a: 1\n")], fmt=tarfile.PAX_FORMAT))


# ---- CTranslate2 and whisper.cpp

def ct2_model(variables, aliases=(), version=6):
    """variables: (name, shape, dtype id, data)."""
    def s(x):
        b = x.encode() + b"\0"
        return struct.pack("<H", len(b)) + b
    out = struct.pack("<I", version) + s("WhisperSpec") + struct.pack("<II", 3, len(variables))
    for name, shape, dt, data in variables:
        out += s(name) + struct.pack("<B", len(shape)) + b"".join(struct.pack("<I", d) for d in shape)
        out += struct.pack("<BI", dt, len(data)) + data
    out += struct.pack("<I", len(aliases))
    for a, t in aliases:
        out += s(a) + s(t)
    return out


def make_ct2():
    vs = [("encoder/num_heads", [], 3, struct.pack("<i", 2)),
          ("decoder/num_heads", [], 3, struct.pack("<i", 2)),
          ("encoder/conv1/weight", [4, 2, 3], 0, f32_bytes([0.1 * i for i in range(24)])),
          ("encoder/conv1/bias", [4], 4, f16_bytes([0, 1, 2, 3])),
          ("decoder/layer_0/ffn/linear_0/weight", [4, 4], 1, bytes(range(16))),
          ("decoder/layer_0/ffn/linear_0/weight_scale", [4], 0, f32_bytes([1, 2, 4, 8])),
          ("decoder/layer_0/ffn/linear_1/weight", [2, 4], 2, struct.pack("<8h", *range(-4, 4))),
          ("decoder/layer_0/ffn/linear_1/weight_scale", [], 0, f32_bytes([16])),
          ("decoder/embeddings/weight", [6, 4], 5, b"\x80\x3f" * 24),
          ("decoder/scale_embeddings", [], 3, struct.pack("<i", 0))]
    put("ct2", "whisper_spec.bin", ct2_model(vs, aliases=[("decoder/projection/weight", "decoder/embeddings/weight")]))
    put("ct2", "version3.bin", ct2_model(vs[:3], version=3))
    # The real layout's header: the CTranslate2 file the import tests use, cut to its first variables.
    src = os.path.join(os.path.dirname(HERE), "data", "whisper_import", "ct2", "model.bin")
    if os.path.exists(src):
        with open(src, "rb") as f:
            put("ct2", "real_prefix.bin", f.read(2048))


def make_ggml_whisper():
    # tiny.en's dimensions cut down: n_vocab 51864 (English-only special layout), 4-wide states.
    hp = [51864, 8, 4, 2, 1, 8, 4, 2, 1, 4, 1]
    out = struct.pack("<I", 0x67676D6C) + struct.pack("<11i", *hp)
    out += struct.pack("<ii", 4, 8) + f32_bytes([0.01 * i for i in range(32)])
    words = [bytes([b]) for b in range(256)] + [b"th", b"the", b" the", b"he"]
    out += struct.pack("<i", len(words)) + b"".join(struct.pack("<I", len(w)) + w for w in words)

    def tensor(name, ne, t, data):
        n = name.encode()
        return struct.pack("<iii", len(ne), len(n), t) + b"".join(struct.pack("<i", d) for d in ne) + n + data
    out += tensor("encoder.conv1.weight", [3, 4, 4], 1, f16_bytes([0.1] * 48))
    out += tensor("encoder.conv1.bias", [1, 4], 0, f32_bytes([0.0] * 4))
    out += tensor("decoder.token_embedding.weight", [32, 2], 8, (b"\x00\x3c" + bytes(range(32))) * 2)
    out += tensor("decoder.blocks.0.mlp.0.weight", [32, 1], 6, b"\x00\x3c" + bytes(4) + bytes(range(16)))
    out += tensor("encoder.positional_embedding", [4, 8], 0, f32_bytes([0.5] * 32))
    put("ggml_whisper", "tiny_en_cut.bin", out)
    full = [bytes([b]) for b in range(256)] + [bytes([i // 256, i % 256]) for i in range(50256 - 256)]
    big = struct.pack("<I", 0x67676D6C) + struct.pack("<11i", *hp) + struct.pack("<ii", 4, 8) + f32_bytes([0.0] * 32)
    big += struct.pack("<i", len(full)) + b"".join(struct.pack("<I", len(w)) + w for w in full)
    big += tensor("encoder.conv1.bias", [1, 4], 0, f32_bytes([0.0] * 4))
    put("ggml_whisper", "full_vocab.bin", big)


# ---- audio

def wav(samples, rate=16000, channels=1, bits=16, fmt=1):
    if fmt == 3:
        data = f32_bytes(samples)
    elif bits == 16:
        data = b"".join(struct.pack("<h", int(max(-1, min(1, s)) * 32767)) for s in samples)
    else:
        data = bytes(int((max(-1, min(1, s)) + 1) * 127.5) for s in samples)
    block = channels * bits // 8
    fmt_chunk = struct.pack("<HHIIHH", fmt, channels, rate, rate * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt_chunk)) + fmt_chunk + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def make_audio():
    tone = [0.5 * math.sin(2 * math.pi * 440 * i / 16000) for i in range(400)]
    put("audio", "tone_s16.wav", wav(tone))
    put("audio", "tone_stereo_8k.wav", wav(tone[:200], rate=8000, channels=2))
    put("audio", "tone_f32.wav", wav(tone[:200], fmt=3, bits=32))
    put("audio", "tone_u8_44k.wav", wav(tone[:300], rate=44100, bits=8))
    if shutil.which("sox"):
        src = os.path.join(CORPUS, "audio", "tone_s16.wav")
        for ext in ("flac", "aiff", "au", "ogg"):
            dst = os.path.join(CORPUS, "audio", "tone." + ext)
            subprocess.run(["sox", src, dst], check=False, stderr=subprocess.DEVNULL)
    pcm = b"".join(struct.pack("<h", int(s * 32767)) for s in tone[:256])
    # fuzz_audio_raw: byte 0 picks the encoding (and big-endian, many channels), byte 1 the channels and rate.
    put("audio_raw", "s16_mono_16k", b"\x00\x01" + pcm)
    put("audio_raw", "s16_stereo_8k", b"\x00\x12" + pcm)
    put("audio_raw", "f32_be_44k", b"\x84\x21" + b"".join(struct.pack(">f", s) for s in tone[:128]))
    put("audio_raw", "u8_mono_48k", b"\x03\x31" + bytes(range(256)))


# ---- tokenizers and chat templates

def make_text():
    root = os.path.join(os.path.dirname(HERE), "data", "llama")
    for name in ("tiny_llama", "tiny_qwen2"):
        with open(os.path.join(root, name, "tokenizer.json"), "rb") as f:
            put("tokenizer_json", name + ".json", f.read())
    wordpiece = {"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["\u2581", -1.0], ["\u2581hello", -2.0],
                                                                        ["h", -3.0], ["e", -3.0], ["l", -3.0], ["o", -3.0]]},
                 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
                 "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"},
                 "decoder": {"type": "Metaspace", "replacement": "\u2581"}, "added_tokens": []}
    put("tokenizer_json", "unigram.json", json.dumps(wordpiece))
    marker = "\n--vrun-fuzz-part--\n"
    msgs = "system\tYou are brief.\nuser\tHello!\nassistant\tHi.\nuser\tAnd then?"
    chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    llama3 = "{% set loop_messages = messages %}{% for message in loop_messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    llama2 = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}"
    for name, tpl in (("chatml", chatml), ("llama3", llama3), ("llama2", llama2)):
        put("chat_template", name, json.dumps({"chat_template": tpl, "bos_token": "<s>"}) + marker + msgs + marker + "auto")
    with open(os.path.join(root, "tiny_qwen2", "tokenizer_config.json"), "rb") as f:
        put("chat_template", "qwen2_config", f.read() + marker.encode() + b"user\tWhat is 2+2?" + marker.encode() + b"chatml")


def main():
    for target in ("gguf", "safetensors", "hf_checkpoint", "nemo", "zip", "pickle", "yaml", "ct2", "ggml_whisper",
                   "tokenizer_json", "tokenizer_model", "audio", "audio_raw", "chat_template"):
        shutil.rmtree(os.path.join(CORPUS, target), ignore_errors=True)
    make_gguf()
    make_safetensors()
    make_archives()
    make_ct2()
    make_ggml_whisper()
    make_audio()
    make_text()


if __name__ == "__main__":
    main()
