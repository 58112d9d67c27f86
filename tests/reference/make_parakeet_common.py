"""Shared pieces of the Parakeet reference scripts: clips, tokenizer, NeMo configs, and a greedy
decode that records the top-2 gap of every choice (the goldens themselves come from NeMo's own
transcribe(); this decode only measures how far each choice is from a tie, and is checked to give
the same tokens)."""
import os
import wave

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data", "parakeet"))
TESTDATA = os.path.normpath(os.path.join(HERE, "..", "data"))
PS = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-{}.wav"

# name -> wav path relative to tests/data. short_0p62 and long_concat are made by make_clips().
CLIPS = {
    "librivox_0880": "audio/speech_0880.wav",
    "librivox_0930": "audio/speech_0930.wav",
    "synth": "audio/synth.wav",
    "espeak_slow": "whisper/espeak_slow.wav",
    "espeak_fast": "whisper/espeak_fast.wav",
    "short_0p62": "parakeet/short_0p62.wav",
    "long_concat": "parakeet/long_concat.wav",
}

# Tokenizer training text: plain English with punctuation and capitals (as Parakeet emits), plus a
# few non-ASCII words whose characters stay out of the vocabulary and so decode through byte pieces.
TEXT = """And Mr. John Dashwood had then leisure to consider how much there might be prudently in his power to do for them.
He was not an ill-disposed young man, unless to be rather cold-hearted and rather selfish is to be ill-disposed.
Had he married a more amiable woman, he might have been made still more respectable than he was.
He might even have been made amiable himself; for he was very young when he married, and very fond of his wife.
The quick brown fox jumps over the lazy dog near the river bank.
Please call Stella and ask her to bring these things with her from the store.
Six spoons of fresh snow peas, five thick slabs of blue cheese, and maybe a snack for her brother Bob.
We also need a small plastic snake and a big toy frog for the kids.
She can scoop these things into three red bags, and we will go meet her Wednesday at the train station.
Go forward ten meters, then turn left and stop.
The numbers are one, two, three, four, five, six, seven, eight, nine and ten.
Something happened on the way to the market on Monday morning.
It is 8:45 a.m. in New York, and the meeting starts at 9 o'clock.
Where are you going? I don't know, but I'll be back by Friday!
Our café serves crème brûlée, naïve jalapeño salsa, and a smörgåsbord — all for 12 €.
In Zürich and São Paulo, people said "déjà vu" at the façade.
Speech recognition turns audio into text, one word at a time.
The model listens to the signal, predicts a token, and decides how many frames to skip.
"""


def read_wav(path):
    import soundfile as sf
    x, sr = sf.read(path, dtype="float32")
    assert sr == 16000 and x.ndim == 1, path
    return x


def write_wav16(path, x):
    pcm = np.clip(np.round(x * 32768.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm.tobytes())


def make_clips():
    """short_0p62: 9,999 samples (0.62 s, not a whole number of 10 ms hops) of LibriVox 0880 from
    0.5 s on. long_concat: LibriVox 0870, 0890, 0920, 0880, 0930, each followed by 0.5 s of
    silence (27.2 s). Both read from Debian's pocketsphinx-testdata and written as 16-bit PCM."""
    os.makedirs(DATA, exist_ok=True)
    x = read_wav(PS.format("0880"))
    write_wav16(os.path.join(DATA, "short_0p62.wav"), x[8000:8000 + 9999])
    parts = []
    for n in ("0870", "0890", "0920", "0880", "0930"):
        parts += [read_wav(PS.format(n)), np.zeros(8000, dtype=np.float32)]
    write_wav16(os.path.join(DATA, "long_concat.wav"), np.concatenate(parts))


def load_clip(name):
    path = os.path.join(TESTDATA, CLIPS[name])
    if not os.path.exists(path):
        make_clips()
    return read_wav(path)


def train_tokenizer(out_dir, vocab_size):
    """SentencePiece unigram with byte fallback (all 256 <0xNN> pieces are in the vocabulary),
    <unk> = 0, <pad> = 1 (transformers' TDT conversion looks the pad id up in the labels), no
    bos/eos. Writes the three files NeMo's 'bpe' tokenizer directory holds. Vocabularies larger
    than TEXT can fill also learn from the tokenizer tests' corpus."""
    import sentencepiece as spm
    os.makedirs(out_dir, exist_ok=True)
    txt = os.path.join(out_dir, "text.txt")
    with open(txt, "w", encoding="utf-8") as f:
        # Repeated so that the trainer sees enough sentences to fill the vocabulary.
        for _ in range(4):
            f.write(TEXT)
        if vocab_size > 384:
            with open(os.path.join(TESTDATA, "tokenizer", "corpus.txt"), encoding="utf-8") as c:
                f.write(c.read())
    spm.SentencePieceTrainer.train(
        input=txt, model_prefix=os.path.join(out_dir, "tokenizer"), vocab_size=vocab_size, model_type="unigram",
        byte_fallback=True, character_coverage=0.98, unk_id=0, pad_id=1, bos_id=-1, eos_id=-1,
        hard_vocab_limit=False, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "tokenizer.model"))
    assert sp.get_piece_size() == vocab_size, f"tokenizer has {sp.get_piece_size()} pieces, wanted {vocab_size}"
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        for i in range(sp.get_piece_size()):
            f.write(sp.id_to_piece(i) + "\n")
    return out_dir


