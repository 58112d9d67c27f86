#!/usr/bin/env python3
"""vrun (Vulkan) beside llama.cpp's CUDA backend on the same GGUF files and the same GPU, in one run,
with decode's fraction of the memory roofline for both. bench/gpu/compare_cuda.sh builds the peer
and the files and calls this; it can also be called on its own:

    compare_cuda.py --bin DIR --llama-bench BIN --prompt-file P.txt [--runs 3] MODEL.gguf ...

Roofline: `vrun_bench_vulkan --gauge` (bench/vulkan/gauge.h): a read kernel tuned over workgroup
size, loads in flight and grid on a 1 GiB buffer, beside vkCmdCopyBuffer and PyTorch's copy
(bench/gpu/torch_copy.py). GB/s = 1e9 bytes a second between memory and chip; a copy counts bytes
read + written. The roof is the highest of the three.

Bytes a token (decode at position p): every tensor of the file once (the tied embedding table
once, as the output head), the token's embedding row, and K and V (f16, both runners' default) of
every layer for positions 0..p. % of roofline = bytes a token x tok/s / roof.

vrun: `vrun generate --backend vulkan` on the prompt file, 128 tokens past it (--decode), each run
a new process: its prefill is a fresh process's first call (GPU pipelines from the on-disk cache
after the first run). llama.cpp: `llama-bench -p 512 -n 128 -d 0,512 -ngl 99 -fa 0,1 -r 5`, the
faster of flash attention off and on per test; tg128 at depth 512 decodes at the positions vrun's
decode does (after a 512-token prompt), tg128 at depth 0 is llama-bench's usual figure.
"""
import argparse
import json
import os
import re
import subprocess
import sys


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-3000:], r.stderr[-3000:]))
    return r.stdout


def gauge(bindir):
    # PyTorch's copy from this interpreter (not from inside the benchmark, whose library path
    # may hold older libraries than torch expects).
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_copy.py")],
                       capture_output=True, text=True)
    tc = r.stdout.split()[1] if r.returncode == 0 and r.stdout.startswith("torch_copy_gbs") else "0"
    out = run([os.path.join(bindir, "vrun_bench_vulkan"), "--gauge", "--torch-copy", tc])
    g = {"lines": [l for l in out.splitlines() if not l.startswith("memory type")]}
    for key, pat in (("read", r"read kernel\s+([\d.]+) GB/s"), ("vkcopy", r"vkCmdCopyBuffer\s+([\d.]+)"),
                     ("torch", r"PyTorch copy\s+([\d.]+)"), ("roof", r"roof\s+([\d.]+) GB/s")):
        m = re.search(pat, out)
        g[key] = float(m.group(1)) if m else 0.0
    m = re.search(r"^device: (.*?) \(", out, re.M)
    g["device"] = m.group(1) if m else "?"
    return g


