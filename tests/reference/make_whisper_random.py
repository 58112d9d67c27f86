#!/usr/bin/env python3
"""A random-weight multilingual Whisper in the three layouts vrun imports, plus transformers' tokens.

Makes tests/data/whisper_import/:
  hf/       WhisperForConditionalGeneration saved by transformers (save_pretrained: config.json,
            generation_config.json, model.safetensors in float16, tokenizer.json, ...)
  ct2/      the same model converted by CTranslate2's own Transformers converter (float16):
            model.bin, config.json and vocabulary.json (no tokenizer.json, as the converter writes it)
  ggml-random.bin   the same model in whisper.cpp's ggml layout, written as whisper.cpp's
            models/convert-h5-to-ggml.py writes it (f16 matrices, f32 vectors, conv biases [n, 1])
  goldens.json      transformers' own WhisperForConditionalGeneration.generate tokens (greedy) on
            three clips: language forced and auto-detected, with and without timestamps, with the
            smallest top-1/top-2 logit gap seen at each greedy step.

The vocabulary is Whisper's real multilingual one (51865 ids): openai-whisper's
multilingual.tiktoken byte-pair ranks (shipped in the openai-whisper sdist on PyPI) turned into a
byte-level BPE with the merges tiktoken implies, then the special tokens in openai-whisper's order
(<|endoftext|>, <|startoftranscript|>, 99 languages, <|translate|>, <|transcribe|>, <|startoflm|>,
<|startofprev|>, <|nospeech|>, <|notimestamps|>, 1501 timestamps).

The model is tiny (d_model 16, 2 + 2 layers, 80 mels) so three copies of the 51865 x 16 embedding
stay small. Weights are drawn with large scales so that greedy choices are not near-ties; they are
rounded to float16 first, so the float32 reference run sees exactly what the files hold.

  python3 -m venv /tmp/wimport-venv
  echo /tmp/vrun-llm-venv/lib/python3.11/site-packages > /tmp/wimport-venv/lib/python3.11/site-packages/llm.pth
  /tmp/wimport-venv/bin/pip install ctranslate2      # beside torch + transformers
  pip download --no-deps --no-binary :all: openai-whisper==20250625 -d /tmp/oaw && tar xf /tmp/oaw/*.tar.gz -C /tmp/oaw
  /tmp/wimport-venv/bin/python tests/reference/make_whisper_random.py /tmp/oaw/openai_whisper-20250625/whisper
"""
import base64
import json
import os
import shutil
import struct
import sys
import wave

import numpy as np
import torch
from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperTokenizer
from transformers import GenerationConfig

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "whisper_import")
DATA = os.path.join(HERE, "..", "data")
CLIPS = {
    "espeak_slow": os.path.join(DATA, "whisper", "espeak_slow.wav"),
    "espeak_fast": os.path.join(DATA, "whisper", "espeak_fast.wav"),
    "speech_0880": os.path.join(DATA, "audio", "speech_0880.wav"),
}
# (clip, forced language or None for detection, task, timestamps)
CASES = [
    ("espeak_slow", "en", "transcribe", False),
    ("espeak_slow", "en", "transcribe", True),
    ("espeak_fast", None, "transcribe", False),
    ("espeak_fast", None, "transcribe", True),
    ("speech_0880", "de", "translate", False),
    ("speech_0880", None, "transcribe", True),
]
MAX_NEW_TOKENS = 16
SEED = 3


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def languages(whisper_pkg):
    # openai-whisper's LANGUAGES dict, in its order (the first 99 make the 51865-id vocabulary).
    src = open(os.path.join(whisper_pkg, "tokenizer.py"), encoding="utf-8").read()
    body = src[src.index("LANGUAGES = {") + len("LANGUAGES = {"):]
    body = body[: body.index("}")]
    codes = []
    for line in body.splitlines():
        line = line.strip()
        if line.startswith('"'):
            codes.append(line.split('"')[1])
    return codes


def make_tokenizer(whisper_pkg, out_dir):
    ranks = {}
    for line in open(os.path.join(whisper_pkg, "assets", "multilingual.tiktoken"), "rb"):
        tok, rank = line.split()
        ranks[base64.b64decode(tok)] = int(rank)
    enc = bytes_to_unicode()
    to_str = lambda b: "".join(enc[x] for x in b)
    vocab = {to_str(t): r for t, r in ranks.items()}
    # Each token's merge is the last step of byte-pair encoding its own bytes with the lower ranks
    # (as tiktoken would): one merge per token, the layout of Whisper's merges.txt.
    merges = []
    for t, r in sorted(ranks.items(), key=lambda x: x[1]):
        if len(t) < 2:
            continue
        parts = [bytes([b]) for b in t]
        while len(parts) > 2:
            best = min(range(len(parts) - 1), key=lambda i: ranks.get(parts[i] + parts[i + 1], 1 << 30))
            assert ranks.get(parts[best] + parts[best + 1], 1 << 30) < r
            parts[best: best + 2] = [parts[best] + parts[best + 1]]
        merges.append((r, to_str(parts[0]), to_str(parts[1])))
    langs = languages(whisper_pkg)[:99]
    specials = (["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in langs] +
                ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"] +
                [f"<|{i * 0.02:.2f}|>" for i in range(1501)])
    tok = WhisperTokenizer(vocab=vocab, merges=[(a, b) for _, a, b in merges])
    tok.add_special_tokens({"additional_special_tokens": specials[1:]})
    assert len(tok) == 51865, len(tok)
    for i, s in enumerate(specials):
        assert tok.convert_tokens_to_ids(s) == 50257 + i, (s, tok.convert_tokens_to_ids(s))
    tok.save_pretrained(out_dir)
    # transformers indents tokenizer.json; the same JSON without the indentation is a third of it
    path = os.path.join(out_dir, "tokenizer.json")
    j = json.load(open(path, encoding="utf-8"))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    return tok, langs


def sinusoids(length, channels):
    inc = np.log(10000) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1)


