#!/usr/bin/env python3
"""Makes the feature goldens in tests/data/audio/ from the reference implementations themselves:
openai-whisper's log_mel_spectrogram and NeMo's AudioToMelSpectrogramPreprocessor in eval mode.

    tests/reference/setup_audio_venv.sh            # once, creates /tmp/vrun-audio-venv
    /tmp/vrun-audio-venv/bin/python tests/reference/make_audio_goldens.py

Inputs: two LibriVox clips from Debian's pocketsphinx-testdata (copied as speech_*.wav) and a
synthetic signal written here (synth.wav, float32, a length that is not a multiple of the hop).
Every input is read with soundfile (libsndfile), as the C++ side reads it, so both start from
the same float32 samples. Rerunning reproduces every file; synth.wav differs only in the time stamp
libsndfile puts in its PEAK chunk.

Whisper goldens keep the content frames plus 16 padding frames ([n_mels, content + 16]): every
later frame of the 30-s padding equals the last stored one, which this script checks.
"""
import json
import os
import sys

import numpy as np
import soundfile as sf
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "data", "audio"))
SPEECH = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-{}.wav"
WHISPER_KEEP_PADDING = 16

# Preprocessor configs as NeMo model configs write them.
NEMO_CONFIGS = {
    # parakeet-tdt-0.6b-v2's model_config.yaml preprocessor block.
    "parakeet128": {
        "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
        "sample_rate": 16000, "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01,
        "window": "hann", "features": 128, "n_fft": 512, "log": True, "frame_splicing": 1,
        "dither": 1.0e-05, "pad_to": 0, "pad_value": 0.0,
    },
    # Only the feature count: every other parameter is the class default (20 ms window, pad_to 16).
    "defaults80": {"features": 80},
    # Every parameter moved away from the defaults, to show each one is honoured.
    "variant64": {
        "sample_rate": 16000, "window_size": 0.025, "window_stride": 0.01, "features": 64, "n_fft": 400,
        "window": "hamming", "normalize": "all_features", "log_zero_guard_type": "clamp",
        "log_zero_guard_value": 1e-5, "preemph": None, "mag_power": 1.0, "lowfreq": 20, "highfreq": 7600,
        "pad_to": 8, "pad_value": -1.0,
    },
}


def synth():
    """1.2345 s: a 440 Hz tone, a 200 Hz -> 6 kHz chirp, a burst of white noise, a noise floor
    (white at -40 dBFS plus leaky-integrated white at about -35 dBFS, like a room's hiss and
    rumble) and an exactly silent stretch.

    The bands between pure tones hold only window leakage 80-100 dB under the peak (NeMo also
    pre-emphasises: -30 dB at 60 Hz, where its mel bands are single FFT bins), and per-feature
    normalisation divides by those bands' small spread: there float32 FFT rounding alone moves the
    NeMo features by 1e-4 to 4e-4. So the synthetic signal has a noise floor, and its NeMo goldens
    come from NeMo's featurizer run in float64 (NeMo's float32 output is printed alongside); the
    speech clips use NeMo exactly as it runs, in float32.
    """
    sr = 16000
    n = 19752
    t = np.arange(n) / sr
    rng = np.random.default_rng(1234)
    x = 0.3 * np.sin(2 * np.pi * 440 * t)
    x += 0.2 * np.sin(2 * np.pi * (200 * t + (6000 - 200) / (2 * t[-1]) * t * t))
    x[6000:9000] += 0.1 * rng.standard_normal(3000)
    rumble = np.zeros(n)
    white = rng.standard_normal(n)
    for i in range(1, n):
        rumble[i] = 0.995 * rumble[i - 1] + white[i]
    x += 0.018 * rumble / np.sqrt(np.mean(rumble**2))
    x += 0.01 * rng.standard_normal(n)
    x[14000:16000] = 0.0
    return x.astype(np.float32)


def save(name, array):
    array = np.ascontiguousarray(array, dtype=np.float32)
    assert np.abs(array).max() > 0, name
    np.save(os.path.join(OUT, name), array)


def whisper_goldens(stem, audio):
    import whisper

    for n_mels in (80, 128):
        full = whisper.log_mel_spectrogram(torch.from_numpy(audio), n_mels, padding=whisper.audio.N_SAMPLES).numpy()
        content = len(audio) // whisper.audio.HOP_LENGTH
        keep = content + WHISPER_KEEP_PADDING
        assert full.shape[1] == content + whisper.audio.N_FRAMES
        assert np.array_equal(full[:, keep:], np.repeat(full[:, keep - 1:keep], full.shape[1] - keep, axis=1))
        save(f"{stem}_whisper{n_mels}.npy", full[:, :keep])
    # log_mel_spectrogram(audio) without padding: the right edge is reflected speech, not zeros.
    save(f"{stem}_whisper80_nopad.npy", whisper.log_mel_spectrogram(torch.from_numpy(audio), 80).numpy())


def nemo_goldens(stem, audio, float64):
    """NeMo's preprocessor in eval mode. With float64, its featurizer runs in double precision
    (the same code after .double()); see synth() for why the synthetic signal needs that."""
    from nemo.collections.asr.modules import AudioToMelSpectrogramPreprocessor

    for name, cfg in NEMO_CONFIGS.items():
        kwargs = {k: v for k, v in cfg.items() if k != "_target_"}
        pre = AudioToMelSpectrogramPreprocessor(**kwargs).eval()
        length = torch.tensor([len(audio)])
        with torch.no_grad():
            feats, valid = pre(input_signal=torch.from_numpy(audio)[None], length=length)
            if float64:
                f32 = feats
                feats, valid = pre.featurizer.double()(torch.from_numpy(audio.astype(np.float64))[None], length)
                gap = float((f32.double() - feats).abs().max())
                print(f"{stem} {name}: NeMo float32 vs float64 max |diff| {gap:.2e}")
        assert int(valid[0]) == len(audio) // int(cfg.get("window_stride", 0.01) * 16000)
        save(f"{stem}_nemo_{name}.npy", feats[0].numpy())


def main():
    os.makedirs(OUT, exist_ok=True)
    clips = {}
    for fid in ("0880", "0930"):
        src = SPEECH.format(fid)
        if not os.path.exists(src):
            sys.exit(f"{src} missing: install Debian's pocketsphinx-testdata (scripts/setup.sh)")
        data, sr = sf.read(src, dtype="int16")
        assert sr == 16000
        dst = os.path.join(OUT, f"speech_{fid}.wav")
        sf.write(dst, data, sr, subtype="PCM_16")
        clips[f"speech_{fid}"] = dst
    sf.write(os.path.join(OUT, "synth.wav"), synth(), 16000, subtype="FLOAT")
    clips["synth"] = os.path.join(OUT, "synth.wav")

    for name, cfg in NEMO_CONFIGS.items():
        with open(os.path.join(OUT, f"nemo_{name}.json"), "w") as f:
            json.dump(cfg, f, indent=1)

    import whisper

    filters = np.load(os.path.join(os.path.dirname(whisper.__file__), "assets", "mel_filters.npz"))
    for n_mels in (80, 128):
        save(f"whisper_mel_filters{n_mels}.npy", filters[f"mel_{n_mels}"])

    for stem, path in clips.items():
        audio, sr = sf.read(path, dtype="float32")
        assert sr == 16000
        whisper_goldens(stem, audio)
        nemo_goldens(stem, audio, float64=stem == "synth")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"goldens written to {OUT} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