def preprocessor_config(feat_in):
    return {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor", "sample_rate": 16000,
            "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01, "window": "hann",
            "features": feat_in, "n_fft": 512, "log": True, "frame_splicing": 1, "dither": 1e-05, "pad_to": 0,
            "pad_value": 0.0}


def encoder_config(s):
    return {"_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": s["feat_in"], "feat_out": -1,
            "n_layers": s["n_layers"], "d_model": s["d_model"], "subsampling": "dw_striding", "subsampling_factor": 8,
            "subsampling_conv_channels": s["sub_channels"], "causal_downsampling": False, "ff_expansion_factor": 4,
            "self_attention_model": "rel_pos", "n_heads": s["n_heads"], "att_context_size": [-1, -1],
            "att_context_style": "regular", "xscaling": True, "untie_biases": True, "pos_emb_max_len": 5000,
            "conv_kernel_size": 9, "conv_norm_type": "batch_norm", "conv_context_size": None, "dropout": 0.1,
            "dropout_pre_encoder": 0.1, "dropout_emb": 0.0, "dropout_att": 0.1, "stochastic_depth_drop_prob": 0.0,
            "stochastic_depth_mode": "linear", "stochastic_depth_start_layer": 1}


def spec_augment_config():
    return {"_target_": "nemo.collections.asr.modules.SpectrogramAugmentation", "freq_masks": 2, "time_masks": 10,
            "freq_width": 27, "time_width": 0.05}


DURATIONS = [0, 1, 2, 3, 4]


def dataset_configs():
    """Empty dataset sections as released checkpoints carry them (transcribe() reads validation_ds)."""
    ds = {"manifest_filepath": None, "sample_rate": 16000, "batch_size": 16, "shuffle": False,
          "use_start_end_token": False, "num_workers": 0, "pin_memory": False}
    return {"train_ds": dict(ds, shuffle=True), "validation_ds": ds, "test_ds": dict(ds)}


def tdt_config(tok_dir, s):
    return {
        "sample_rate": 16000,
        "model_defaults": {"enc_hidden": s["d_model"], "pred_hidden": s["pred_hidden"],
                           "joint_hidden": s["joint_hidden"], "tdt_durations": DURATIONS,
                           "num_tdt_durations": len(DURATIONS)},
        **dataset_configs(),
        "tokenizer": {"dir": tok_dir, "type": "bpe"},
        "preprocessor": preprocessor_config(s["feat_in"]),
        "spec_augment": spec_augment_config(),
        "encoder": encoder_config(s),
        "decoder": {"_target_": "nemo.collections.asr.modules.RNNTDecoder", "normalization_mode": None,
                    "random_state_sampling": False, "blank_as_pad": True,
                    "prednet": {"pred_hidden": s["pred_hidden"], "pred_rnn_layers": s["pred_layers"], "t_max": None,
                                "dropout": 0.2}},
        "joint": {"_target_": "nemo.collections.asr.modules.RNNTJoint", "log_softmax": None,
                  "preserve_memory": False, "fuse_loss_wer": True, "fused_batch_size": 4,
                  "jointnet": {"joint_hidden": s["joint_hidden"], "activation": "relu", "dropout": 0.2},
                  "num_extra_outputs": len(DURATIONS)},
        "decoding": {"strategy": "greedy_batch", "model_type": "tdt", "durations": DURATIONS,
                     "greedy": {"max_symbols": 10}},
        "loss": {"loss_name": "tdt", "tdt_kwargs": {"fastemit_lambda": 0.0, "clamp": -1.0, "durations": DURATIONS,
                                                    "sigma": 0.02, "omega": 0.1}},
    }