def make_model(langs):
    d, ffn = 16, 64
    cfg = WhisperConfig(vocab_size=51865, num_mel_bins=80, d_model=d, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
                        max_source_positions=1500, max_target_positions=448, decoder_start_token_id=50258,
                        bos_token_id=50257, eos_token_id=50257, pad_token_id=50257)
    torch.manual_seed(SEED)
    model = WhisperForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embed_positions.weight") and "encoder" in name:
                p.copy_(torch.from_numpy(sinusoids(*p.shape)))
            elif name.endswith("embed_tokens.weight"):
                p.normal_(0.0, 1.0)
            elif name.endswith("embed_positions.weight"):
                p.normal_(0.0, 1.0)
            elif name == "model.decoder.layer_norm.weight":  # spreads the logits: clear greedy choices
                p.copy_(5.0 + torch.randn_like(p))
            elif "layer_norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.normal_(0.0, 0.2)
            else:  # matrices and convolutions: unit gain, a bit more, so the audio path matters
                fan_in = p[0].numel()
                gain = 4.0 if "encoder_attn.out_proj" in name else 1.5  # the audio must steer the text
                p.normal_(0.0, gain / np.sqrt(fan_in))
        for p in model.parameters():  # what the float16 files hold
            p.copy_(p.half().float())
    gc = GenerationConfig(
        decoder_start_token_id=50258, bos_token_id=50257, eos_token_id=50257, pad_token_id=50257,
        max_length=448, no_timestamps_token_id=50363, is_multilingual=True,
        lang_to_id={f"<|{c}|>": 50259 + i for i, c in enumerate(langs)},
        task_to_id={"transcribe": 50359, "translate": 50358},
        # openai-whisper's non-speech symbols for the multilingual vocabulary, and " " + end at the start
        suppress_tokens=[1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359, 503, 522,
                         542, 873, 893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536, 3846,
                         3961, 4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428, 10929, 11938, 12033, 12331, 12562, 13793,
                         14157, 14635, 15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161, 26435,
                         28279, 29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254, 50258, 50358, 50359, 50360,
                         50361, 50362],
        begin_suppress_tokens=[220, 50257],
        alignment_heads=[[1, 0], [1, 1]],
        max_initial_timestamp_index=50,
        return_timestamps=False,
    )
    model.generation_config = gc
    return model


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def goldens(model, tok, langs):
    fe = WhisperFeatureExtractor(feature_size=80)
    out = []
    id_to_lang = {50259 + i: c for i, c in enumerate(langs)}
    for clip, lang, task, ts in CASES:
        audio = read_wav(CLIPS[clip])
        feats = fe(audio, sampling_rate=16000, return_tensors="pt").input_features
        with torch.no_grad():
            enc = model.model.encoder(feats).last_hidden_state
            sot_logits = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([[50258]])).logits[0, -1]
            lang_ids = sorted(id_to_lang)
            lang_logits = sot_logits[lang_ids]
            top2 = torch.topk(lang_logits, 2).values
            detected = id_to_lang[lang_ids[int(torch.argmax(lang_logits))]]
            r = model.generate(feats, language=lang, task=task, return_timestamps=ts, max_new_tokens=MAX_NEW_TOKENS,
                               do_sample=False, num_beams=1, output_scores=True, return_dict_in_generate=True)
        if ts:  # with timestamps: the one segment's own generate() result
            r = r["segments"][0][0]["result"]
        seq, scores = r["sequences"].reshape(-1).tolist(), r["scores"]
        gaps = []
        for s in scores:
            v = torch.topk(s.reshape(-1).float(), 2).values
            gaps.append(float(v[0] - v[1]))
        prompt = [50258, 50259 + langs.index(lang or detected), 50359 if task == "transcribe" else 50358]
        if not ts:
            prompt.append(50363)
        # generate() returns the start sequence in front of the sampled tokens
        assert seq[: len(prompt)] == prompt, (seq, prompt)
        toks = seq[len(prompt):]
        case = {"clip": clip, "language": lang, "task": task, "timestamps": ts, "detected_language": detected,
                "language_top2_gap": float(top2[0] - top2[1]), "prompt": prompt, "tokens": toks,
                "min_top2_gap": min(gaps), "text": tok.decode(toks, skip_special_tokens=False)}
        print(json.dumps({k: v for k, v in case.items() if k != "tokens"}), len(toks), "tokens")
        out.append(case)
    return out


