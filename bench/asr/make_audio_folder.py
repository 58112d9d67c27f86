#!/usr/bin/env python3
"""Writes a folder of synthetic speech-like wav files for archive-job benchmarks: N files
(16-bit, 16 kHz, mono) of lengths spread evenly between --min-s and --max-s, in two sub-folders
a/ and b/ whose files have the same names (so the job's mirrored outputs are exercised too).
The audio is tones that glide and change every half second over low noise, with a quieter
stretch every 2 s, seeded per file: the same files on every machine. Needs numpy.

    python3 make_audio_folder.py DIR [--files 64] [--min-s 300] [--max-s 600] [--jobs N]

--jobs: files written in parallel (default: the machine's cores).
"""
import argparse
import multiprocessing
import os
import sys
import wave

try:
    import numpy as np
except ImportError:
    print("make_audio_folder.py needs numpy", file=sys.stderr)
    sys.exit(2)

RATE = 16000


def synthetic(n, seed):
    rng = np.random.default_rng(seed)
    i = np.arange(n, dtype=np.float64)
    part = (i // 8000).astype(np.int64)
    f = 150.0 + 60.0 * ((part * 7 + seed) % 11) + 40.0 * np.sin(i * 1e-4)
    phase = np.cumsum(2.0 * np.pi * f / RATE)
    env = np.where(part % 4 == 3, 0.02, 0.3)
    x = env * (np.sin(phase) + 0.5 * np.sin(2.0 * phase)) + 0.02 * rng.uniform(-1.0, 1.0, n)
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2")


def write_one(job):
    """Writes file k of the folder; returns its length in seconds."""
    folder, k, seconds = job
    sub = os.path.join(folder, "ab"[k % 2])
    os.makedirs(sub, exist_ok=True)
    samples = synthetic(int(seconds * RATE), 1000 + k)
    with wave.open(os.path.join(sub, "%03d.wav" % (k // 2)), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.tobytes())
    return len(samples) / RATE


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument("--min-s", type=float, default=300.0)
    ap.add_argument("--max-s", type=float, default=600.0)
    ap.add_argument("--jobs", type=int, default=0)
    a = ap.parse_args()
    if a.files < 1 or not (0 < a.min_s <= a.max_s):
        ap.error("--files must be positive and 0 < --min-s <= --max-s")
    jobs = [(a.dir, k, a.min_s + (a.max_s - a.min_s) * (k / max(1, a.files - 1))) for k in range(a.files)]
    with multiprocessing.Pool(max(1, min(a.jobs or os.cpu_count() or 1, a.files))) as pool:
        total = sum(pool.map(write_one, jobs))
    print("%d files, %.1f s of audio (%.2f h) in %s" % (a.files, total, total / 3600.0, a.dir))


if __name__ == "__main__":
    main()
