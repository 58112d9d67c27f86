#!/usr/bin/env python3
"""vrun vs llama.cpp (llama-cpp-python) prefill and decode tok/s on one GGUF; see run.sh."""
import argparse
import json
import os
import subprocess
import time

import llama_cpp


def vrun_speed(args, prompt, threads):
    best_p, best_d = 0.0, 0.0
    for _ in range(args.repeats):
        cmd = [args.vrun, "generate", "-m", args.model, "-p", prompt, "--raw", "--temp", "0", "--ignore-eos",
               "-n", str(args.decode + 1), "-t", str(threads), "--backend", "cpu", "--ctx", "1024", "--json", "-q"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        st = json.loads(out)["stats"]
        best_p = max(best_p, st["prefill_tokens_per_s"])
        best_d = max(best_d, st["decode_tokens_per_s"])
    return best_p, best_d, st["prompt_tokens"]


def llamacpp_speed(args, tokens, threads):
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    best_p, best_d = 0.0, 0.0
    for _ in range(args.repeats):
        llm.reset()
        t = time.perf_counter()
        llm.eval(tokens)
        best_p = max(best_p, len(tokens) / (time.perf_counter() - t))
        nxt = tokens[-1]
        t = time.perf_counter()
        for _ in range(args.decode):
            llm.eval([nxt])
        best_d = max(best_d, args.decode / (time.perf_counter() - t))
    return best_p, best_d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vrun", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    tok = llama_cpp.Llama(model_path=args.model, n_ctx=64, vocab_only=True, verbose=False)
    with open(args.text, "rb") as f:
        ids = tok.tokenize(f.read(), add_bos=False, special=False)[:args.prompt_tokens]
    prompt = tok.detokenize(ids).decode("utf-8")
    print("model %s; prompt %d tokens; decode %d tokens; best of %d; load average %.1f" % (
        os.path.basename(args.model), len(ids), args.decode, args.repeats, os.getloadavg()[0]))
    print("%-8s %12s %12s %7s %12s %12s %7s" % ("threads", "prefill vrun", "llama.cpp", "ratio", "decode vrun", "llama.cpp",
                                                 "ratio"))
    for threads in [int(t) for t in args.threads.split(",")]:
        vp, vd, n = vrun_speed(args, prompt, threads)
        lp, ld = llamacpp_speed(args, ids, threads)
        print("%-8d %12.1f %12.1f %6.2fx %12.1f %12.1f %6.2fx%s" % (
            threads, vp, lp, vp / lp, vd, ld, vd / ld, "" if n == len(ids) else "  (vrun prompt: %d tokens)" % n))
    # Both programs share the machine with whatever else runs: a load that rose during the run
    # makes the ratios noisy (they stay fair only while the load is steady).
    print("load average at the end %.1f" % os.getloadavg()[0])


if __name__ == "__main__":
    main()
