#!/usr/bin/env python3
"""NVIDIA NeMo's own CPU inference as a peer of parakeet_bench: an EncDecRNNTBPEModel with TDT loss
and decoding, built with NeMo's classes from the configs in tests/reference/make_parakeet_common.py
at parakeet-tdt-0.6b-v2's shape (128 mels, dw_striding x8 with 256 channels, 24 layers of 1024,
8 heads, ff 4096, conv kernel 9, rel_pos attention with untied biases and xscaling, a 2-layer LSTM
prediction network of 640, joint 640, 1024 tokens + blank, durations 0..4, max_symbols 10), over
the same synthetic audio as parakeet_bench (or a 16-bit PCM wav).

Weights: parakeet_torch.py's recipe (uniform with variance 1/fan_in, residual branch outputs at
gain 0.2, the prediction network's joint projection at 0.1, the blank logit raised by --blank-bias,
duration 0 lowered by 4). They are drawn by parakeet_torch.build() into transformers'
ParakeetForTDT and copied into the NeMo model through the inverse of transformers'
convert_nemo_to_hf name mapping (tests/reference/make_parakeet_hf.py), so this model holds exactly
the transformers peer's weights (and both draw them as parakeet_bench does, from another generator:
compare tok/s with vrun, not token counts). The tokenizer is a 1024-piece SentencePiece model
trained on the spot (make_parakeet_common.train_tokenizer); the text is meaningless.

It prints two rows in parakeet_bench's format, float32 on the CPU, torch.set_num_threads(--threads):
  "nemo encoder f32"                  the preprocessor (NeMo's log-mel features), the encoder and
                                      the joint's encoder projection over the whole file, all
                                      --batch streams in one tensor (they have the same length);
  "nemo transcribe greedy_batch f32"  model.transcribe(list of arrays, batch_size=--batch), NeMo's
                                      whole pipeline as a user calls it (its dataloader, features,
                                      encoder, greedy TDT decoding): "encode s" is the time spent
                                      in its preprocessor and encoder calls, "decode s" the rest.
Decoding is the config's default, strategy "greedy_batch" (NeMo's label-looping batched greedy
TDT decoder; the CUDA-graph variant does not apply on the CPU). Attention is what the released
checkpoint's config gives: full rel_pos attention over the whole file (no chunking), manual
attention (use_pytorch_sdpa false, NeMo's default). On this 24-GiB machine 600 s (7500 encoder
frames) fits: see the peak RSS line on stderr. --attention local switches to NVIDIA's long-audio
setting (change_attention_model("rel_pos_local_attn", [128, 128]) and
change_subsampling_conv_chunking_factor(1)), which attends to 128 frames each side only and so
computes something else than the full-attention model; its rows are named "nemo encoder f32 local"
and "nemo greedy_batch f32 local". --sdpa sets use_pytorch_sdpa (torch's scaled_dot_product_attention
with the position term as its mask; rows named "... sdpa").
Both timed calls run under torch.inference_mode() on a model in eval() (transcribe() is itself an
inference_mode function), after an untimed pass over 10 s (--warmup 0: none).

    parakeet_nemo.py [--seconds 600] [--threads N] [--batch N] [--audio FILE.wav]
                     [--blank-bias 1.4] [--warmup 1] [--attention full|local] [--sdpa] [--no-encoder] [--profile]
Exit status 2 when NeMo (or transformers' ParakeetForTDT, used to draw the weights) is missing,
1 on any other failure.
"""
import contextlib
import os
import resource
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "tests", "reference")))
sys.path.insert(0, HERE)
import parakeet_torch as pt  # noqa: E402

# NeMo and its dependencies print to stdout; the table goes to the real stdout only.
ROWS = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr


def parse():
    p = pt.arguments(__doc__.split("\n\n")[0])
    p.add_argument("--attention", choices=("full", "local"), default="full",
                   help="full: rel_pos over the whole file (the checkpoint's own); local: rel_pos_local_attn [128, 128]")
    p.add_argument("--sdpa", action="store_true",
                   help="use_pytorch_sdpa: torch's scaled_dot_product_attention with the position term as its mask")
    p.add_argument("--no-encoder", action="store_true", help="the transcribe row only")
    p.add_argument("--profile", action="store_true",
                   help="the encoder-only pass under torch.profiler: its top ops by CPU time on stderr "
                        "(compare with parakeet_bench under VRUN_OP_STATS=1)")
    return pt.parsed(p)


