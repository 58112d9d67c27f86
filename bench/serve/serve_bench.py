"""Aggregate generation rate and time to first token under concurrent streams: `vrun serve`
beside llama.cpp's `llama-server` on the same GGUF, in the same run, plus `vrun generate`'s
single-stream rate for reference.

    python bench/serve/serve_bench.py --vrun build/bin/vrun [--llama-server PATH] [--model M.gguf]
        [--streams 1,8,32,64] [--tokens 64] [--parallel 8] [--rounds 1] [--backend auto] [--threads 0]
        [--vrun-args "..."] [--llama-args "..."]

Run it with the openai client installed (scripts/setup-serve-venv.sh prints a python that has it).
Each stream is one streamed chat request, greedy, of --tokens tokens at most, with a prompt of its
own (no server can reuse another stream's prompt cache). Both servers get --parallel slots of
4096 positions (llama-server: -np P -c P*4096); streams beyond the slots queue. Per level: the
aggregate rate is all streams' generated tokens over the wall time from the first request to the
last token (prefill included); TTFT is from sending a request to its first text.
"""
import argparse
import concurrent.futures
import itertools
import os
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.request


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "serve"))
from serve_common import LLM  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper and a storm. Story number %d."
_serial = itertools.count(1)


EXTRA = {"ignore_eos": True}


def one_stream(client, tokens):
    prompt = PROMPT % next(_serial)
    t0 = time.time()
    first, chunks, usage = None, 0, None
    # ignore_eos: llama-server's field, which vrun ignores (the table shows the tokens each server
    # generated); cache_prompt (--no-prompt-cache) both servers read.
    for chunk in client.chat.completions.create(model="bench", messages=[{"role": "user", "content": prompt}], temperature=0,
                                                max_tokens=tokens, stream=True, stream_options={"include_usage": True},
                                                extra_body=EXTRA):
        if chunk.choices and chunk.choices[0].delta.content:
            chunks += 1
            if first is None:
                first = time.time() - t0
        if chunk.usage:
            usage = chunk.usage.completion_tokens
    return first or 0.0, usage if usage is not None else chunks, time.time()


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, port):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = []
    threading.Thread(target=lambda: [log.append(l) for l in proc.stderr], daemon=True).start()
    deadline = time.time() + 600
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit("server exited:\n" + "".join(log[-20:]))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return proc
        except Exception:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("server did not come up:\n" + "".join(log[-20:]))


def step_totals(port):
    """vrun's step histogram, its prompt chunks' share and the batch sizes from /metrics: (steps, seconds,
    rows decoded, seconds in prompt chunks); None elsewhere."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
            text = r.read().decode()
    except Exception:
        return None
    def total(pattern):
        return sum(float(v) for v in re.findall(pattern + r'\{model="bench"\} ([0-9.e+-]+)', text))
    if "vrun_step_seconds_count" not in text:
        return None
    return (total("vrun_step_seconds_count"), total("vrun_step_seconds_sum"), total("vrun_batch_size_sum"),
            total("vrun_step_prefill_seconds_total"))


def run_levels(name, port, levels, tokens, rounds):
    import openai  # here, so that transcribe_bench.py (which shares this file's helpers) runs without it

    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="x", max_retries=0, timeout=3600)
    one_stream(client, 8)  # warm-up
    rows = []
    for n in levels:
        for k in range(rounds):
            before = step_totals(port)
            t0 = time.time()
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                res = list(pool.map(lambda _: one_stream(client, tokens), range(n)))
            wall = max(r[2] for r in res) - t0
            after = step_totals(port)
            total = sum(r[1] for r in res)
            ttft = [r[0] for r in res]
            steps = ""
            if before and after and after[0] > before[0]:
                count, secs, decoded, prefill = (a - b for a, b in zip(after, before))
                # The worker's own view: time in steps over the level's wall time, and the rate of its steps
                # (a step: the prompt chunks of requests that joined, then one decode of every running one).
                steps = "%.0f steps, %.2f ms a step (%.2f decoding, the rest prompts), %.1f rows a step, %.0f%% of the wall time in steps" % (
                    count, 1e3 * secs / count, 1e3 * (secs - prefill) / count, decoded / count, 100 * secs / wall)
            rows.append("| %s%s | %d | %d | %.1f | %.1f | %.2f | %.2f | %s |" % (
                name, " (round %d)" % (k + 1) if rounds > 1 else "", n, total, total / wall, total / wall / n,
                percentile(ttft, 50), percentile(ttft, 99), steps))
            print(rows[-1], flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vrun", required=True)
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary (omit: vrun alone)")
    ap.add_argument("--model", default=LLM)
    ap.add_argument("--streams", default="1,8,32,64")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run each level this many times in a row (the first round of a level meets the first calls of its batch size)")
    ap.add_argument("--backend", default="auto", help="vrun's --backend")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads of both (0: each server's default)")
    ap.add_argument("--no-prompt-cache", action="store_true",
                    help="send cache_prompt: false (both servers then prefill every prompt whole)")
    ap.add_argument("--vrun-args", default="", help="more vrun serve options")
    ap.add_argument("--llama-args", default="", help="more llama-server options (GPU: '-ngl 99')")
    a = ap.parse_args()
    levels = [int(x) for x in a.streams.split(",")]
    if a.no_prompt_cache:
        EXTRA["cache_prompt"] = False
    gen = [a.vrun, "generate", "-m", a.model, "-p", PROMPT % 0, "-n", str(a.tokens), "--temp", "0", "--backend", a.backend]
    if a.threads:
        gen += ["--threads", str(a.threads)]
    cli = subprocess.run(gen, capture_output=True, text=True, check=True).stderr
    rate = re.search(r"decode ([0-9.]+) tok/s", cli)
    print("vrun generate, one stream, %d tokens: decode %s tok/s" % (a.tokens, rate.group(1) if rate else "?"))
    print("| server | streams | tokens | aggregate tok/s | per stream tok/s | TTFT p50 s | TTFT p99 s | vrun's steps |")
    print("|---|---|---|---|---|---|---|---|")
    port = free_port()
    cmd = [a.vrun, "serve", "-m", a.model, "--alias", "bench", "--port", str(port), "--backend", a.backend,
           "--parallel", str(a.parallel), "--max-concurrent", str(max(levels) + 1), *shlex.split(a.vrun_args)]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    servers = [("vrun serve", cmd, port)]
    if a.llama_server:
        port = free_port()
        cmd = [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-np", str(a.parallel),
               "-c", str(a.parallel * 4096), "--no-webui", *shlex.split(a.llama_args)]
        if a.threads:
            cmd += ["-t", str(a.threads)]
        servers.append(("llama-server", cmd, port))
    for name, cmd, port in servers:
        proc = start(cmd, port)
        try:
            run_levels(name, port, levels, a.tokens, a.rounds)
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