def ctc_config(tok_dir, s):
    return {
        "sample_rate": 16000,
        **dataset_configs(),
        "tokenizer": {"dir": tok_dir, "type": "bpe"},
        "preprocessor": preprocessor_config(s["feat_in"]),
        "spec_augment": spec_augment_config(),
        "encoder": encoder_config(s),
        "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoder", "feat_in": s["d_model"],
                    "num_classes": -1, "vocabulary": []},
        "decoding": {"strategy": "greedy_batch"},
    }


@torch.no_grad()
def features(model, audio):
    x = torch.from_numpy(audio)[None]
    feats, flen = model.preprocessor(input_signal=x, length=torch.tensor([x.shape[1]]))
    return feats, flen


@torch.no_grad()
def encode(model, audio):
    feats, flen = features(model, audio)
    enc, elen = model.encoder(audio_signal=feats, length=flen)
    return feats, flen, enc, elen


def labels(model):
    """The vocabulary as the checkpoint's config lists it (the blank id is its length)."""
    return list(model.cfg.labels) if "labels" in model.cfg else list(model.cfg.decoder.vocabulary)


@torch.no_grad()
def tdt_greedy(model, enc, elen):
    """Greedy TDT over one utterance, following NeMo's rules (FORMATS.md). Returns the emitted
    (token, frame, duration) triples, the token and duration logits of every choice (float64
    arrays [choices, classes]), the joint's hidden activations that produced them, and how often
    max_symbols forced a step."""
    blank = len(labels(model))
    durations = list(model.cfg.decoding.durations)
    max_symbols = int(model.cfg.decoding.greedy.max_symbols)
    f = model.joint.project_encoder(enc.transpose(1, 2))  # (1, T, H)
    g, state = model.decoder.predict(None, None, add_sos=False, batch_size=1)
    emitted, rows, hidden, max_hits = [], [], [], 0
    hook = model.joint.joint_net[-1].register_forward_pre_hook(
        lambda _m, inp: hidden.append(inp[0].reshape(-1).double().numpy()))
    t, symbols, T = 0, 0, int(elen[0])
    while t < T:
        logits = model.joint.joint_after_projection(f[:, t:t + 1], model.joint.project_prednet(g))[0, 0, 0]
        rows.append(logits.double().numpy())
        k, d = int(logits[:blank + 1].argmax()), durations[int(logits[blank + 1:].argmax())]
        if k == blank:
            t += max(d, 1)
            symbols = 0
            continue
        emitted.append((k, t, d))
        g, state = model.decoder.predict(torch.tensor([[k]]), state, add_sos=False, batch_size=1)
        symbols += 1
        if d > 0:
            t += d
            symbols = 0
        elif symbols >= max_symbols:
            t += 1
            symbols = 0
            max_hits += 1
    hook.remove()
    rows = np.stack(rows)
    return emitted, rows[:, :blank + 1], rows[:, blank + 1:], np.stack(hidden), max_hits


def min_gap(rows):
    top = np.sort(rows, axis=1)[:, -2:]
    return float((top[:, 1] - top[:, 0]).min())


