#!/usr/bin/env python3
"""PyTorch eager on the GPU for the CNNs of make_models.py, timed the way `vrun run --repeat`
times vrun: a first call, then N calls; each call from a host (numpy) input to the outputs back
in host memory ("host to host", what vrun's figure is), and also with the input already on the
GPU and the outputs left there ("on device"). fp32 is PyTorch's default (its cuDNN convolutions
may use TF32, torch.backends.cudnn.allow_tf32 = True by default); fp16 is the module in half
precision. Prints one JSON line per model, batch and precision.

    python3 torch_cnn.py DIR [--repeat 50]
DIR holds make_models.py's files (eager torchvision / yolo_style_detector modules with the
state dicts when torchvision is there, else the traced .pt files) and img224_b{1,32}.npy,
img640_b1.npy inputs (made here when missing).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load(dir_, name):
    try:
        if name == "mobilenet_v3_small":
            import torchvision
            m = torchvision.models.mobilenet_v3_small(num_classes=1000)
        else:
            sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
            from make_onnx_references import yolo_style_detector
            m = yolo_style_detector()
        m.load_state_dict(torch.load(os.path.join(dir_, name + ".state.pt")))
        return m.eval(), "eager"
    except ImportError:
        traced = os.path.join(dir_, name + ".pt")
        if not os.path.exists(traced):
            return None, "no torchvision and no traced module"
        return torch.jit.load(traced).eval(), "traced (no torchvision)"


def run_once(m, x_host, dtype, on_device):
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.no_grad():
        if on_device:
            y = m(x_host)
            torch.cuda.synchronize()
        else:
            x = torch.from_numpy(x_host).to("cuda", dtype)
            y = m(x)
            y = [v.float().cpu() for v in (y if isinstance(y, (tuple, list)) else [y])]
    return (time.perf_counter() - t) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--repeat", type=int, default=50)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = [("mobilenet_v3_small", "img224_b1.npy", (1, 3, 224, 224)), ("mobilenet_v3_small", "img224_b32.npy", (32, 3, 224, 224)),
             ("yolo_640", "img640_b1.npy", (1, 3, 640, 640))]
    for name, f, shape in cases:
        path = os.path.join(a.dir, f)
        if not os.path.exists(path):
            np.save(path, rng.standard_normal(shape, dtype=np.float32))
        x = np.load(path)
        for dtype in (torch.float32, torch.float16):
            m, kind = load(a.dir, name)
            if m is None:
                print(json.dumps({"model": name, "skipped": kind}), flush=True)
                break
            m = m.to("cuda", dtype)
            first = run_once(m, x, dtype, False)
            warm = sorted(run_once(m, x, dtype, False) for _ in range(a.repeat))
            xd = torch.from_numpy(x).to("cuda", dtype)
            dev = sorted(run_once(m, xd, dtype, True) for _ in range(a.repeat))
            print(json.dumps({"model": name, "batch": shape[0], "dtype": str(dtype).replace("torch.", ""), "module": kind,
                              "first_ms": round(first, 3), "host_to_host_median_ms": round(warm[len(warm) // 2], 3),
                              "on_device_median_ms": round(dev[len(dev) // 2], 3), "gpu": torch.cuda.get_device_name()}),
                  flush=True)


if __name__ == "__main__":
    main()
