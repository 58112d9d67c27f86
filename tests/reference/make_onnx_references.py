#!/usr/bin/env python3
"""ONNX test models and their reference outputs for tests/onnx.

Two steps, two interpreters:
  python3 make_onnx_references.py export   # Debian's python3-torch + python3-torchvision
      writes tests/data/onnx/<model>.onnx and <model>.<input>.npy (random weights, fixed seeds)
  VENV/bin/python make_onnx_references.py run   # a venv with onnxruntime and numpy from PyPI
      runs every model with onnxruntime (the independent runtime) and writes
      <model>.<output>.ort.npy
  VENV/bin/python make_onnx_references.py vad SILERO_WHEEL FASTER_WHISPER_WHEEL
      Silero VAD (silero_vad_16k_op15.onnx from the silero-vad wheel): onnxruntime's speech
      probability per 512-sample window, and faster-whisper's get_speech_timestamps spans on those
      probabilities, for real speech (Debian's pocketsphinx-testdata: 7.1 s, 60 s of silence,
      3.3 s: the long-pause case) and synthetic speech (espeak-ng), into tests/data/vad/.

Models: the minimal model (split into two halves, add, Linear with bias), torchvision's
MobileNetV3-small, and a YOLO-style detector (C2f blocks with Split/Concat, SPPF max-pooling,
nearest upsampling, SiLU).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "onnx")


def randomize_bn(model):
    """torchvision initialises batch norm to the identity; random statistics make folding matter."""
    import torch.nn as nn
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)


def yolo_style_detector():
    """The YOLO-style detector (C2f blocks with Split/Concat, SPPF max-pooling, nearest
    upsampling, SiLU, a dilated depthwise conv); bench/onnx builds the same one."""
    import torch
    import torch.nn as nn

    def conv(cin, cout, k=1, s=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

    class Bottleneck(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = conv(c, c, 3), conv(c, c, 3)

        def forward(self, x):
            return x + self.cv2(self.cv1(x))

    class C2f(nn.Module):
        def __init__(self, cin, cout, n=1):
            super().__init__()
            self.c = cout // 2
            self.cv1 = conv(cin, 2 * self.c)
            self.m = nn.ModuleList(Bottleneck(self.c) for _ in range(n))
            self.cv2 = conv((2 + n) * self.c, cout)

        def forward(self, x):
            y = list(self.cv1(x).split((self.c, self.c), 1))
            for m in self.m:
                y.append(m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.cv1 = conv(cin, cin // 2)
            self.cv2 = conv(cin * 2, cout)
            self.m = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))

    class Yolo(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv(3, 16, 3, 2)
            self.d1 = nn.Sequential(conv(16, 32, 3, 2), C2f(32, 32))
            self.d2 = nn.Sequential(conv(32, 64, 3, 2), C2f(64, 64, 2))
            self.d3 = nn.Sequential(conv(64, 96, 3, 2), C2f(96, 96), SPPF(96, 96))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.top = C2f(96 + 64, 64)
            self.dw = nn.Conv2d(64, 64, 3, 1, 2, dilation=2, groups=64)
            self.head_small = nn.Conv2d(64, 4 + 8, 1)
            self.head_large = nn.Conv2d(96, 4 + 8, 1)

        def forward(self, x):
            p3 = self.d2(self.d1(self.stem(x)))
            p4 = self.d3(p3)
            t = self.top(torch.cat((self.up(p4), p3), 1))
            return self.head_small(self.dw(t)), self.head_large(p4)

    return Yolo()


def export():
    import numpy as np
    import torch
    import torch.nn as nn
    import torchvision

    torch.manual_seed(0)
    np.random.seed(0)
    os.makedirs(OUT, exist_ok=True)
    manifest = {}

    def save(name, model, inputs, input_names, output_names, opset, dynamic_axes=None):
        model.eval()
        path = os.path.join(OUT, name + ".onnx")
        with torch.no_grad():
            torch.onnx.export(model, tuple(inputs), path, input_names=input_names, output_names=output_names,
                              opset_version=opset, dynamic_axes=dynamic_axes, do_constant_folding=True)
        for n, t in zip(input_names, inputs):
            np.save(os.path.join(OUT, f"{name}.{n}.npy"), t.numpy())
        manifest[name] = {"inputs": input_names, "outputs": output_names, "opset": opset}

    # The minimal model: split into two halves, add, Linear with bias (torch's addmm).
    class Seed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            a, b = torch.split(x, 8, dim=1)
            return self.fc(a + b)

    save("seed", Seed(), [torch.randn(3, 16)], ["x"], ["y"], 17, {"x": {0: "batch"}, "y": {0: "batch"}})

    mnet = torchvision.models.mobilenet_v3_small(num_classes=10)
    randomize_bn(mnet)
    save("mobilenet_v3_small", mnet, [torch.randn(2, 3, 128, 128)], ["image"], ["logits"], 14,
         {"image": {0: "batch"}, "logits": {0: "batch"}})

    yolo = yolo_style_detector()
    randomize_bn(yolo)
    save("yolo_tiny", yolo, [torch.randn(1, 3, 128, 128)], ["images"], ["p3", "p4"], 13)

    with open(os.path.join(OUT, "models.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


def error_cases():
    """Small hand-made models the importer must refuse with a clear message."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    g = helper.make_graph([helper.make_node("Det", ["x"], ["y"], name="det0")], "g", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(OUT, "unsupported_op.onnx"))

    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], vals=np.ones(4, np.float32).tobytes(), raw=True)
    w.data_location = TensorProto.EXTERNAL
    e = w.external_data.add()
    e.key, e.value = "location", "weights.bin"
    w.ClearField("raw_data")
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add0")], "g", [x], [out], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(OUT, "external_data.onnx"))


