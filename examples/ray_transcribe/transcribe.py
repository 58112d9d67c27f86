#!/usr/bin/env python3
"""Transcribe many audio files on a Ray cluster with the vrun module.

CPU tasks decode and resample the audio (vrun.load_audio); a pool of actors, one per GPU (or
--cpu-workers of them on the CPU), each holding one loaded vrun.SpeechModel, transcribe it and
write the transcripts. Outputs mirror the input tree under --output-dir; each file is written whole
or not at all (a temporary file, then a rename); a summary line per input goes to --summary.

    python transcribe.py -m ~/.cache/vrun/models/whisper-tiny.en talks/ --output-dir out -o txt,srt
    python transcribe.py -m MODEL manifest.jsonl --output-dir out --address auto   # a running cluster

INPUT is a folder (its audio files, recursively), or a manifest: one path per line, or JSON lines
{"path": ..., "id": ...}. See README.md.
"""
import argparse
import json
import os
import sys
import time

AUDIO_EXTENSIONS = {".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3"}
FORMATS = ("txt", "srt", "vtt", "tsv", "json")


def read_inputs(source):
    """[(input path, id, output base relative to --output-dir)] in a stable order.

    A folder: its audio files, each written as <relative path without extension>.<format>. A JSON
    lines manifest: each "path", written as <id>.<format> ("id" defaults to the path's stem). A plain
    manifest: one path per line (relative to the manifest's folder), written relative to the paths'
    longest common folder."""
    if os.path.isdir(source):
        found = []
        for folder, dirs, files in os.walk(source):
            dirs.sort()
            for name in sorted(files):
                if os.path.splitext(name)[1].lower() in AUDIO_EXTENSIONS:
                    path = os.path.join(folder, name)
                    found.append((path, os.path.splitext(os.path.relpath(path, source))[0]))
        return [(path, base, base) for path, base in found]
    with open(source, encoding="utf-8") as f:
        lines = [(n, line.strip()) for n, line in enumerate(f, 1) if line.strip() and not line.lstrip().startswith("#")]
    here = os.path.dirname(os.path.abspath(source))
    if lines and all(line.startswith("{") for _, line in lines):
        out = []
        for n, line in lines:
            try:
                item = json.loads(line)
                path = os.path.join(here, item["path"])
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit("%s:%d: not a {\"path\": ..., \"id\": ...} line (%s)" % (source, n, e))
            ident = str(item.get("id") or os.path.splitext(os.path.basename(path))[0])
            out.append((path, ident, ident))
        return out
    paths = [os.path.normpath(os.path.join(here, line)) for _, line in lines]
    if not paths:
        return []
    common = os.path.commonpath([os.path.dirname(p) for p in paths])
    bases = [os.path.splitext(os.path.relpath(p, common))[0] for p in paths]
    return [(p, base, base) for p, base in zip(paths, bases)]


def check_names(inputs):
    seen = {}
    for path, _, base in inputs:
        if os.path.isabs(base) or base.split(os.sep)[0] == "..":
            raise SystemExit("%s: output name %r leaves --output-dir" % (path, base))
        if base in seen:
            raise SystemExit("%s and %s would both write %s.* under --output-dir" % (seen[base], path, base))
        seen[base] = path


