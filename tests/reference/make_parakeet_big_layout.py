#!/usr/bin/env python3
"""The layout of a parakeet-tdt-0.6b-v2-shaped NeMo checkpoint, without its 2.4 GB of weights.

NeMo builds the model (EncDecRNNTBPEModel, the shape of make_parakeet_models.py's BIG, random
initialisation) and saves it with save_to; this script keeps everything of that .nemo but the
weights: model_config.yaml and the tokenizer files as NeMo wrote them, and layout.json (every
state-dict tensor's name, shape and dtype, in NeMo's order, with the values of the
preprocessor's fixed buffers). bench/asr/make_random_nemo.py (torch
only, no NeMo) turns the layout into a .nemo with random weights where the 2.4 GB cannot be copied,
e.g. on the GPU machine.

  /tmp/vrun-nemo-venv/bin/python tests/reference/make_parakeet_big_layout.py OUT_DIR
"""
import json
import os
import sys
import tarfile
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_parakeet_common as pc  # noqa: E402
import make_parakeet_models as mm  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        tok_dir = pc.train_tokenizer(os.path.join(tmp, "tok"), mm.BIG["vocab"])
        model = mm.build_tdt(tok_dir, mm.BIG, 1000)
        layout = []
        for k, v in model.state_dict().items():
            e = {"name": k, "shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")}
            if k.startswith("preprocessor."):  # the featurizer's window and filterbank: fixed, not learned
                e["values"] = v.flatten().tolist()
            layout.append(e)
        path = os.path.join(tmp, "big.nemo")
        model.save_to(path)
        with tarfile.open(path) as t:
            for m in t.getmembers():
                name = os.path.basename(m.name)
                if m.isfile() and name != "model_weights.ckpt":
                    with open(os.path.join(out, name), "wb") as f:
                        f.write(t.extractfile(m).read())
    with open(os.path.join(out, "layout.json"), "w") as f:
        json.dump(layout, f, indent=0)
    print(f"{out}: {len(layout)} tensors, {sum(torch.Size(e['shape']).numel() for e in layout) / 1e6:.1f}M values")


if __name__ == "__main__":
    main()