def write_ggml(hf_dir, model, mel_filters, path):
    # convert-h5-to-ggml.py's layout: hparams, mel filters, vocab.json tokens as raw bytes, tensors.
    hp = json.load(open(os.path.join(hf_dir, "config.json")))
    tok = json.load(open(os.path.join(hf_dir, "tokenizer.json")))["model"]["vocab"]
    dec = {v: k for k, v in bytes_to_unicode().items()}
    conv_map = {
        "self_attn.k_proj": "attn.key", "self_attn.q_proj": "attn.query", "self_attn.v_proj": "attn.value",
        "self_attn.out_proj": "attn.out", "self_attn_layer_norm": "attn_ln", "encoder_attn.q_proj": "cross_attn.query",
        "encoder_attn.v_proj": "cross_attn.value", "encoder_attn.out_proj": "cross_attn.out",
        "encoder_attn_layer_norm": "cross_attn_ln", "fc1": "mlp.0", "fc2": "mlp.2", "final_layer_norm": "mlp_ln",
        "encoder.layer_norm.bias": "encoder.ln_post.bias", "encoder.layer_norm.weight": "encoder.ln_post.weight",
        "encoder.embed_positions.weight": "encoder.positional_embedding", "decoder.layer_norm.bias": "decoder.ln.bias",
        "decoder.layer_norm.weight": "decoder.ln.weight", "decoder.embed_positions.weight": "decoder.positional_embedding",
        "decoder.embed_tokens.weight": "decoder.token_embedding.weight",
    }
    with open(path, "wb") as f:
        f.write(struct.pack("i", 0x67676D6C))
        for k in ("vocab_size", "max_source_positions", "d_model", "encoder_attention_heads", "encoder_layers",
                  "max_target_positions", "d_model", "decoder_attention_heads", "decoder_layers", "num_mel_bins"):
            f.write(struct.pack("i", hp[k]))
        f.write(struct.pack("i", 1))  # f16
        f.write(struct.pack("ii", *mel_filters.shape))
        f.write(mel_filters.astype("<f4").tobytes())
        f.write(struct.pack("i", len(tok)))
        for key, _ in sorted(tok.items(), key=lambda x: x[1]):
            text = bytes(dec[c] for c in key)
            f.write(struct.pack("i", len(text)))
            f.write(text)
        for src, t in model.state_dict().items():
            if src == "proj_out.weight":
                continue
            nn = src.split(".")[1:]
            if nn[1] == "layers":
                nn[1] = "blocks"
                inner = ".".join(nn[3:-1])
                mapped = ("attn.key" if nn[0] == "encoder" else "cross_attn.key") if inner == "encoder_attn.k_proj" else conv_map[inner]
                name = ".".join(nn[:3] + [mapped] + nn[-1:])
            else:
                name = ".".join(nn)
                name = conv_map.get(name, name)
            data = t.squeeze().numpy().astype(np.float16)
            if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
                data = data.reshape(data.shape[0], 1)
            ftype = 1
            if data.ndim < 2 or name in ("encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding",
                                         "decoder.positional_embedding"):
                data = data.astype(np.float32)
                ftype = 0
            b = name.encode()
            f.write(struct.pack("iii", data.ndim, len(b), ftype))
            for i in range(data.ndim):
                f.write(struct.pack("i", data.shape[data.ndim - 1 - i]))
            f.write(b)
            f.write(np.ascontiguousarray(data).tobytes())


def main():
    whisper_pkg = sys.argv[1]
    hf_dir, ct2_dir = os.path.join(OUT, "hf"), os.path.join(OUT, "ct2")
    for d in (hf_dir, ct2_dir):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(hf_dir)
    tok, langs = make_tokenizer(whisper_pkg, hf_dir)
    model = make_model(langs)
    cases = goldens(model, tok, langs)
    model.half().save_pretrained(hf_dir)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(hf_dir)
    model.float()

    import ctranslate2.converters
    ctranslate2.converters.TransformersConverter(hf_dir).convert(ct2_dir, quantization="float16", force=True)

    with np.load(os.path.join(whisper_pkg, "assets", "mel_filters.npz")) as f:
        filters = f["mel_80"]
    write_ggml(hf_dir, model, filters, os.path.join(OUT, "ggml-random.bin"))
    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        json.dump({"max_new_tokens": MAX_NEW_TOKENS, "seed": SEED, "cases": cases}, f, indent=1)
    for root, _, files in os.walk(OUT):
        for n in files:
            print(os.path.relpath(os.path.join(root, n), OUT), os.path.getsize(os.path.join(root, n)))


if __name__ == "__main__":
    main()