def model_bytes(path):
    """(bytes of all tensors, bytes of one embedding row, KV bytes per position, name)"""
    import gguf
    r = gguf.GGUFReader(path)

    def field(key):
        f = r.fields[key]
        return f.parts[f.data[0]][0]

    layers = int(field("llama.block_count"))
    heads = int(field("llama.attention.head_count"))
    kv_heads = int(field("llama.attention.head_count_kv"))
    width = int(field("llama.embedding_length"))
    total, row = 0, 0
    for t in r.tensors:
        total += int(t.n_bytes)
        if t.name == "token_embd.weight":
            row = int(t.n_bytes) // int(t.shape[-1])
    kv_per_pos = 2 * layers * kv_heads * (width // heads) * 2  # K and V, f16
    return total, row, kv_per_pos


def vrun_speed(bindir, model, prompt, runs, decode):
    res = []
    for _ in range(runs):
        out = run([os.path.join(bindir, "vrun"), "generate", "-m", model, "-p", prompt, "--raw", "--temp", "0",
                   "--ignore-eos", "-n", str(decode + 1), "--backend", "vulkan", "--ctx", "1024", "--json", "-q"])
        st = json.loads(out)["stats"]
        res.append((st["prefill_tokens_per_s"], st["decode_tokens_per_s"], st["prompt_tokens"],
                    st["time_to_first_token_s"]))
    return res


def llamacpp_speed(llama_bench, model, decode, reps):
    out = run([llama_bench, "-m", model, "-p", "512", "-n", str(decode), "-d", "0,512", "-ngl", "99", "-fa", "0,1",
               "-r", str(reps), "-o", "json"])
    rows = json.loads(out)
    best = {}
    for row in rows:
        key = ("pp" if row["n_gen"] == 0 else "tg", row.get("n_depth", 0))
        best[key] = max(best.get(key, 0.0), row["avg_ts"])
    info = (rows[0].get("backends", "?"), rows[0].get("gpu_info", "?"), rows[0].get("build_commit", "?")) if rows else ()
    return best, info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="folder with vrun and vrun_bench_vulkan")
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--prompt-file", required=True)
    ap.add_argument("--runs", type=int, default=3, help="vrun processes per model")
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5, help="llama-bench repetitions")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    prompt = open(a.prompt_file, encoding="utf-8").read()
    g = gauge(a.bin)
    for l in g["lines"]:
        print(l)
    roof = g["roof"]
    rows = []
    for m in a.models:
        total, row, kv_pos = model_bytes(m)
        v = vrun_speed(a.bin, m, prompt, a.runs, a.decode)
        n_prompt = v[0][2]
        lc, info = llamacpp_speed(a.llama_bench, m, a.decode, a.reps)
        # Mean keys read by a decode step: vrun decodes at positions n_prompt+1 .. n_prompt+decode
        # (the first token comes from the prefill), llama-bench tg at d .. d+decode-1.
        b_vrun = total + row + kv_pos * (n_prompt + 1 + a.decode / 2.0)
        b_lc0 = total + row + kv_pos * (1 + (a.decode - 1) / 2.0)
        b_lc512 = total + row + kv_pos * (512 + 1 + (a.decode - 1) / 2.0)
        vd = max(x[1] for x in v)
        vp = [x[0] for x in v]
        name = os.path.basename(m)
        print("\n%s: %.3f GB a token at depth 512 (tensors %.3f GB, embedding row %.1f KB, KV %.1f KB a position)" %
              (name, b_vrun / 1e9, total / 1e9, row / 1e3, kv_pos / 1e3))
        print("  vrun runs (prefill tok/s of a fresh process's first call, decode tok/s, prompt tokens, first-token s): " +
              "; ".join("%.0f, %.1f, %d, %.2f" % x for x in v))
        print("  llama.cpp (%s, %s, build %s): %s" % (info + (
            ", ".join("%s%s@d%d %.1f" % (k[0], "512" if k[0] == "pp" else str(a.decode), k[1], s) for k, s in sorted(lc.items())),)))
        rows.append((name, vd, lc.get(("tg", 512), 0), lc.get(("tg", 0), 0), b_vrun, b_lc512, b_lc0, max(vp),
                     lc.get(("pp", 0), 0), n_prompt))
    card = g["device"]
    print("\n== %s; memory roofline %.1f GB/s (read kernel %.1f, vkCmdCopyBuffer %.1f, PyTorch copy %.1f; copies count "
          "read + written) ==" % (card, roof, g["read"], g["vkcopy"], g["torch"]))
    print("%-26s %10s %12s %6s %9s %9s %12s %6s %12s %10s %6s" % (
        "model", "vrun tg", "llama tg@512", "ratio", "vrun roof", "llama roof", "llama tg@0", "roof", "vrun pp1st",
        "llama pp512", "ratio"))
    for (name, vd, l512, l0, bv, bl512, bl0, vp, lp, n) in rows:
        print("%-26s %10.1f %12.1f %5.2fx %8.1f%% %9.1f%% %12.1f %5.1f%% %12.0f %10.0f %5.2fx" % (
            name[:26], vd, l512, vd / l512 if l512 else 0, 100 * bv * vd / 1e9 / roof, 100 * bl512 * l512 / 1e9 / roof,
            l0, 100 * bl0 * l0 / 1e9 / roof, vp, lp, vp / lp if lp else 0))
    print("(tok/s; tg = decode of %d tokens, vrun after its %d-token prompt; roof = %% of the memory roofline; "
          "vrun pp1st = a fresh process's first prefill of that prompt, best of %d processes)" % (a.decode, rows[0][9], a.runs))


if __name__ == "__main__":
    main()