def import_nemo():
    try:
        if pt.np is None:
            import numpy  # noqa: F401  (raises the ImportError to report)
        import torch  # noqa: F401
        import nemo
        from nemo.collections.asr.models import EncDecRNNTBPEModel  # noqa: F401
        import omegaconf  # noqa: F401
        import sentencepiece  # noqa: F401
    except ImportError as e:
        print(f"parakeet_nemo: {e} (needs nemo_toolkit[asr]: tests/reference/setup_nemo_venv.sh)", file=sys.stderr)
        sys.exit(2)
    return nemo


def build(torch, tok_dir, blank_bias):
    """The NeMo model at the 0.6B shape with parakeet_torch.build()'s weights."""
    from nemo.collections.asr.models import EncDecRNNTBPEModel
    from omegaconf import OmegaConf
    import make_parakeet_common as pc
    import make_parakeet_hf as hfconv
    tf = pt.import_classes()  # exits 2 without ParakeetForTDT
    shape = dict(d_model=pt.D, n_layers=pt.LAYERS, n_heads=pt.HEADS, sub_channels=pt.CHANNELS, feat_in=pt.MELS,
                 pred_hidden=pt.PRED, pred_layers=pt.PRED_LAYERS, joint_hidden=pt.PRED, vocab=pt.VOCAB)
    assert list(pc.DURATIONS) == list(pt.DURATIONS)
    cfg = pc.tdt_config(pc.train_tokenizer(tok_dir, pt.VOCAB), shape)
    assert cfg["encoder"]["ff_expansion_factor"] * pt.D == pt.FF and cfg["encoder"]["conv_kernel_size"] == pt.KERNEL
    model = EncDecRNNTBPEModel(cfg=OmegaConf.create(cfg))
    hf = pt.build(tf, torch, torch.device("cpu"), blank_bias).state_dict()
    mapping = hfconv.NEMO_TO_HF + hfconv.NEMO_TO_HF_TDT
    used = set()
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if name.startswith("preprocessor.") or name.endswith(("num_batches_tracked", "pos_enc.pe")):
                continue  # mel filters and window, the positional table: made by NeMo
            key = hfconv.convert_key(name, mapping)
            if key not in hf or hf[key].shape != t.shape:
                raise RuntimeError(f"NeMo {name} {tuple(t.shape)} has no counterpart in ParakeetForTDT "
                                   f"({key}: {tuple(hf[key].shape) if key in hf else 'absent'})")
            t.copy_(hf[key])
            used.add(key)
    left = [k for k in hf if k not in used and not k.endswith(("num_batches_tracked", "inv_freq"))]
    if left:
        raise RuntimeError(f"ParakeetForTDT weights not copied: {left[:5]}")
    if len(pc.labels(model)) != pt.VOCAB:
        raise RuntimeError(f"the tokenizer has {len(pc.labels(model))} labels, wanted {pt.VOCAB}")
    return model.eval()


