#!/usr/bin/env python3
"""Prefill and decode speed on a GPU: vrun (Vulkan backend) beside llama.cpp's own llama-bench
(its Vulkan backend) on the same GGUF files, in one run, on the same machine.

    bench_llm_gpu.py --vrun BIN --llama-bench BIN --prompt-file P.txt MODEL.gguf [MODEL.gguf ...]

vrun: `vrun generate --backend vulkan` on the prompt file (its token count is printed), --decode
tokens greedy past the end-of-text token, best of --repeats runs (each a new process; the first
one also compiles the GPU pipelines, see the time-to-first-token column). llama.cpp: `llama-bench
-p N -n D -ngl 99` with flash attention off and on, its own repeats and warm-up, the faster of the
two per column. Ratios are vrun / llama.cpp (above 1: vrun faster).
"""
import argparse
import json
import os
import subprocess
import sys


def vrun_speed(args, model, prompt):
    best_p = best_d = 0.0
    ttft, n = [], 0
    for _ in range(args.repeats):
        cmd = [args.vrun, "generate", "-m", model, "-p", prompt, "--raw", "--temp", "0", "--ignore-eos",
               "-n", str(args.decode + 1), "--backend", "vulkan", "--ctx", str(args.ctx), "--json", "-q"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("vrun failed on %s:\n%s" % (model, r.stderr[-2000:]))
        st = json.loads(r.stdout)["stats"]
        best_p = max(best_p, st["prefill_tokens_per_s"])
        best_d = max(best_d, st["decode_tokens_per_s"])
        ttft.append(st["time_to_first_token_s"])
        n = st["prompt_tokens"]
    return best_p, best_d, n, ttft


def llamacpp_speed(args, model, n_prompt):
    cmd = [args.llama_bench, "-m", model, "-p", str(n_prompt), "-n", str(args.decode), "-ngl", "99", "-fa", "0,1",
           "-r", str(args.repeats), "-o", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("llama-bench failed on %s:\n%s" % (model, r.stderr[-2000:]))
    best_p = best_d = 0.0
    rows = json.loads(r.stdout)
    for row in rows:
        if row["n_prompt"] > 0 and row["n_gen"] == 0:
            best_p = max(best_p, row["avg_ts"])
        elif row["n_gen"] > 0 and row["n_prompt"] == 0:
            best_d = max(best_d, row["avg_ts"])
    backend = rows[0].get("backends", "?") if rows else "?"
    gpu = rows[0].get("gpu_info", "?") if rows else "?"
    return best_p, best_d, backend, gpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vrun", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--prompt-file", required=True, help="prompt text (the same tokens go to both)")
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    with open(args.prompt_file, encoding="utf-8") as f:
        prompt = f.read()
    print("decode %d tokens; best of %d" % (args.decode, args.repeats))
    print("%-32s %6s %12s %12s %7s %11s %11s %7s  %s" % ("model", "prompt", "prefill vrun", "llama.cpp", "ratio",
                                                         "decode vrun", "llama.cpp", "ratio", "vrun first-token s"))
    for model in args.models:
        vp, vd, n, ttft = vrun_speed(args, model, prompt)
        lp, ld, backend, gpu = llamacpp_speed(args, model, n)
        print("%-32s %6d %12.1f %12.1f %6.2fx %11.1f %11.1f %6.2fx  %s" % (
            os.path.basename(model)[:32], n, vp, lp, vp / lp, vd, ld, vd / ld, " ".join("%.2f" % t for t in ttft)),
            flush=True)
    print("llama.cpp backend: %s; GPU: %s" % (backend, gpu))


if __name__ == "__main__":
    main()
