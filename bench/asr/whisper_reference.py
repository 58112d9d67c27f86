#!/usr/bin/env python3
"""faster-whisper's side of bench/asr/whisper_run.sh: one transcription of AUDIO with the settings
whisper_bench uses (greedy, beam_size=1, temperature 0 only, no VAD, timestamps on, conditioned on
previous text), timed from the first segment request to the last; prints a table row in
whisper_bench's layout and writes the text (one segment a line) to --text-out.

  whisper_reference.py --model CT2_DIR --audio FILE --threads N --text-out FILE
"""
import argparse
import os
import time
import wave

import numpy as np
from faster_whisper import WhisperModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--audio", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--text-out", required=True)
    a = ap.parse_args()
    with wave.open(a.audio, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        audio = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    model = WhisperModel(a.model, device="cpu", compute_type="default", cpu_threads=a.threads, num_workers=1)
    t0 = time.perf_counter()
    segments, info = model.transcribe(audio, beam_size=1, best_of=1, temperature=0.0, vad_filter=False,
                                      condition_on_previous_text=True, without_timestamps=False, language="en")
    texts = [s.text for s in segments]
    wall = time.perf_counter() - t0
    with open(a.text_out, "w") as f:
        f.write("\n".join(texts) + "\n")
    audio_s = len(audio) / 16000.0
    name = "faster-whisper " + os.path.basename(os.path.normpath(a.model))
    print("| %-28s | %-30s | %7d | %8.1f | %8.2f | %8.1f | %8s | %8s |" % (name, "cpu (ctranslate2)", a.threads, audio_s, wall,
                                                                         audio_s / wall, "-", "-"), flush=True)


if __name__ == "__main__":
    main()
