#!/usr/bin/env python3
"""Parakeet goldens from NVIDIA NeMo (and transformers for the Hugging Face folders).

Reads the models that make_parakeet_models.py wrote to tests/data/parakeet/ and writes
tests/data/parakeet/goldens.json (+ features_<clip>.npy); docs/parakeet-references.md describes the
schema. Per clip: NeMo's preprocessor features (eval mode: no dither), greedy TDT token ids,
durations and token frames, word and segment timestamps and text from NeMo's own
transcribe(timestamps=True); CTC greedy ids and text; the encoder output of one clip; and the
output of transformers' ParakeetForTDT / ParakeetForCTC on the Hugging Face folders, fed NeMo's
features, which must equal NeMo's.

  /tmp/vrun-nemo-venv/bin/python tests/reference/make_parakeet_goldens.py
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_parakeet_common as pc  # noqa: E402

FIRST_FRAMES = 8       # feature frames stored inline per clip
FULL_FEATURES = ("short_0p62", "librivox_0880")  # clips whose whole feature matrix is stored as .npy
ENCODER_CLIP = "librivox_0880"
FIRST_CHOICES = 4      # joint logit rows stored for debugging


def versions():
    import nemo
    import transformers
    return {"nemo_toolkit": nemo.__version__, "transformers": transformers.__version__, "torch": torch.__version__}


@torch.no_grad()
def feature_golden(model, name, audio):
    """NeMo's featurizer run in float64 (the same code after .double()): in float32, FFT rounding
    alone moves features of bands that hold only window leakage by up to 4e-4 (the synthetic clip;
    see make_audio_goldens.py). The float32 run the models saw is compared alongside."""
    import copy
    f32, _ = pc.features(model, audio)
    featurizer = copy.deepcopy(model.preprocessor.featurizer).double()
    feats, flen = featurizer(torch.from_numpy(audio.astype(np.float64))[None], torch.tensor([len(audio)]))
    x = feats[0].numpy()  # (mels, frames), float64
    n = int(flen[0])
    v = x[:, :n].astype(np.float64)
    out = {"shape": list(x.shape), "valid_frames": n,
           "first_frames": x[:, :FIRST_FRAMES].T.tolist(),  # [frame][mel]
           "last_valid_frame": x[:, n - 1].tolist(),
           "mean_per_mel": v.mean(1).tolist(), "abs_sum": float(np.abs(v).sum()),
           "min": float(v.min()), "max": float(v.max()),
           "padding_is_zero": bool((x[:, n:] == 0).all()),
           "float32_max_abs_diff": float(np.abs(f32[0].double().numpy() - x).max())}
    if name in FULL_FEATURES:
        fn = f"features_{name}.npy"
        np.save(os.path.join(pc.DATA, fn), x.astype(np.float32))
        out["npy"] = fn
    return out


def word_list(items, key):
    return [{key: w[key], "start_offset": int(w["start_offset"]), "end_offset": int(w["end_offset"]),
             "start": round(float(w["start"]), 4), "end": round(float(w["end"]), 4)} for w in items]


def transcribe(model, paths):
    hyps = model.transcribe(paths, batch_size=1, timestamps=True, return_hypotheses=True, verbose=False)
    model.eval()  # transcribe() leaves the model in train mode
    if isinstance(hyps, tuple):
        hyps = hyps[0]
    return hyps


def tdt_goldens(model, clips, paths):
    out = {"model": "tdt_small.nemo", "hf": "tdt_small_hf", "vocab_size": len(pc.labels(model)),
           "blank_id": len(pc.labels(model)), "durations": list(model.cfg.decoding.durations),
           "max_symbols": int(model.cfg.decoding.greedy.max_symbols), "clips": {}}
    hyps = transcribe(model, [paths[n] for n in clips])
    for (name, audio), hyp in zip(clips.items(), hyps):
        _, _, enc, elen = pc.encode(model, audio)
        emitted, tok_rows, dur_rows, _, max_hits = pc.tdt_greedy(model, enc, elen)
        ids = [int(i) for i in hyp.y_sequence]
        frames = [int(t) for t in hyp.timestamp["timestep"]]
        durs = [int(d) for d in hyp.token_duration]
        assert ids == [e[0] for e in emitted], (name, ids, emitted)
        assert frames == [e[1] for e in emitted] and durs == [e[2] for e in emitted], (name, frames, durs, emitted)
        assert max_hits == 0, name
        ts = hyp.timestamp
        c = {"encoder_frames": int(elen[0]), "token_ids": ids, "token_frames": frames, "durations": durs,
             "pieces": [pc.labels(model)[i] for i in ids], "text": hyp.text,
             "words": word_list(ts.get("word", []), "word"), "segments": word_list(ts.get("segment", []), "segment"),
             "choices": len(tok_rows), "min_gap_token": pc.min_gap(tok_rows), "min_gap_duration": pc.min_gap(dur_rows)}
        if name == ENCODER_CLIP:
            c["encoder_output"] = enc[0, :, :int(elen[0])].T.tolist()  # [frame][channel]
            c["first_joint_logits"] = np.concatenate([tok_rows, dur_rows], 1)[:FIRST_CHOICES].tolist()
        out["clips"][name] = c
    return out


def ctc_goldens(model, clips, paths):
    labels = pc.labels(model)
    out = {"model": "ctc_small.nemo", "hf": "ctc_small_hf", "vocab_size": len(labels), "blank_id": len(labels),
           "clips": {}}
    hyps = transcribe(model, [paths[n] for n in clips])
    for (name, audio), hyp in zip(clips.items(), hyps):
        _, _, enc, elen = pc.encode(model, audio)
        rows = pc.ctc_logits(model, enc, elen)
        frame_ids = rows.argmax(1).tolist()
        collapsed = [k for i, k in enumerate(frame_ids) if k != len(labels) and (i == 0 or frame_ids[i - 1] != k)]
        ids = [int(i) for i in hyp.y_sequence] if len(hyp.y_sequence) and hyp.y_sequence.dim() == 1 else None
        if ids is None or len(ids) != len(collapsed):
            ids = collapsed  # some NeMo versions keep the frame-level argmax in y_sequence
        assert ids == collapsed, (name, ids, collapsed)
        ts = hyp.timestamp
        c = {"encoder_frames": int(elen[0]), "frame_ids": frame_ids, "token_ids": ids,
             "pieces": [labels[i] for i in ids], "text": hyp.text,
             "words": word_list(ts.get("word", []), "word"), "segments": word_list(ts.get("segment", []), "segment"),
             "min_gap_token": pc.min_gap(rows)}
        if name == ENCODER_CLIP:
            c["encoder_output"] = enc[0, :, :int(elen[0])].T.tolist()
        out["clips"][name] = c
    return out


@torch.no_grad()
def hf_tdt(folder, nemo_model, clips, golden):
    from transformers import ParakeetForTDT
    model = ParakeetForTDT.from_pretrained(folder).eval()
    blank, nv = model.config.blank_token_id, model.config.vocab_size
    for name, audio in clips.items():
        feats, flen = pc.features(nemo_model, audio)
        x = feats.transpose(1, 2)
        mask = (torch.arange(x.shape[1])[None] < flen[:, None]).long()
        out = model.generate(input_features=x, attention_mask=mask)
        seq, dur = out.sequences[0].tolist(), out.durations[0].tolist()
        ids, frames, durs, t = [], [], [], 0
        for s in range(1, len(seq)):  # step 0 is the decoder start token
            if seq[s] != blank and seq[s] < nv:
                ids.append(seq[s])
                frames.append(t)
                durs.append(dur[s])
            t += dur[s]
        g = golden["clips"][name]
        g["hf_token_ids"], g["hf_token_frames"], g["hf_durations"] = ids, frames, durs
        g["hf_equal"] = ids == g["token_ids"] and frames == g["token_frames"] and durs == g["durations"]
        enc = model.get_audio_features(input_features=x, attention_mask=mask).last_hidden_state[0]
        _, _, nenc, nlen = pc.encode(nemo_model, audio)
        g["hf_encoder_max_abs_diff"] = float((enc[:int(nlen[0])] - nenc[0, :, :int(nlen[0])].T).abs().max())


@torch.no_grad()
def hf_ctc(folder, nemo_model, clips, golden):
    from transformers import ParakeetForCTC
    model = ParakeetForCTC.from_pretrained(folder).eval()
    for name, audio in clips.items():
        feats, flen = pc.features(nemo_model, audio)
        x = feats.transpose(1, 2)
        mask = (torch.arange(x.shape[1])[None] < flen[:, None]).long()
        logits = model(input_features=x, attention_mask=mask).logits[0]
        g = golden["clips"][name]
        ids = logits.argmax(-1)[:g["encoder_frames"]].tolist()
        g["hf_frame_ids"] = ids
        g["hf_equal"] = ids == g["frame_ids"]


def main():
    from nemo.collections.asr.models import ASRModel
    torch.set_num_threads(2)
    clips = {name: pc.load_clip(name) for name in pc.CLIPS}
    paths = {name: os.path.join(pc.TESTDATA, p) for name, p in pc.CLIPS.items()}
    tdt = ASRModel.restore_from(os.path.join(pc.DATA, "tdt_small.nemo"), map_location="cpu").eval()
    ctc = ASRModel.restore_from(os.path.join(pc.DATA, "ctc_small.nemo"), map_location="cpu").eval()
    golden = {
        "reference": "NVIDIA NeMo greedy decoding (transcribe with timestamps=True) on the random-weight models "
                     "of tests/reference/make_parakeet_models.py; hf_* from transformers on the converted folders",
        "versions": versions(),
        "frame_seconds": 0.08,
        "clips": {n: {"path": pc.CLIPS[n], "samples": int(len(a))} for n, a in clips.items()},
        "features": {"preprocessor": dict(tdt.cfg.preprocessor), "clips": {}},
    }
    for name, audio in clips.items():
        golden["features"]["clips"][name] = feature_golden(tdt, name, audio)
    golden["tdt"] = tdt_goldens(tdt, clips, paths)
    golden["ctc"] = ctc_goldens(ctc, clips, paths)
    hf_tdt(os.path.join(pc.DATA, "tdt_small_hf"), tdt, clips, golden["tdt"])
    hf_ctc(os.path.join(pc.DATA, "ctc_small_hf"), ctc, clips, golden["ctc"])
    for kind in ("tdt", "ctc"):
        bad = [n for n, c in golden[kind]["clips"].items() if not c["hf_equal"]]
        print(f"{kind}: transformers differs from NeMo on {bad}" if bad else f"{kind}: transformers equals NeMo")
    with open(os.path.join(pc.DATA, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for name, c in golden["tdt"]["clips"].items():
        print(f"tdt {name}: {len(c['token_ids'])} tokens, gaps {c['min_gap_token']:.3g}/{c['min_gap_duration']:.3g}: "
              f"{c['text']!r}")
    for name, c in golden["ctc"]["clips"].items():
        print(f"ctc {name}: {len(c['token_ids'])} tokens, gap {c['min_gap_token']:.3g}: {c['text']!r}")


if __name__ == "__main__":
    main()
