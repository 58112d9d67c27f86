#!/usr/bin/env python3
"""Multilingual decoding goldens from faster-whisper on the random-weight multilingual Whisper of
tests/data/whisper_import (its CTranslate2 folder, with the Hugging Face tokenizer.json beside it):
language detection, the language/task tokens of the start-of-transcript sequence, translate.
Greedy, temperature 0, no conditioning, no VAD. Writes tests/data/whisper/multilingual_goldens.json
(per case: detected language, and the first 16 tokens of the transcript's segments; random weights
repeat themselves, so only the start of each window is compared).

  mkdir /tmp/ml && ln -s $PWD/tests/data/whisper_import/ct2/* $PWD/tests/data/whisper_import/hf/tokenizer.json /tmp/ml
  /tmp/whisper-venv/bin/python tests/reference/make_whisper_multilingual_goldens.py /tmp/ml
"""
import json
import os
import sys

from faster_whisper import WhisperModel
import faster_whisper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_whisper_goldens as base  # noqa: E402

CASES = [
    dict(clip="espeak_fast", language=None, task="transcribe", timestamps=False),
    dict(clip="espeak_slow", language="de", task="translate", timestamps=False),
    dict(clip="librivox_0870", language=None, task="transcribe", timestamps=True),
    dict(clip="librivox_0870", language="fr", task="transcribe", timestamps=True),
]


def main():
    model = WhisperModel(sys.argv[1], device="cpu", compute_type="float32", cpu_threads=2)
    audio = {"espeak_fast": base.read_wav16(os.path.join(base.OUT, "espeak_fast.wav")),
             "espeak_slow": base.read_wav16(os.path.join(base.OUT, "espeak_slow.wav")),
             "librivox_0870": base.read_wav16(base.LIBRIVOX[0])}
    out = {"reference": f"faster-whisper {faster_whisper.__version__}, beam_size=1, temperature=0, "
                        "condition_on_previous_text=False, vad_filter=False, compute_type=float32", "cases": []}
    for case in CASES:
        segments, info = model.transcribe(audio[case["clip"]], language=case["language"], task=case["task"],
                                          beam_size=1, best_of=1, temperature=0.0, condition_on_previous_text=False,
                                          without_timestamps=not case["timestamps"], vad_filter=False)
        tokens = [t for s in segments for t in s.tokens]
        out["cases"].append(dict(case, detected_language=info.language,
                                 language_probability=round(float(info.language_probability), 4),
                                 samples=int(len(audio[case["clip"]])), tokens=tokens[:16]))
        print(out["cases"][-1])
    with open(os.path.join(base.OUT, "multilingual_goldens.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
