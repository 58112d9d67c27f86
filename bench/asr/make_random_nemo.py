#!/usr/bin/env python3
"""A parakeet-tdt-0.6b-v2-shaped .nemo with random weights, made with torch alone (no NeMo).

Reads a layout made by tests/reference/make_parakeet_big_layout.py (NeMo's model_config.yaml and
tokenizer files, and layout.json: every state-dict tensor's name, shape and dtype) and writes the
archive NeMo's save_to would: those files and model_weights.ckpt (torch.save of the state dict)
in a tar. The weights follow parakeet_bench --random-0.6b's recipe (uniform, variance 1/fan_in;
residual branches at gain 0.2, the prediction network's joint projection at 0.1; norms near one,
batch-norm statistics near the identity, small biases; the joint's blank logit biased by
--blank-bias and duration 0 by -4), so that a random joint still emits a few tokens a second.
The preprocessor's window and filterbank keep NeMo's values.

  python3 bench/asr/make_random_nemo.py LAYOUT_DIR OUT.nemo [--seed 1] [--blank-bias 1.4]
"""
import argparse
import io
import json
import math
import os
import tarfile

import torch

BRANCH_GAIN = 0.2
PRED_GAIN = 0.1
ZERO_DURATION_BIAS = -4.0


def fill(name, shape, gen):
    def uniform(centre, spread):
        return centre + spread * (2 * torch.rand(shape, generator=gen) - 1)

    def dense(fan_in, gain=1.0):
        return uniform(0.0, gain * math.sqrt(3.0 / fan_in))

    leaf = name.rsplit(".", 1)[-1]
    if name.endswith("num_batches_tracked"):
        return torch.zeros(shape, dtype=torch.int64)
    if "pos_bias_" in name or leaf.startswith("bias") or leaf == "running_mean":
        return uniform(0.0, 0.05 if leaf == "running_mean" else 0.02)
    if leaf == "running_var" or ("norm" in name and leaf == "weight" and len(shape) == 1):
        return uniform(1.0, 0.05)
    if name == "decoder.prediction.embed.weight":
        return uniform(0.0, 1.0)
    if leaf.startswith("weight") and len(shape) >= 2:
        fan_in = math.prod(shape[1:])
        gain = 1.0
        if any(k in name for k in ("linear2", "linear_out", "pointwise_conv2")):
            gain = BRANCH_GAIN
        elif name.startswith("joint.pred"):
            gain = PRED_GAIN
        return dense(fan_in, gain)
    if leaf == "weight":  # other 1-D weights (none in this model): near one
        return uniform(1.0, 0.05)
    raise ValueError(f"no recipe for {name} {shape}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layout")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--blank-bias", type=float, default=1.4)
    a = ap.parse_args()
    with open(os.path.join(a.layout, "layout.json")) as f:
        layout = json.load(f)
    gen = torch.Generator().manual_seed(a.seed)
    state = {}
    for e in layout:
        shape = tuple(e["shape"])
        if "values" in e:
            t = torch.tensor(e["values"], dtype=getattr(torch, e["dtype"])).reshape(shape)
        else:
            t = fill(e["name"], shape, gen).to(getattr(torch, e["dtype"]))
        state[e["name"]] = t
    bias = state["joint.joint_net.2.bias"]
    blank = state["decoder.prediction.embed.weight"].shape[0] - 1  # the vocabulary, then blank, then the durations
    bias[blank] = a.blank_bias
    bias[blank + 1] = ZERO_DURATION_BIAS
    ckpt = io.BytesIO()
    torch.save(state, ckpt)
    with tarfile.open(a.out, "w") as t:
        for name in sorted(os.listdir(a.layout)):
            if name != "layout.json":
                t.add(os.path.join(a.layout, name), arcname="./" + name)
        info = tarfile.TarInfo("./model_weights.ckpt")
        info.size = ckpt.tell()
        ckpt.seek(0)
        t.addfile(info, ckpt)
    n = sum(v.numel() for v in state.values())
    print(f"{a.out}: {len(state)} tensors, {n / 1e6:.1f}M values, {os.path.getsize(a.out) / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
