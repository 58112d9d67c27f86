#!/usr/bin/env python3
"""Parakeet goldens for NeMo's limited-context ("local") attention.

Loads the random-weight models of make_parakeet_models.py (tests/data/parakeet/), switches their
encoders to rel_pos_local_attn with att_context_size [W, W] (NeMo's change_attention_model, as
NeMo's own advice for long audio does with [128, 128]), and records with the same code as
make_parakeet_goldens.py: greedy TDT token ids, frames and durations, CTC ids, the encoder output
of one clip, and how far every greedy choice is from a tie. W is small so that the band cuts the
context of every clip but the shortest. The TDT model is also saved with that attention in its
config (tdt_small_local.nemo), the layout of a checkpoint trained with local attention.

  /tmp/vrun-nemo-venv/bin/python tests/reference/make_parakeet_local_goldens.py
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_parakeet_common as pc  # noqa: E402
import make_parakeet_goldens as mg  # noqa: E402

WINDOW = int(os.environ.get("VRUN_LOCAL_WINDOW", "16"))  # encoder frames on each side (80 ms each)


def main():
    from nemo.collections.asr.models import ASRModel
    torch.set_num_threads(2)
    clips = {name: pc.load_clip(name) for name in pc.CLIPS}
    paths = {name: os.path.join(pc.TESTDATA, p) for name, p in pc.CLIPS.items()}
    with open(os.path.join(pc.DATA, "goldens.json"), encoding="utf-8") as f:
        full = json.load(f)
    golden = {
        "reference": "NVIDIA NeMo greedy decoding (transcribe with timestamps=True) of the random-weight models of "
                     "tests/reference/make_parakeet_models.py after change_attention_model('rel_pos_local_attn', "
                     f"[{WINDOW}, {WINDOW}])",
        "versions": mg.versions(),
        "window": WINDOW,
    }
    for kind, make in (("tdt", mg.tdt_goldens), ("ctc", mg.ctc_goldens)):
        model = ASRModel.restore_from(os.path.join(pc.DATA, f"{kind}_small.nemo"), map_location="cpu").eval()
        model.change_attention_model(self_attention_model="rel_pos_local_attn", att_context_size=[WINDOW, WINDOW])
        model.eval()
        g = make(model, clips, paths)
        g["differs_from_full_attention"] = sorted(
            n for n, c in g["clips"].items() if c["token_ids"] != full[kind]["clips"][n]["token_ids"])
        golden[kind] = g
        if kind == "tdt":
            g["local_model"] = "tdt_small_local.nemo"
            mg_path = os.path.join(pc.DATA, "tdt_small_local.nemo")
            model.save_to(mg_path)
            again = ASRModel.restore_from(mg_path, map_location="cpu").eval()
            assert again.cfg.encoder.self_attention_model == "rel_pos_local_attn", again.cfg.encoder
            assert list(again.cfg.encoder.att_context_size) == [WINDOW, WINDOW], again.cfg.encoder
        print(f"{kind}: tokens differ from full attention on {g['differs_from_full_attention']}")
        for name, c in g["clips"].items():
            gaps = f"{c['min_gap_token']:.3g}" + (f"/{c['min_gap_duration']:.3g}" if kind == "tdt" else "")
            print(f"{kind} {name}: {len(c['token_ids'])} tokens, gaps {gaps}: {c['text']!r}")
    with open(os.path.join(pc.DATA, "goldens_local.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
