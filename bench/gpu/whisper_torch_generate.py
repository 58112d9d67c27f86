#!/usr/bin/env python3
"""The PyTorch peer of `whisper_bench --random-turbo --batch B`: transformers' Whisper with random
weights of large-v3-turbo's shape (128 mels, d 1280, 32 encoder and 4 decoder layers, 20 heads,
51866 ids), fp16, scaled-dot-product attention, on the first CUDA GPU. B 30-s windows in one batch:
the encoder, then T greedy decoder steps with its KV cache (every window's token in one call), the
same work as the vrun bench. Prints RTFx = 30 B / wall (the best of 5 timed batches after 2 warm-ups).

    whisper_torch_generate.py [--batch 8] [--tokens 100]
"""
import argparse
import sys
import time

try:
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration
except Exception as e:  # noqa: BLE001
    sys.exit("whisper_torch_generate: %s" % e)

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--tokens", type=int, default=100)
a = ap.parse_args()
cfg = WhisperConfig(num_mel_bins=128, d_model=1280, encoder_layers=32, encoder_attention_heads=20,
                    encoder_ffn_dim=5120, decoder_layers=4, decoder_attention_heads=20, decoder_ffn_dim=5120,
                    vocab_size=51866, max_source_positions=1500, max_target_positions=448)
cfg._attn_implementation = "sdpa"
torch.manual_seed(0)
model = WhisperForConditionalGeneration(cfg).to("cuda", torch.float16).eval()
x = torch.randn(a.batch, 128, 3000, device="cuda", dtype=torch.float16)


def run():
    enc = model.model.encoder(x).last_hidden_state
    ids = torch.full((a.batch, 1), 50258, device="cuda", dtype=torch.long)
    past = None
    for _ in range(a.tokens):
        out = model(encoder_outputs=(enc,), decoder_input_ids=ids, past_key_values=past, use_cache=True)
        past = out.past_key_values
        ids = out.logits[:, -1, :50257].argmax(-1, keepdim=True)
    torch.cuda.synchronize()


best = 1e30
with torch.inference_mode():
    for i in range(7):
        t0 = time.perf_counter()
        run()
        if i >= 2:
            best = min(best, time.perf_counter() - t0)
print("transformers %s whisper turbo-shape, fp16 sdpa, %s: batch %d x %d tokens in %.3f s, RTFx %.1f" % (
    __import__("transformers").__version__, torch.cuda.get_device_name(0), a.batch, a.tokens, best, 30.0 * a.batch / best))
