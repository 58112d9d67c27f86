"""examples/ray_transcribe on a local Ray instance (2 CPUs, 2 CPU workers): a dozen clips under
nested names, each transcript equal to the file `vrun transcribe -o txt,srt` writes for the same
audio, one summary line per input; manifests (JSON lines with ids, plain paths) and a rerun that
skips what is done."""
import json
import os
import shutil
import sys

import pytest

from conftest import CLIPS, DATA, WHISPER, run_cli

EXAMPLE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "ray_transcribe"))
SOURCES = CLIPS + [os.path.join(DATA, "whisper", "espeak_fast.wav")]
FOLDERS = ["talks/2024", "talks/2025/day one", "misc"]
FIELDS = {"input", "id", "outputs", "duration_s", "seconds", "rtfx", "status"}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    if not os.path.isdir(WHISPER):
        pytest.skip("Whisper tiny.en not cached: scripts/fetch-models.sh whisper-tiny")
    ray = pytest.importorskip("ray")
    # The actors import the example (and the module) the way the driver does.
    os.environ["PYTHONPATH"] = os.pathsep.join([EXAMPLE, os.environ.get("PYTHONPATH", "")])
    sys.path.insert(0, EXAMPLE)
    import transcribe
    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    yield transcribe, tmp_path_factory.mktemp("ray")
    ray.shutdown()


@pytest.fixture(scope="module")
def expected(cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    run_cli(cli, "transcribe", "-m", WHISPER, "--backend", "cpu", "-o", "txt,srt", "--output-dir", str(out), *SOURCES)
    # The CLI names plain files by their path below the longest folder they share.
    common = os.path.commonpath([os.path.dirname(os.path.abspath(s)) for s in SOURCES])
    stem = {src: os.path.splitext(os.path.relpath(os.path.abspath(src), common))[0] for src in SOURCES}
    return {src: {f: (out / (stem[src] + "." + f)).read_text(encoding="utf-8") for f in ("txt", "srt")} for src in SOURCES}


def summary(path):
    lines = [json.loads(l) for l in open(path, encoding="utf-8")]
    for line in lines:
        assert set(line) == FIELDS | ({"error"} if line["status"] == "failed" else set()), line
    return lines


def test_folder_mirrors_the_tree(job, expected):
    transcribe, tmp = job
    src, out = tmp / "in", tmp / "out"
    made = {}
    for i, folder in enumerate(FOLDERS):
        for j, clip in enumerate(SOURCES):
            rel = os.path.join(folder, "clip %d-%d.wav" % (i, j))
            os.makedirs(src / folder, exist_ok=True)
            shutil.copy(clip, src / rel)
            made[os.path.splitext(rel)[0]] = clip
    assert len(made) == 12
    assert transcribe.main([str(src), "-m", WHISPER, "--output-dir", str(out), "-o", "txt,srt", "--cpu-workers", "2"]) == 0
    for base, clip in made.items():
        for f in ("txt", "srt"):
            assert (out / (base + "." + f)).read_text(encoding="utf-8") == expected[clip][f], (base, f)
    lines = summary(out / "summary.jsonl")
    assert sorted(l["id"] for l in lines) == sorted(made) and all(l["status"] == "ok" for l in lines)
    for l in lines:
        assert l["outputs"] == [os.path.join(str(out), l["id"] + ".txt"), os.path.join(str(out), l["id"] + ".srt")]
        assert l["duration_s"] > 1 and l["seconds"] > 0 and l["rtfx"] > 0
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    # A second run finds every output and skips its input.
    assert transcribe.main([str(src), "-m", WHISPER, "--output-dir", str(out), "-o", "txt,srt"]) == 0
    again = summary(out / "summary.jsonl")
    assert len(again) == 12 and all(l["status"] == "skipped" for l in again)


def test_manifests(job, expected):
    transcribe, tmp = job
    jsonl = tmp / "manifest.jsonl"
    missing = str(tmp / "gone.wav")
    jsonl.write_text("\n".join(json.dumps(d) for d in [{"path": SOURCES[0], "id": "first"}, {"path": missing, "id": "gone"},
                                                       {"path": SOURCES[2], "id": "nested/second"}]) + "\n")
    out = tmp / "out-jsonl"
    assert transcribe.main([str(jsonl), "-m", WHISPER, "--output-dir", str(out), "-o", "srt", "--cpu-workers", "2"]) == 1
    assert (out / "first.srt").read_text(encoding="utf-8") == expected[SOURCES[0]]["srt"]
    assert (out / "nested" / "second.srt").read_text(encoding="utf-8") == expected[SOURCES[2]]["srt"]
    by_id = {l["id"]: l for l in summary(out / "summary.jsonl")}
    assert by_id["gone"]["status"] == "failed" and missing in by_id["gone"]["error"] and by_id["gone"]["outputs"] == []
    assert by_id["first"]["status"] == by_id["nested/second"]["status"] == "ok"
    # Plain paths: named relative to their longest common folder.
    plain = tmp / "paths.txt"
    plain.write_text("%s\n%s\n" % (SOURCES[0], SOURCES[2]))
    out = tmp / "out-plain"
    assert transcribe.main([str(plain), "-m", WHISPER, "--output-dir", str(out), "-o", "txt", "--cpu-workers", "2"]) == 0
    assert (out / "audio" / "speech_0880.txt").read_text(encoding="utf-8") == expected[SOURCES[0]]["txt"]
    assert (out / "whisper" / "espeak_slow.txt").read_text(encoding="utf-8") == expected[SOURCES[2]]["txt"]