def run():
    import numpy as np
    import onnxruntime as ort

    error_cases()

    with open(os.path.join(OUT, "models.json")) as f:
        manifest = json.load(f)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    for name, m in sorted(manifest.items()):
        sess = ort.InferenceSession(os.path.join(OUT, name + ".onnx"), opts, providers=["CPUExecutionProvider"])
        feeds = {n: np.load(os.path.join(OUT, f"{name}.{n}.npy")) for n in m["inputs"]}
        outs = sess.run(m["outputs"], feeds)
        for n, o in zip(m["outputs"], outs):
            np.save(os.path.join(OUT, f"{name}.{n}.ort.npy"), o)
            print(name, n, o.shape, float(np.abs(o).max()))


def read_wav16(path):
    import wave

    import numpy as np

    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, path
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    if rate != 16000:  # linear interpolation is enough for test audio
        t = np.arange(int(len(x) * 16000 / rate)) * rate / 16000
        x = np.interp(t, np.arange(len(x)), x).astype(np.float32)
    return x


def write_wav16(path, x):
    import wave

    import numpy as np

    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype(np.int16).tobytes())


def vad(silero_wheel, faster_whisper_wheel):
    import importlib.util
    import shutil
    import subprocess
    import tempfile
    import types
    import zipfile

    import numpy as np
    import onnxruntime as ort

    out = os.path.join(HERE, "..", "data", "vad")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    with zipfile.ZipFile(silero_wheel) as z:
        model = z.extract("silero_vad/data/silero_vad_16k_op15.onnx", tmp)
    shutil.copy(model, os.path.join(out, "silero_vad_16k_op15.onnx"))
    with zipfile.ZipFile(faster_whisper_wheel) as z:
        vad_py = z.extract("faster_whisper/vad.py", tmp)

    # The real-speech case: two LibriVox utterances 60 s apart (the long-pause report).
    lib = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-"
    for n in ("0870", "0930"):
        shutil.copy(f"{lib}{n}.wav", os.path.join(out, f"librivox_{n}.wav"))
    real = np.concatenate([read_wav16(lib + "0870.wav"), np.zeros(60 * 16000, np.float32), read_wav16(lib + "0930.wav")])
    # Synthetic speech: two espeak-ng sentences 3 s apart.
    parts = []
    for k, text in enumerate(("Voice activity detection finds the speech in long recordings.",
                              "Silence between sentences is skipped before the transcription.")):
        wav = os.path.join(tmp, f"espeak{k}.wav")
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", wav, text], check=True)
        parts += [read_wav16(wav), np.zeros(3 * 16000, np.float32)]
    synth = np.concatenate(parts[:-1])
    write_wav16(os.path.join(out, "espeak.wav"), synth)
    synth = read_wav16(os.path.join(out, "espeak.wav"))  # exactly what the test reads

    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])

    def probs(audio):
        # The model's wrapper: each 512-sample window with the 64 samples before it, state carried.
        state = np.zeros((2, 1, 128), np.float32)
        context = np.zeros((1, 64), np.float32)
        padded = np.pad(audio, (0, (-len(audio)) % 512))
        out_p = []
        for i in range(0, len(padded), 512):
            x = np.concatenate([context, padded[None, i:i + 512]], 1)
            p, state = sess.run(None, {"input": x, "state": state, "sr": np.array(16000, np.int64)})
            context = x[:, -64:]
            out_p.append(float(p[0, 0]))
        return np.array(out_p, np.float32)

    # faster-whisper's segmentation run on these probabilities (its module loaded on its own).
    sys.modules["faster_whisper"] = types.ModuleType("faster_whisper")
    utils = types.ModuleType("faster_whisper.utils")
    utils.get_assets_path = lambda: tmp
    sys.modules["faster_whisper.utils"] = utils
    spec = importlib.util.spec_from_file_location("fw_vad", vad_py)
    fw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fw)
    for name, audio in (("real", real), ("synth", synth)):
        p = probs(audio)
        np.save(os.path.join(out, f"{name}.probs.npy"), p)
        fw.get_vad_model = lambda p=p: (lambda padded: p[: len(padded) // 512])
        spans = fw.get_speech_timestamps(audio, fw.VadOptions(min_speech_duration_ms=250))
        np.save(os.path.join(out, f"{name}.spans.npy"), np.array([[s["start"], s["end"]] for s in spans], np.int64).reshape(-1, 2))
        print(name, len(audio) / 16000, "s,", len(p), "windows, spans (s):", [(s["start"] / 16000, s["end"] / 16000) for s in spans])


if __name__ == "__main__":
    {"export": export, "run": run, "vad": vad}[sys.argv[1]](*sys.argv[2:])
