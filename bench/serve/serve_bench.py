"""Aggregate decode rate and time to first token of `vrun serve` at several numbers of concurrent
streams, beside `vrun generate`'s single-stream rate on the same model and machine.

    python bench/serve/serve_bench.py --vrun build/bin/vrun [--model M.gguf] [--streams 1,4,8]
                                      [--tokens 128] [--backend auto]

Run it with the openai client installed (scripts/setup-serve-venv.sh prints a python that has it).
Each stream is one chat request, greedy, of at most --tokens tokens; the aggregate rate is the tokens of all streams over the wall time from the first request
to the last token.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import time

import openai

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "serve"))
from serve_common import LLM  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper and a storm."


def one_stream(client, tokens):
    t0 = time.time()
    first, n = None, 0
    for chunk in client.chat.completions.create(model="bench", messages=[{"role": "user", "content": PROMPT}], temperature=0,
                                                max_tokens=tokens, stream=True, stream_options={"include_usage": True}):
        if chunk.choices and chunk.choices[0].delta.content and first is None:
            first = time.time() - t0
        if chunk.usage:
            n = chunk.usage.completion_tokens
    return first or 0.0, n, time.time()


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vrun", required=True)
    ap.add_argument("--model", default=LLM)
    ap.add_argument("--streams", default="1,4,8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--backend", default="auto")
    a = ap.parse_args()
    cli = subprocess.run([a.vrun, "generate", "-m", a.model, "-p", PROMPT, "-n", str(a.tokens), "--temp", "0", "--backend", a.backend],
                         capture_output=True, text=True, check=True).stderr
    rate = re.search(r"decode ([0-9.]+) tok/s", cli)
    print("vrun generate, one stream: decode %s tok/s" % (rate.group(1) if rate else "?"))
    levels = [int(x) for x in a.streams.split(",")]
    proc = subprocess.Popen([a.vrun, "serve", "-m", a.model, "--alias", "bench", "--port", "0", "--backend", a.backend,
                             "--max-concurrent", str(max(levels))], stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    try:
        client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="x", max_retries=0, timeout=3600)
        one_stream(client, 8)  # warm-up
        print("| streams | aggregate decode tok/s | per-stream tok/s | TTFT p50 s | TTFT p99 s |")
        print("|---|---|---|---|---|")
        for n in levels:
            t0 = time.time()
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                res = list(pool.map(lambda _: one_stream(client, a.tokens), range(n)))
            wall = max(r[2] for r in res) - t0
            total = sum(r[1] for r in res)
            ttft = [r[0] for r in res]
            print("| %d | %.1f | %.1f | %.3f | %.3f |" % (n, total / wall, total / wall / n, percentile(ttft, 50), percentile(ttft, 99)))
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
