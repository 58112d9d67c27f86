#!/usr/bin/env python3
"""Tiny random-weight Llama-family checkpoints in Hugging Face layout, with PyTorch's logits.

Writes tests/data/llama/tiny_<name>/ (config.json, model.safetensors in f32, tokenizer.json,
tokenizer_config.json) and tests/data/llama/tiny_<name>_logits.json: a prompt, the greedy
continuation (10 steps) and transformers' logits after the prompt and after each generated token,
computed in float64 from the stored f32 weights.

Variants: `llama` (GQA, untied lm_head, Llama-3 "llama3" rope scaling) and `qwen2` (GQA, q/k/v
biases, tied embeddings).

    python3 -m venv /tmp/vrun-llm-venv && /tmp/vrun-llm-venv/bin/pip install torch transformers safetensors numpy
    /tmp/vrun-llm-venv/bin/python tests/reference/make_llama_reference.py
"""
import json
import os

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "llama")
VOCAB = 320
PROMPT_TEXT = "The quick brown fox jumps over the lazy dog"
STEPS = 10
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A tiny model for testing: every weight is random, every logit is checked.",
    "Numbers 0123456789 and punctuation, like commas; colons: and dots.",
] * 20


def make_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 1, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return tok


COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=0)


def variants():
    yield "llama", LlamaForCausalLM, LlamaConfig(
        **COMMON, rope_theta=10000.0, tie_word_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64})
    yield "qwen2", Qwen2ForCausalLM, Qwen2Config(**COMMON, rope_theta=1000000.0, tie_word_embeddings=True)


def randomise(model, seed):
    # Larger than the usual 0.02 init so activations and logits are O(1) and differences show.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)


def main():
    torch.set_grad_enabled(False)
    tok = make_tokenizer()
    prompt = tok.encode(PROMPT_TEXT).ids
    for seed, (name, cls, config) in enumerate(variants()):
        config._attn_implementation = "eager"
        torch.manual_seed(seed)
        model = cls(config).float().eval()
        randomise(model, 1000 + seed)
        folder = os.path.join(OUT, "tiny_" + name)
        os.makedirs(folder, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        tok.save(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"add_bos_token": False, "eos_token": "<|endoftext|>",
                       "chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"}, f, indent=1)
        for extra in ("generation_config.json",):
            path = os.path.join(folder, extra)
            if os.path.exists(path):
                os.remove(path)
        # float64 math on exactly the stored f32 weights.
        ref = model.double()
        ids = list(prompt)
        logits, past = [], None
        out = ref(torch.tensor([ids]), use_cache=True)
        for step in range(STEPS + 1):
            row = out.logits[0, -1]
            logits.append([float(v) for v in row])
            if step == STEPS:
                break
            nxt = int(torch.argmax(row))
            top2 = torch.topk(row, 2).values
            assert float(top2[0] - top2[1]) > 1e-3, "near-tie in the reference path; pick another seed"
            ids.append(nxt)
            out = ref(torch.tensor([[nxt]]), past_key_values=out.past_key_values, use_cache=True)
        with open(os.path.join(OUT, "tiny_%s_logits.json" % name), "w") as f:
            json.dump({"source": "transformers %s, float64 math on the f32 weights" % __import__("transformers").__version__,
                       "prompt": prompt, "generated": ids[len(prompt):], "logits": logits}, f)
        print(name, "prompt", prompt, "generated", ids[len(prompt):])


if __name__ == "__main__":
    main()
