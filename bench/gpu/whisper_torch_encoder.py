#!/usr/bin/env python3
"""The PyTorch peer of `whisper_bench --random-turbo`'s encoder: transformers' Whisper encoder with
random weights of large-v3-turbo's shape (128 mels, d 1280, 32 layers, 20 heads, FFN 5120, 1500
positions), fp16, scaled-dot-product attention, on the first CUDA GPU; W 30-s windows in one batch.
Prints ms a window (the best of 10 timed batches after 3 warm-ups, CUDA events).

    whisper_torch_encoder.py [--windows 8]
"""
import argparse
import sys

try:
    import torch
    from transformers import WhisperConfig, WhisperModel
except Exception as e:  # noqa: BLE001
    sys.exit("whisper_torch_encoder: %s" % e)

ap = argparse.ArgumentParser()
ap.add_argument("--windows", type=int, default=8)
a = ap.parse_args()
cfg = WhisperConfig(num_mel_bins=128, d_model=1280, encoder_layers=32, encoder_attention_heads=20,
                    encoder_ffn_dim=5120, decoder_layers=4, decoder_attention_heads=20, decoder_ffn_dim=5120,
                    vocab_size=51866, max_source_positions=1500)
cfg._attn_implementation = "sdpa"
torch.manual_seed(0)
enc = WhisperModel(cfg).encoder.to("cuda", torch.float16).eval()
x = torch.randn(a.windows, 128, 3000, device="cuda", dtype=torch.float16)
best = 1e30
with torch.inference_mode():
    for i in range(13):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        enc(x)
        e1.record()
        e1.synchronize()
        if i >= 3:
            best = min(best, e0.elapsed_time(e1))
print("transformers %s whisper turbo-shape encoder, fp16 sdpa, %s: %.1f ms a 30-s window (%d windows a batch: %.1f ms)" % (
    __import__("transformers").__version__, torch.cuda.get_device_name(0), best / a.windows, a.windows, best))
