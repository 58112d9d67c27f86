#!/usr/bin/env python3
"""The PyTorch peer of parakeet_bench: transformers' Parakeet classes with random weights of
parakeet-tdt-0.6b-v2's shape (128 mels, dw_striding x8 with 256 channels, 24 layers of 1024, 8 heads,
ff 4096, conv kernel 9, a 2-layer LSTM prediction network of 640, joint 640, 1024 tokens + blank,
durations 0..4), drawn as parakeet_bench draws them (uniform with variance 1/fan_in, residual branch
outputs at gain 0.2, the prediction network's joint projection at 0.1, the blank logit raised by --blank-bias,
duration 0 lowered by 4), over the same synthetic audio (or a
16-bit PCM wav), features made by transformers' ParakeetFeatureExtractor (torch STFT on the device).

Per dtype it prints two rows in parakeet_bench's format:
  "encoder"   the FastConformer encoder (+ the joint's encoder projection) over the whole file,
              full attention (transformers does not chunk), all --batch streams in one tensor;
  "generate"  ParakeetForTDT.generate(): the encoder and then greedy TDT decoding, one Python step
              per decision as transformers implements it. RTFx = audio seconds (all streams) / wall.
The random weights are not parakeet_bench's (both draw them the same way, from different
generators), so the token counts differ; compare tok/s to see that both decoders did similar work.

    parakeet_torch.py [--seconds 600] [--device cuda|cpu] [--dtypes f32,bf16] [--batch N]
                      [--threads N] [--audio FILE.wav] [--blank-bias 1.4] [--no-generate]
Exit status 2 when transformers lacks the Parakeet classes, 1 on any other failure.
"""
import argparse
import math
import sys
import time
import warnings
import wave

try:
    import numpy as np
except ImportError:  # reported by import_classes()
    np = None

MELS, D, LAYERS, HEADS, FF, KERNEL, CHANNELS = 128, 1024, 24, 8, 4096, 9, 256
VOCAB, PRED, PRED_LAYERS, DURATIONS = 1024, 640, 2, [0, 1, 2, 3, 4]
BRANCH_GAIN = 0.2
PRED_GAIN = 0.1
ZERO_DURATION_BIAS = -4.0  # parakeet_bench's reason: no frame is decided max_symbols times over


def arguments(description):
    """A parser with the options of both torch benches (this one and parakeet_nemo.py)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--seconds", type=float, default=600.0)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--audio", help="16-bit PCM mono 16 kHz wav (tiled or cut to --seconds)")
    p.add_argument("--blank-bias", type=float, default=1.4)
    p.add_argument("--warmup", type=int, default=1, help="one untimed pass over the timed audio first")
    return p


def parsed(p):
    """The command line's arguments by p, --seconds and --batch checked."""
    a = p.parse_args()
    if a.seconds <= 0 or a.batch < 1:
        p.error("--seconds and --batch must be positive")
    return a