def main():
    a = parse()
    nemo = import_nemo()
    import torch
    from omegaconf import open_dict
    from nemo.utils import logging as nemo_logging
    nemo_logging.set_verbosity(nemo_logging.ERROR)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    threads = torch.get_num_threads()
    desc = f"cpu (nemo {nemo.__version__})"
    audio = pt.streams(a)
    audio_s = a.seconds * a.batch

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tok_dir:
        model = build(torch, tok_dir, a.blank_bias)
    suffix = ""
    if a.attention == "local":
        model.change_attention_model("rel_pos_local_attn", [128, 128])
        model.change_subsampling_conv_chunking_factor(1)
        suffix = " local"
    if a.sdpa:
        for m in model.encoder.modules():  # the encoder and each layer's attention read the flag
            if hasattr(m, "use_pytorch_sdpa"):
                m.use_pytorch_sdpa = True
        with open_dict(model.cfg):
            model.cfg.encoder.use_pytorch_sdpa = True
        suffix += " sdpa"
    model.preprocessor.featurizer.dither = 0.0  # transcribe() does the same; eval() already skips it
    model.preprocessor.featurizer.pad_to = 0
    strategy = model.cfg.decoding.strategy
    print(f"random parakeet-tdt-0.6b-v2-shaped NeMo EncDecRNNTBPEModel: "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, made in "
          f"{time.perf_counter() - t0:.1f} s (nemo {nemo.__version__}, torch {torch.__version__}, {threads} threads, "
          f"decoding {strategy}, attention {model.cfg.encoder.self_attention_model} "
          f"{list(model.cfg.encoder.att_context_size)}, use_pytorch_sdpa "
          f"{model.cfg.encoder.get('use_pytorch_sdpa', False)})", file=sys.stderr)

    def encoder(xs):
        # transcribe() ends with the encoder unfrozen, which puts it back in training mode (dropout,
        # batch statistics): the model is put in eval mode again before every encoder-only pass.
        model.eval()
        x = torch.from_numpy(pt.np.stack(xs))
        feats, flen = model.preprocessor(input_signal=x, length=torch.full((len(xs),), x.shape[1]))
        enc, elen = model.encoder(audio_signal=feats, length=flen)
        return model.joint.project_encoder(enc.transpose(1, 2))

    def transcribe(xs):
        out = model.transcribe(list(xs), batch_size=len(xs), return_hypotheses=True, num_workers=0, verbose=False)
        if isinstance(out, tuple):  # (best, all) in some versions
            out = out[0]
        return out

    # The time transcribe() spends in the preprocessor and the encoder (hooks around both calls).
    spans, start = [], []
    model.preprocessor.register_forward_pre_hook(lambda *_: start.append(time.perf_counter()))
    model.encoder.register_forward_hook(lambda *_: spans.append(time.perf_counter() - start.pop()))

    header = ["model", "device", "threads", "batch", "audio s", "wall s", "RTFx", "encode s", "decode s", "tokens",
              "tok/s"]
    widths = [34, 30, 7, 5, 8, 8, 8, 8, 8, 7, 6]
    print("| " + " | ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))) + " |",
          file=ROWS)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|", file=ROWS, flush=True)

    def row(*args):
        with contextlib.redirect_stdout(ROWS):
            pt.row(*args)

    model.eval()
    with torch.inference_mode():
        if a.warmup:
            w = [pt.synthetic_audio(160000, 7)]
            if not a.no_encoder:
                encoder(w)
            transcribe(w)
        if not a.no_encoder:
            prof = torch.profiler.profile(record_shapes=True) if a.profile else contextlib.nullcontext()
            with prof:
                t = time.perf_counter()
                out = encoder(audio)
                enc_s = time.perf_counter() - t
            if a.profile:
                print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=30,
                                                                         max_name_column_width=40,
                                                                         max_shapes_column_width=90), file=sys.stderr)
            if not torch.isfinite(out).all():
                print("parakeet_nemo: encoder output is not finite", file=sys.stderr)
                return 1
            del out
            row(f"nemo encoder f32{suffix}", desc, threads, a.batch, audio_s, enc_s, enc_s, None, None)
            print(f"encoder: peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB",
                  file=sys.stderr)
        spans.clear()
        t = time.perf_counter()
        hyps = transcribe(audio)
        wall = time.perf_counter() - t
    if len(spans) != 1 or len(hyps) != a.batch:
        print(f"parakeet_nemo: transcribe() made {len(spans)} encoder calls and {len(hyps)} hypotheses "
              f"for {a.batch} streams", file=sys.stderr)
    tokens = sum(len(h.y_sequence) for h in hyps)
    enc_s = sum(spans)
    name = f"nemo {strategy} f32{suffix}" if suffix else f"nemo transcribe {strategy} f32"  # fits the column
    row(name, desc, threads, a.batch, audio_s, wall, enc_s, wall - enc_s, tokens)
    print(f"transcribe: {tokens} tokens, first stream's text starts {hyps[0].text[:60]!r}; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    pt.run(main, "parakeet_nemo")
