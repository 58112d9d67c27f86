"""Concurrent transcription through `vrun serve`: the aggregate real-time factor of N requests
sent one at a time against the same N requests in flight together, and whether each request got
the text it got alone.

    python bench/serve/transcribe_bench.py --vrun build/bin/vrun --model MODEL --audio A.wav [B.wav ...]
        [--requests 32] [--inflight 1,8,32] [--backend auto] [--format json] [--rounds 1]
        [--vrun-args "..."]

MODEL is anything `vrun serve -m` loads (a Parakeet .nemo, Hugging Face folder or .vrp; a
Whisper model). The requests cycle through the audio files (16-bit WAV: their length is read from
the header). Per level of requests in flight: the wall time from the first request sent to the
last answer, RTFx (the requests' audio seconds over that wall time), request latency at p50 and
p99, the mean number of requests that shared one of the worker's batched calls (`/metrics`,
`vrun_batch_size`), and how many answers equal the text the first level (one at a time, when 1 is
listed first) gave for the same request. Runs with `requests` installed
(scripts/setup-serve-venv.sh prints a python that has it).
"""
import argparse
import concurrent.futures
import os
import re
import shlex
import sys
import time
import urllib.request
import wave

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import free_port, percentile, start  # noqa: E402

ALIAS = "asr"


def wav_seconds(path):
    with wave.open(path, "rb") as w:
        return w.getnframes() / float(w.getframerate())


def batch_totals(port):
    """(batched calls, requests in them) for the model from /metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        text = r.read().decode()
    def total(name):
        m = re.search(name + r'\{model="%s"\} ([0-9.e+-]+)' % ALIAS, text)
        return float(m.group(1)) if m else 0.0
    return total("vrun_batch_size_count"), total("vrun_batch_size_sum")


def transcribe(port, path, data, fmt):
    t0 = time.time()
    r = requests.post("http://127.0.0.1:%d/v1/audio/transcriptions" % port,
                      files={"file": (os.path.basename(path), data, "audio/wav")},
                      data={"model": ALIAS, "response_format": fmt}, timeout=3600)
    if r.status_code != 200:
        raise SystemExit("request for %s failed: %d %s" % (path, r.status_code, r.text[:300]))
    text = r.json()["text"] if fmt in ("json", "verbose_json") else r.text
    return time.time() - t0, text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vrun", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--audio", nargs="+", required=True, help="16-bit WAV files the requests cycle through")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--inflight", default="1,8,32", help="requests in flight at once, per level")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--backend", default="auto", help="vrun's --backend")
    ap.add_argument("--format", default="json", choices=["json", "text", "verbose_json", "srt", "vtt"])
    ap.add_argument("--vrun-args", default="", help="more vrun serve options")
    a = ap.parse_args()
    levels = [int(x) for x in a.inflight.split(",")]
    if a.requests < 1 or any(n < 1 for n in levels):
        ap.error("--requests and every --inflight level must be at least 1")
    files = [(p, open(p, "rb").read(), wav_seconds(p)) for p in a.audio]
    jobs = [files[i % len(files)] for i in range(a.requests)]
    audio_s = sum(j[2] for j in jobs)

    port = free_port()
    cmd = [a.vrun, "serve", "-m", a.model, "--alias", ALIAS, "--port", str(port), "--backend", a.backend,
           "--max-concurrent", str(max(levels) + 1), *shlex.split(a.vrun_args)]
    proc = start(cmd, port)
    try:
        transcribe(port, *files[0][:2], a.format)  # warm-up
        print("model %s, backend %s, %d requests of %.1f s of audio in all (%d files)"
              % (a.model, a.backend, a.requests, audio_s, len(files)))
        print("| in flight | requests | wall s | RTFx | latency p50 s | p99 s | requests a batched call | same text as the first level |")
        print("|---|---|---|---|---|---|---|---|")
        first = None
        rtfx = {}
        for n in levels:
            for k in range(a.rounds):
                calls0, reqs0 = batch_totals(port)
                t0 = time.time()
                with concurrent.futures.ThreadPoolExecutor(n) as pool:
                    res = list(pool.map(lambda j: transcribe(port, j[0], j[1], a.format), jobs))
                wall = time.time() - t0
                calls1, reqs1 = batch_totals(port)
                texts = [r[1] for r in res]
                if first is None:
                    first = texts
                same = sum(1 for x, y in zip(texts, first) if x == y)
                lat = [r[0] for r in res]
                per_call = (reqs1 - reqs0) / (calls1 - calls0) if calls1 > calls0 else float("nan")
                rtfx[n] = audio_s / wall
                print("| %d%s | %d | %.2f | %.1f | %.2f | %.2f | %.2f | %d of %d |" % (
                    n, " (round %d)" % (k + 1) if a.rounds > 1 else "", len(jobs), wall, audio_s / wall,
                    percentile(lat, 50), percentile(lat, 99), per_call, same, len(jobs)), flush=True)
        if 1 in rtfx:
            for n in levels:
                if n != 1:
                    print("%d in flight: %.2fx the RTFx of one at a time" % (n, rtfx[n] / rtfx[1]))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
