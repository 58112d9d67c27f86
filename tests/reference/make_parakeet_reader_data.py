"""Writes the small files the Parakeet reader tests read (tests/parakeet/data/): PyTorch zip
checkpoints written by torch.save itself (f32/f16/bf16/i64 tensors, a transposed view, a slice of
a shared storage, a Lightning-style {"state_dict": ...} wrapper), the same checkpoint inside plain
and gzip tar archives as NeMo packs them, and pickles that must be refused (os.system through
REDUCE, builtins.eval). The expected values go to readers_expected.json, written from the tensors.

    /tmp/vrun-llm-venv/bin/python tests/reference/make_parakeet_reader_data.py
(any venv with torch and numpy)."""
import collections
import io
import json
import os
import pickle
import tarfile
import zipfile

import torch

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parakeet", "data")
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(7)

base = torch.randn(6, 5, generator=g)
shared = torch.arange(20, dtype=torch.float32) * 0.5 - 3
sd = collections.OrderedDict()
sd["enc.weight"] = torch.randn(3, 4, generator=g)
sd["enc.half"] = torch.randn(2, 3, generator=g).half()
sd["enc.bf16"] = torch.randn(5, generator=g).bfloat16()
sd["bn.num_batches_tracked"] = torch.tensor(123456789012, dtype=torch.int64)
sd["view.transposed"] = base.t()          # strides (1, 5): not contiguous
sd["view.offset"] = shared[7:13].view(2, 3)  # storage offset 7, shares storage with the next
sd["view.full"] = shared
sd["scalar"] = torch.tensor(2.5)
sd._metadata = collections.OrderedDict()  # what state_dict() attaches, pickled through BUILD
torch.save(sd, os.path.join(out, "tensors.ckpt"))
torch.save({"state_dict": sd, "epoch": 3}, os.path.join(out, "lightning.ckpt"))

expected = {}
for k, v in sd.items():
    expected[k] = {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape),
                   "values": v.float().flatten().tolist() if v.dtype != torch.int64 else v.flatten().tolist()}
with open(os.path.join(out, "readers_expected.json"), "w") as f:
    json.dump(expected, f, indent=1)

config = """\
# comment line
sample_rate: 16000
name: "quoted: string"
list:
- 1
- -2
- 3.5
nested:
  flag: true
  none: null
  tiny: 1.0e-05
  exp: 1e-5
  word: 'it''s'
  empty_list: []
"""
ckpt_bytes = open(os.path.join(out, "tensors.ckpt"), "rb").read()
for name, mode in (("archive.tar", "w"), ("archive.tar.gz", "w:gz")):
    with tarfile.open(os.path.join(out, name), mode) as tar:
        for entry, data in (("./model_config.yaml", config.encode()), ("./model_weights.ckpt", ckpt_bytes),
                            ("./" + "x" * 120 + "_long_name.txt", b"long names use a pax header")):
            info = tarfile.TarInfo(entry)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


class Evil:
    def __reduce__(self):
        return (os.system, ("echo should never run",))


class Eval:
    def __reduce__(self):
        return (eval, ("1+1",))


for name, obj in (("evil_os_system.ckpt", {"w": Evil()}), ("evil_eval.ckpt", [Eval()])):
    with zipfile.ZipFile(os.path.join(out, name), "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(obj, protocol=2))
        z.writestr("archive/byteorder", "little")
print("wrote", sorted(os.listdir(out)))

# tensors.ckpt with the first tensor's stride or storage offset edited to point past its storage.
src = zipfile.ZipFile(os.path.join(out, "tensors.ckpt"))
pkl = src.read("tensors/data.pkl")
size_stride = b"K\x03K\x04\x86q\tK\x04K\x01\x86"  # size (3, 4), stride (4, 1) of enc.weight
assert pkl.count(size_stride) == 1
edits = {"bad_stride.ckpt": pkl.replace(size_stride, b"K\x03K\x04\x86q\tJ\xff\xff\xff\x7fK\x01\x86"),
         "bad_offset.ckpt": pkl.replace(b"Q" + b"K\x00" + size_stride, b"Q" + b"J\x00\x00\x00\x40" + size_stride)}
for name, data in edits.items():
    assert data != pkl, name
    with zipfile.ZipFile(os.path.join(out, name), "w") as z:
        for item in src.namelist():
            z.writestr(item, data if item.endswith("data.pkl") else src.read(item))
print("wrote bad_stride.ckpt, bad_offset.ckpt")