def write_atomically(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def decode(batch):
    """CPU task: each input's 16-kHz mono samples (or why it could not be read)."""
    import numpy as np
    import vrun
    samples, errors = [], []
    for path in batch["path"]:
        try:
            samples.append(vrun.load_audio(path))
            errors.append("")
        except (OSError, vrun.Error) as e:
            samples.append(np.zeros(0, np.float32))
            errors.append(str(e))
    batch["samples"] = np.array(samples + [None], dtype=object)[:-1]  # ragged: one array per row
    batch["error"] = np.array(errors, dtype=object)
    return batch


class Transcriber:
    """An actor holding one loaded model: transcribes each row and writes its files."""

    def __init__(self, model, backend, threads, formats, output_dir, shown_dir, options):
        import ray
        if backend != "cpu":
            gpus = ray.get_gpu_ids()
            if gpus:  # the GPU Ray gave this actor, as the Vulkan device index
                os.environ["VRUN_DEVICE"] = str(int(gpus[0]))
        import vrun
        self.model = vrun.SpeechModel(model, backend=backend, threads=threads)
        self.formats, self.output_dir, self.shown_dir, self.options = formats, output_dir, shown_dir, options

    def __call__(self, batch):
        rows = [self.transcribe_one(*row) for row in zip(batch["input"], batch["id"], batch["base"], batch["samples"], batch["error"])]
        return {"summary": [json.dumps(r) for r in rows]}

    def transcribe_one(self, path, ident, base, samples, error):
        row = {"input": path, "id": ident, "outputs": [], "duration_s": round(len(samples) / 16000.0, 3), "seconds": 0.0, "rtfx": 0.0,
               "status": "ok"}
        if error:
            return dict(row, status="failed", error=error)
        t0 = time.monotonic()
        try:
            t = self.model.transcribe(samples, **self.options)
            for fmt in self.formats:
                write_atomically(os.path.join(self.output_dir, base + "." + fmt), t.render(fmt, audio=path))
                row["outputs"].append(os.path.join(self.shown_dir, base + "." + fmt))
        except Exception as e:  # noqa: BLE001 - every failure is one input's, reported in its line
            return dict(row, status="failed", error=str(e), seconds=round(time.monotonic() - t0, 3))
        seconds = time.monotonic() - t0
        return dict(row, seconds=round(seconds, 3), rtfx=round(t.duration / seconds, 2) if seconds > 0 else 0.0)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See README.md for multi-node use.")
    p.add_argument("input", help="folder of audio files, or a manifest (paths, or JSON lines with path and id)")
    p.add_argument("-m", "--model", required=True, help="Whisper or Parakeet model (a folder or file every node can read)")
    p.add_argument("--output-dir", required=True, help="where the transcripts go (shared storage on a cluster)")
    p.add_argument("-o", "--output-format", default="txt", help="comma-separated: txt, srt, vtt, tsv, json (default txt)")
    p.add_argument("--summary", help="summary JSON lines (default <output-dir>/summary.jsonl)")
    p.add_argument("--overwrite", action="store_true", help="transcribe inputs whose outputs all exist (default: skip them)")
    p.add_argument("--cpu-workers", type=int, default=0, help="actors on the CPU (default: one per GPU, else 1)")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads of each CPU actor; it reserves as many Ray CPUs, fewer where the actors would leave "
                        "no CPU for decoding")
    p.add_argument("--batch-size", type=int, default=1, help="files per actor call (default 1: the actors share the files evenly)")
    p.add_argument("--address", help="Ray cluster to join ('auto': the one `ray start` runs here); default: a local one")
    p.add_argument("--num-cpus", type=int, help="CPUs of the local Ray instance (without --address)")
    p.add_argument("-l", "--language", default="auto")
    p.add_argument("--task", default="transcribe", choices=["transcribe", "translate"])
    p.add_argument("--beam-size", type=int, default=1)
    p.add_argument("--word-timestamps", action="store_true")
    p.add_argument("--prompt", default="")
    a = p.parse_args(argv)
    a.formats = [f for f in a.output_format.split(",") if f]
    bad = [f for f in a.formats if f not in FORMATS]
    if bad or not a.formats:
        p.error("-o: unknown format %s (txt, srt, vtt, tsv, json)" % ",".join(bad))
    if a.cpu_workers < 0 or a.threads < 1 or a.batch_size < 1:
        p.error("--cpu-workers must be >= 0, --threads and --batch-size >= 1")
    return a


def plan(a, summary):
    """Inputs to transcribe as rows, after writing the summary lines of those skipped."""
    inputs = read_inputs(a.input)
    check_names(inputs)
    rows = []
    for path, ident, base in inputs:
        outs = [os.path.join(a.output_dir, base + "." + f) for f in a.formats]
        if not a.overwrite and all(os.path.exists(o) for o in outs):
            summary.write(json.dumps({"input": path, "id": ident, "outputs": outs, "duration_s": None, "seconds": 0.0, "rtfx": None,
                                      "status": "skipped"}) + "\n")
        else:
            rows.append({"input": path, "path": os.path.abspath(path), "id": ident, "base": base})
    return inputs, rows


def main(argv=None):
    a = parse_args(argv)
    import ray
    if not ray.is_initialized():
        ray.init(address=a.address, num_cpus=a.num_cpus if not a.address else None)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    use_gpus = gpus > 0 and a.cpu_workers == 0
    workers = gpus if use_gpus else max(1, a.cpu_workers)
    # The CPU actors leave one CPU of the cluster to the decoding tasks.
    cpus = ray.cluster_resources().get("CPU", 1)
    worker_cpus = min(a.threads, (cpus - 1) / workers) if workers else a.threads
    if not use_gpus and worker_cpus <= 0:
        raise SystemExit("%d CPU workers do not fit in %g CPUs with one left for decoding" % (workers, cpus))
    options = {"language": a.language, "task": a.task, "beam_size": a.beam_size, "word_timestamps": a.word_timestamps, "prompt": a.prompt}
    summary_path = a.summary or os.path.join(a.output_dir, "summary.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(summary_path)), exist_ok=True)
    counts = {"ok": 0, "failed": 0, "skipped": 0}
    t0 = time.monotonic()
    with open(summary_path, "w", encoding="utf-8") as summary:
        inputs, rows = plan(a, summary)
        counts["skipped"] = len(inputs) - len(rows)
        if rows:
            ds = ray.data.from_items(rows).map_batches(decode, batch_size=1, num_cpus=1)
            actor = dict(num_gpus=1) if use_gpus else dict(num_cpus=worker_cpus)
            ds = ds.map_batches(Transcriber, batch_size=a.batch_size, concurrency=workers,
                                fn_constructor_args=(os.path.abspath(a.model) if os.path.exists(a.model) else a.model,
                                                     "auto" if use_gpus else "cpu", a.threads, a.formats,
                                                     os.path.abspath(a.output_dir), a.output_dir, options),
                                **actor)
            for row in ds.iter_rows():
                line = json.loads(row["summary"])
                counts[line["status"]] += 1
                summary.write(row["summary"] + "\n")
                summary.flush()
    print("transcribed %d, failed %d, skipped %d of %d inputs in %.1f s on %d %s worker%s; summary: %s"
          % (counts["ok"], counts["failed"], counts["skipped"], len(inputs), time.monotonic() - t0, workers,
             "GPU" if use_gpus else "CPU", "" if workers == 1 else "s", summary_path), file=sys.stderr)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