def parse():
    p = arguments(__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtypes", default="f32,bf16", help="comma list of f32, bf16, f16")
    p.add_argument("--no-generate", action="store_true", help="the encoder rows only")
    return parsed(p)


def import_classes():
    try:
        if np is None:
            import numpy  # noqa: F401  (raises the ImportError to report)
        import torch  # noqa: F401
        import transformers
    except ImportError as e:
        print(f"parakeet_torch: {e} (needs numpy, torch and transformers)", file=sys.stderr)
        sys.exit(2)
    missing = [n for n in ("ParakeetEncoderConfig", "ParakeetTDTConfig", "ParakeetForTDT", "ParakeetFeatureExtractor")
               if not hasattr(transformers, n)]
    if missing:
        print(f"parakeet_torch: transformers {transformers.__version__} has no {', '.join(missing)} "
              "(ParakeetForTDT arrived in transformers 5.x)", file=sys.stderr)
        sys.exit(2)
    return transformers


def synthetic_audio(n, seed):
    """parakeet_bench's synthetic audio: tones that change every half second, quieter every 2 s."""
    i = np.arange(n, dtype=np.float64)
    part = (np.arange(n) // 8000).astype(np.int64)
    f = 150.0 + 60.0 * ((part * 7 + seed) % 11) + 40.0 * np.sin(i * 1e-4)
    phase = np.cumsum(2.0 * math.pi * f / 16000.0)
    env = np.where(part % 4 == 3, 0.02, 0.3)
    noise = np.random.default_rng(seed).uniform(-1.0, 1.0, n)
    return (env * (np.sin(phase) + 0.5 * np.sin(2.0 * phase)) + 0.02 * noise).astype(np.float32)


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise ValueError(f"{path}: need 16-bit PCM mono at 16 kHz, got {w.getsampwidth() * 8}-bit, "
                             f"{w.getnchannels()} channel(s), {w.getframerate()} Hz")
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def streams(a):
    n = int(a.seconds * 16000)
    if a.audio:
        x = read_wav(a.audio)
        if x.size == 0:
            raise ValueError(f"{a.audio}: no samples")
        x = np.resize(x, n)  # tiles or cuts
        return [np.roll(x, -b * 16000 * 7) for b in range(a.batch)]
    return [synthetic_audio(n, 1000 + b) for b in range(a.batch)]


def build(tf, torch, device, blank_bias):
    enc = tf.ParakeetEncoderConfig(
        hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FF,
        conv_kernel_size=KERNEL, subsampling_factor=8, subsampling_conv_channels=CHANNELS, num_mel_bins=MELS,
        dropout=0.0, dropout_positions=0.0, layerdrop=0.0, activation_dropout=0.0, attention_dropout=0.0,
        scale_input=True, attention_bias=True, convolution_bias=True)
    cfg = tf.ParakeetTDTConfig(
        vocab_size=VOCAB + 1, decoder_hidden_size=PRED, num_decoder_layers=PRED_LAYERS, durations=DURATIONS,
        hidden_act="relu", max_symbols_per_step=10, encoder_config=enc.to_dict(), pad_token_id=VOCAB,
        blank_token_id=VOCAB)
    with torch.device(device):
        model = tf.ParakeetForTDT(cfg)
    model.generation_config.decoder_start_token_id = VOCAB
    model.generation_config.pad_token_id = VOCAB
    model.generation_config.suppress_tokens = list(range(VOCAB + 1, VOCAB + 1 + len(DURATIONS)))
    g = torch.Generator(device=device).manual_seed(1234)
    branch_out = ("o_proj.weight", "linear2.weight", "pointwise_conv2.weight")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name and name.endswith(".weight"):  # layer and batch norms
                p.uniform_(0.95, 1.05, generator=g)
            elif p.dim() == 1 or name.endswith(("bias_u", "bias_v")):
                p.uniform_(-0.02 * math.sqrt(3), 0.02 * math.sqrt(3), generator=g)
            elif name.endswith("embedding.weight"):
                p.uniform_(-1.0, 1.0, generator=g)
            else:
                fan_in = p[0].numel()
                bound = math.sqrt(3.0 / fan_in) * (BRANCH_GAIN if name.endswith(branch_out) else 1.0)
                if name.startswith("decoder.decoder_projector"):
                    bound *= PRED_GAIN
                p.uniform_(-bound, bound, generator=g)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.zero_()
            elif name.endswith("running_var"):
                b.fill_(1.0)
        model.joint.head.bias[VOCAB] = blank_bias
        model.joint.head.bias[VOCAB + 1] = ZERO_DURATION_BIAS
    return model.eval()


def encoder(model, feats, mask):
    """The encoder and the joint's encoder projection (what generate() computes before decoding)."""
    if hasattr(model, "get_audio_features"):
        return model.get_audio_features(input_features=feats, attention_mask=mask).pooler_output
    return model.encoder_projector(model.encoder(input_features=feats, attention_mask=mask).last_hidden_state)


def row(name, device, threads, batch, audio_s, wall, enc_s, dec_s, tokens):
    dec = f"{dec_s:8.2f}" if dec_s is not None else f"{'-':>8}"
    tok = f"{tokens:7d} | {tokens / audio_s:6.2f}" if tokens is not None else f"{'-':>7} | {'-':>6}"
    print(f"| {name:<34} | {device[:30]:<30} | {threads:7d} | {batch:5d} | {audio_s:8.1f} | {wall:8.2f} | "
          f"{audio_s / wall:8.1f} | {enc_s:8.2f} | {dec} | {tok} |", flush=True)


def main():
    a = parse()
    tf = import_classes()
    import torch
    # generate() sizes its buffer from the encoder length (max_symbols per frame) and says so.
    warnings.filterwarnings("ignore", message="Using the model-agnostic default")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("parakeet_torch: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 1
    device = torch.device(a.device)
    desc = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu (torch {torch.__version__})"
    threads = a.threads if a.threads > 0 else (torch.get_num_threads() if device.type == "cpu" else 0)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    try:
        fe = tf.ParakeetFeatureExtractor(feature_size=MELS)
    except ImportError as e:  # transformers' extractor needs librosa, which the GPU machine lacks
        fe = None
        print(f"parakeet_torch: no feature extractor ({str(e).strip().splitlines()[0]}): the model gets standard-normal "
              "log-mel-shaped features (10 ms frames) instead, and feature time is not counted", file=sys.stderr)

    audio = streams(a)
    audio_s = a.seconds * a.batch

    def features(xs):
        if fe is None:
            frames = max(len(x) for x in xs) // 160 + 1
            g = torch.Generator().manual_seed(5)
            feats = torch.randn(len(xs), frames, MELS, generator=g).to(device)
            return feats, torch.ones(len(xs), frames, dtype=torch.bool, device=device), 0.0
        sync()
        t = time.perf_counter()
        f = fe(xs, sampling_rate=16000, return_tensors="pt", return_attention_mask=True, device=a.device)
        sync()
        return f["input_features"].to(device), f["attention_mask"].to(device), time.perf_counter() - t

    t0 = time.perf_counter()
    model = build(tf, torch, device, a.blank_bias)
    print(f"random parakeet-tdt-0.6b-v2-shaped ParakeetForTDT: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
          f"parameters, made in {time.perf_counter() - t0:.1f} s on {desc}", file=sys.stderr)
    header = ["model", "device", "threads", "batch", "audio s", "wall s", "RTFx", "encode s", "decode s", "tokens",
              "tok/s"]
    widths = [34, 30, 7, 5, 8, 8, 8, 8, 8, 7, 6]
    print("| " + " | ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for key in a.dtypes.split(","):
        if key not in dtypes:
            print(f"parakeet_torch: dtype {key} (f32, bf16 or f16)", file=sys.stderr)
            return 1
        model.to(dtypes[key])
        with torch.inference_mode():
            feats, mask, feat_s = features(audio)
            feats = feats.to(dtypes[key])
            sync()
            if a.warmup:  # the timed shapes once (cuDNN and cuBLAS choose their kernels per shape)
                t = time.perf_counter()
                encoder(model, feats, mask)
                sync()
                first = time.perf_counter() - t
                if not a.no_generate:
                    model.generate(input_features=feats, attention_mask=mask)
                sync()
                print(f"{key}: warm-up over the timed audio: encoder {first:.3f} s", file=sys.stderr)
            t = time.perf_counter()
            out = encoder(model, feats, mask)
            sync()
            enc_s = time.perf_counter() - t
            if not torch.isfinite(out.float()).all():
                print(f"parakeet_torch: {key} encoder output is not finite", file=sys.stderr)
                return 1
            del out
            row(f"transformers encoder {key}", desc, threads, a.batch, audio_s, enc_s + feat_s, enc_s, None, None)
            if a.no_generate:
                continue
            # The encoder's share of generate(), timed inside it.
            inner = []
            encode = getattr(model, "get_audio_features", None)

            def timed_encode(*args, **kwargs):
                sync()
                t1 = time.perf_counter()
                r = encode(*args, **kwargs)
                sync()
                inner.append(time.perf_counter() - t1)
                return r

            if encode is not None:
                model.get_audio_features = timed_encode
            t = time.perf_counter()
            gen = model.generate(input_features=feats, attention_mask=mask)
            sync()
            wall = time.perf_counter() - t
            if encode is not None:
                del model.get_audio_features
            if not inner:  # an older generate() that encodes otherwise: the separate encoder time
                inner.append(enc_s)
            seq = gen.sequences[:, 1:]  # after the start token
            tokens = int((seq != VOCAB).sum())
            row(f"transformers generate {key}", desc, threads, a.batch, audio_s, wall + feat_s, sum(inner), wall - sum(inner),
                tokens)
            print(f"{key}: features {feat_s:.2f} s (counted in wall), {seq.shape[1]} decoder steps", file=sys.stderr)
    return 0


def run(entry, prog):
    """Exits with entry()'s status; a failure of the run itself as one line and status 1."""
    try:
        sys.exit(entry())
    except (ValueError, RuntimeError, OSError) as e:
        print(f"{prog}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run(main, "parakeet_torch")