def tdt_decision_stats(model, encs):
    """encs: [(encoder output, length)] of the clips. Returns the summary, the logits of every
    choice (token rows, duration rows) over all clips and the joint activations behind them."""
    tok_rows, dur_rows, hidden, tokens, durs, max_hits, emitted_total = [], [], [], set(), set(), 0, 0
    for enc, elen in encs:
        emitted, tr, dr, hd, mh = tdt_greedy(model, enc, elen)
        tok_rows.append(tr)
        dur_rows.append(dr)
        hidden.append(hd)
        max_hits += mh
        emitted_total += len(emitted)
        tokens |= {e[0] for e in emitted}
        durs |= {e[2] for e in emitted}
    tok_rows, dur_rows, hidden = np.concatenate(tok_rows), np.concatenate(dur_rows), np.concatenate(hidden)
    s = {"choices": len(tok_rows), "emitted": emitted_total, "distinct_tokens": len(tokens),
         "distinct_durations": len(durs), "max_symbols_hits": max_hits,
         "min_gap_token": min_gap(tok_rows), "min_gap_duration": min_gap(dur_rows)}
    return s, tok_rows, dur_rows, hidden


@torch.no_grad()
def ctc_logits(model, enc, elen):
    return model.decoder(encoder_output=enc)[0, :int(elen[0])].double().numpy()  # (T, V+1)


def ctc_decision_stats(model, encs):
    rows = np.concatenate([ctc_logits(model, enc, elen) for enc, elen in encs])
    hidden = np.concatenate([enc[0, :, :int(elen[0])].T.double().numpy() for enc, elen in encs])
    blank = rows.shape[1] - 1
    ids = rows.argmax(1)
    s = {"choices": len(rows), "non_blank": int((ids != blank).sum()),
         "distinct_tokens": len(set(ids.tolist()) - {blank}), "min_gap_token": min_gap(rows)}
    return s, rows, hidden


def widen_gaps(rows, hidden, bound, cap=1.0):
    """A small change (dW, db) of the output layer that keeps every row's argmax and maximises the
    smallest top-2 gap over all rows: the linear program max t subject to
    (z[w] + dz[w]) - (z[j] + dz[j]) >= t for every row and every close competitor j, where
    dz = dW h + db, |dW| <= bound / (2 mean |h|_1), |db| <= bound / 2 (so |dz| <= bound on an
    average row); every competitor that such a change could bring to the top is constrained.
    No greedy choice changes, so the decoding path, and with it every row, stays the same.
    Returns dW [classes, hidden], db [classes] and t."""
    import scipy.sparse as sp
    from scipy.optimize import linprog
    n, c = rows.shape
    hdim = hidden.shape[1]
    w = rows.argmax(1)
    margin = rows[np.arange(n), w][:, None] - rows
    l1 = np.abs(hidden).sum(1)
    bw = bound / (2 * l1.mean())
    reach = bw * l1.max() + bound / 2  # the largest change of one logit
    ii, jj = np.nonzero((margin < 2 * reach + cap) & (np.arange(c)[None, :] != w[:, None]))
    m = len(ii)
    nv = c * hdim + c + 1  # dW row-major, db, t
    r = np.arange(m)
    cols = np.concatenate([w[ii, None] * hdim + np.arange(hdim), jj[:, None] * hdim + np.arange(hdim)], 1)
    vals = np.concatenate([-hidden[ii], hidden[ii]], 1)
    a = sp.csr_matrix((np.concatenate([vals.ravel(), -np.ones(m), np.ones(m), np.ones(m)]),
                       (np.concatenate([np.repeat(r, 2 * hdim), r, r, r]),
                        np.concatenate([cols.ravel(), c * hdim + w[ii], c * hdim + jj, np.full(m, nv - 1)]))),
                      shape=(m, nv))
    bounds = [(-bw, bw)] * (c * hdim) + [(-bound / 2, bound / 2)] * c + [(0, cap)]
    res = linprog(np.r_[np.zeros(nv - 1), -1.0], A_ub=a, b_ub=margin[ii, jj], bounds=bounds, method="highs")
    assert res.status == 0, res.message
    print(f"widen_gaps: {n} rows, {m} constraints, min gap {margin[ii, jj].min():.4g} -> {res.x[-1]:.4g}")
    return res.x[:c * hdim].reshape(c, hdim), res.x[c * hdim:c * hdim + c], float(res.x[-1])
