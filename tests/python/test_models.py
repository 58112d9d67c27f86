"""The module against the CLI with the cached real models (Whisper tiny.en, SmolLM2-135M): the same
transcript files and generated text, array input equal to path input, streaming equal to whole
text, vrun's messages for bad options and wrong model kinds, and the GIL free while a model runs."""
import json
import os
import threading
import time
import wave

import numpy as np
import pytest

import vrun
from conftest import CLIPS, DATA, SMOLLM2, WHISPER, cli_error, cli_generate, run_cli

FORMATS = ["txt", "srt", "vtt", "tsv", "json"]


def write_wav16(path, x):
    """16-kHz mono 16-bit WAV of float samples; returns the path."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())
    return path


def cli_files(cli, tmp_path, clip, *extra):
    out = tmp_path / "cli"
    run_cli(cli, "transcribe", "-m", WHISPER, "--backend", "cpu", "-o", ",".join(FORMATS), "--output-dir", str(out), *extra, clip)
    stem = os.path.splitext(os.path.basename(clip))[0]
    return {f: (out / (stem + "." + f)).read_text(encoding="utf-8") for f in FORMATS}


@pytest.mark.parametrize("clip", CLIPS, ids=os.path.basename)
def test_transcript_files_equal_cli(cli, whisper, tmp_path, clip):
    want = cli_files(cli, tmp_path, clip)
    t = whisper.transcribe(clip)
    assert t.source == clip and t.language == "en" and t.segments
    got = {"txt": t.to_text(), "srt": t.to_srt(), "vtt": t.to_vtt(), "tsv": t.to_tsv(), "json": t.to_json()}
    for f in FORMATS:
        assert got[f] == want[f], f
        assert t.render(f) == want[f]
    assert t.text == json.loads(want["json"])["text"] and t.text.strip()


def test_word_timestamps_equal_cli(cli, whisper, tmp_path):
    want = cli_files(cli, tmp_path, CLIPS[1], "--word-timestamps")
    t = whisper.transcribe(CLIPS[1], word_timestamps=True)
    assert t.to_json() == want["json"] and t.to_srt() == want["srt"]
    words = [w for s in t.segments for w in s.words]
    assert words and all(w.start <= w.end for w in words)
    assert "".join(w.text for w in words).strip() == t.text


def test_options_reach_the_decoder(cli, whisper, tmp_path):
    want = cli_files(cli, tmp_path, CLIPS[0], "--beam-size", "3", "--no-timestamps", "--prompt", "Mr. Quilter")
    t = whisper.transcribe(CLIPS[0], beam_size=3, timestamps=False, prompt="Mr. Quilter")
    assert t.to_json() == want["json"]


def test_array_input_equals_path_input(whisper):
    for clip in CLIPS[:2]:
        by_path = whisper.transcribe(clip)
        samples = vrun.load_audio(clip)
        by_array = whisper.transcribe(samples)
        assert by_array.source == ""
        assert by_array.to_json(audio=clip) == by_path.to_json()
        # float64 and non-contiguous arrays are converted to contiguous float32.
        assert whisper.transcribe(samples.astype(np.float64)).to_srt() == by_path.to_srt()
    with pytest.raises(ValueError, match="one-dimensional"):
        whisper.transcribe(np.zeros((2, 16000), np.float32))


def test_transcribe_many_equals_one_by_one(whisper):
    inputs = [CLIPS[0], vrun.load_audio(CLIPS[1]), CLIPS[2]]
    many = whisper.transcribe_many(inputs)
    assert [t.to_json(audio="x") for t in many] == [whisper.transcribe(i).to_json(audio="x") for i in inputs]


def json_alike(a, b, exact):
    """Equal, or (exact False) floats within 1e-4: probabilities summed in another order."""
    if not exact and isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-4
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_alike(a[k], b[k], exact) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_alike(x, y, exact) for x, y in zip(a, b))
    return a == b


def test_batched_transcribe_many_equals_one_by_one(cli, whisper):
    batched = vrun.SpeechModel(whisper.path, backend="cpu", batch_size=2)
    inputs = [CLIPS[0], vrun.load_audio(CLIPS[1]), CLIPS[2]]
    many = batched.transcribe_many(inputs, word_timestamps=True)
    alone = [whisper.transcribe(i, word_timestamps=True) for i in inputs]
    # Bit for bit where the CPU's BLAS sums a row alike whatever rows share its call (`vrun info`
    # says when it does not: then the same text, tokens and times, probabilities to 1e-4).
    exact = "depend on the rows beside it" not in run_cli(cli, "info").stdout
    for t, a in zip(many, alone):
        assert json_alike(json.loads(t.to_json(audio="x")), json.loads(a.to_json(audio="x")), exact)
    with pytest.raises(ValueError, match="batch_size"):
        vrun.SpeechModel(whisper.path, batch_size=0)


def test_on_segment_sees_every_segment(whisper):
    seen = []
    t = whisper.transcribe(CLIPS[2], on_segment=seen.append)
    assert [(s.start, s.end, s.text) for s in seen] == [(s.start, s.end, s.text) for s in t.segments]


def test_vad_chunks_side_by_side_equal_cli(cli, tmp_path):
    # vad=True with batch_size 3: the speech (eight utterances with 3-s pauses, 44 s of it) in
    # chunks of up to 30 s side by side, as `vrun transcribe --vad --batch-size 3` writes it.
    vad = os.path.join(DATA, "vad")
    a, b = vrun.load_audio(os.path.join(vad, "librivox_0870.wav")), vrun.load_audio(os.path.join(vad, "librivox_0930.wav"))
    pause = np.zeros(3 * 16000, np.float32)
    x = np.concatenate([a, pause, b, pause] * 3 + [a, pause, b])
    wav = write_wav16(tmp_path / "pauses.wav", x)
    model = os.path.join(vad, "silero_vad_16k_op15.onnx")
    want = cli_files(cli, tmp_path, str(wav), "--vad", "--vad-model", model, "--batch-size", "3")
    m = vrun.SpeechModel(WHISPER, backend="cpu", batch_size=3)
    seen = []
    t = m.transcribe(str(wav), vad=True, vad_model=model, on_segment=seen.append)
    assert t.to_json() == want["json"] and t.to_srt() == want["srt"]
    assert [(s.start, s.end) for s in seen] == [(s.start, s.end) for s in t.segments]
    assert t.to_text().count("Dashwood") == 4


def test_vad_equals_cli(cli, whisper, tmp_path):
    # The long-pause case (7.1 s of speech, 60 s of silence, 3.3 s of speech): vad=True gives the
    # CLI's --vad files, the second segment at its place in the whole audio.
    vad = os.path.join(DATA, "vad")
    first, second = vrun.load_audio(os.path.join(vad, "librivox_0870.wav")), vrun.load_audio(os.path.join(vad, "librivox_0930.wav"))
    x = np.concatenate([first, np.zeros(60 * 16000, np.float32), second])
    wav = write_wav16(tmp_path / "long_pause.wav", x)
    model = os.path.join(vad, "silero_vad_16k_op15.onnx")
    want = cli_files(cli, tmp_path, str(wav), "--vad", "--vad-model", model)
    t = whisper.transcribe(str(wav), vad=True, vad_model=model)
    assert t.to_json() == want["json"] and t.to_srt() == want["srt"]
    assert len(t.segments) == 2 and abs(t.segments[1].start - 67.1) < 0.5
    seen = []
    whisper.transcribe(str(wav), vad=True, vad_model=model, on_segment=seen.append)
    assert [(s.start, s.end) for s in seen] == [(s.start, s.end) for s in t.segments]
    assert whisper.transcribe_many([str(wav)], vad=True, vad_model=model)[0].to_json() == want["json"]
    # Without vad the pause moves the second segment (the report that asked for the VAD).
    assert whisper.transcribe(str(wav)).to_json() != want["json"]
    with pytest.raises(vrun.Error, match="missing.onnx"):
        whisper.transcribe(str(wav), vad=True, vad_model=str(tmp_path / "missing.onnx"))
    with pytest.raises(ValueError, match="vad_model is given but vad is False"):
        whisper.transcribe(str(wav), vad_model=model)


def test_speech_errors(cli, whisper, tmp_path):
    # An option this model cannot take: the CLI's message, before any audio is read.
    want = cli_error(cli, "transcribe", "-m", WHISPER, "-l", "de", CLIPS[0])
    with pytest.raises(ValueError) as e:
        whisper.transcribe(str(tmp_path / "not-read.wav"), language="de")
    assert str(e.value) == want
    with pytest.raises(ValueError, match="beam_size must be >= 1, got 0"):
        whisper.transcribe(CLIPS[0], beam_size=0)
    with pytest.raises(ValueError, match="task must be transcribe or translate"):
        whisper.transcribe(CLIPS[0], task="summarise")
    with pytest.raises(TypeError, match="beam_width"):
        whisper.transcribe(CLIPS[0], beam_width=2)
    with pytest.raises(FileNotFoundError):
        whisper.transcribe(str(tmp_path / "missing.wav"))


def test_wrong_model_kind(cli):
    want = cli_error(cli, "transcribe", "-m", SMOLLM2, CLIPS[0])
    with pytest.raises(vrun.Error) as e:
        vrun.SpeechModel(SMOLLM2)
    assert str(e.value) == want
    with pytest.raises(vrun.Error, match="a whisper model, not a text generator"):
        vrun.LanguageModel(WHISPER)


def test_gil_released_while_transcribing(whisper):
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    th = threading.Thread(target=tick)
    t0 = time.monotonic()
    th.start()
    whisper.transcribe(CLIPS[1])
    t1 = time.monotonic()
    stop.set()
    th.join()
    during = [t for t in ticks if t0 <= t <= t1]
    # With the GIL held by the model the thread would not run at all until transcribe returned.
    assert t1 - t0 > 0.2 and len(during) >= 0.25 * (t1 - t0) / 0.005, (len(during), t1 - t0)


PROMPTS = ["The capital of France is", "Once upon a time"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_generate_equals_cli(cli, smollm2, prompt):
    want = cli_generate(cli, prompt, 32, "--raw")
    assert smollm2.generate(prompt, max_tokens=32, temperature=0) == want
    assert smollm2.last_stats["generated_tokens"] <= 32 and smollm2.last_stats["prompt_tokens"] > 0


def test_chat_equals_cli(cli, smollm2):
    want = cli_generate(cli, "Name a colour.", 24, "--system", "You answer in French.")
    got = smollm2.chat([{"role": "system", "content": "You answer in French."}, {"role": "user", "content": "Name a colour."}],
                       max_tokens=24, temperature=0)
    assert got == want
    assert smollm2.chat([("user", PROMPTS[0])], max_tokens=16, temperature=0) == cli_generate(cli, PROMPTS[0], 16)


def test_stop_equals_cli(cli, smollm2):
    want = cli_generate(cli, PROMPTS[1], 48, "--raw", "--stop", ",")
    assert smollm2.generate(PROMPTS[1], max_tokens=48, temperature=0, stop=",") == want
    assert smollm2.last_stats["stop_reason"] in ("stop", "eos", "length")


def test_streaming_concatenates_to_text(smollm2):
    whole = smollm2.generate(PROMPTS[1], max_tokens=40, temperature=0)
    pieces = list(smollm2.generate(PROMPTS[1], max_tokens=40, temperature=0, stream=True))
    assert len(pieces) > 5 and "".join(pieces) == whole
    chat = smollm2.chat([{"role": "user", "content": PROMPTS[0]}], max_tokens=20, temperature=0)
    assert "".join(smollm2.chat([{"role": "user", "content": PROMPTS[0]}], max_tokens=20, temperature=0, stream=True)) == chat


def test_stream_closed_early_frees_the_model(smollm2):
    s = smollm2.generate(PROMPTS[1], max_tokens=200, temperature=0, stream=True)
    first = next(s)
    s.close()
    assert first and smollm2.last_stats["generated_tokens"] < 200
    assert smollm2.generate(PROMPTS[0], max_tokens=4, temperature=0)  # the model is free again


def test_gil_released_while_generating(smollm2):
    ticks = []
    stop = threading.Event()
    th = threading.Thread(target=lambda: [ticks.append(time.sleep(0.005)) for _ in iter(stop.is_set, True)])
    th.start()
    t0 = time.monotonic()
    smollm2.generate(PROMPTS[1], max_tokens=48, temperature=0, ignore_eos=True)
    elapsed = time.monotonic() - t0
    stop.set()
    th.join()
    assert len(ticks) >= 0.25 * elapsed / 0.005, (len(ticks), elapsed)


def test_generate_errors(smollm2):
    with pytest.raises(ValueError, match="temperature must be in"):
        smollm2.generate("x", temperature=-1)
    with pytest.raises(ValueError, match="max_tokens must be -1"):
        smollm2.generate("x", max_tokens=-5)
    with pytest.raises(ValueError, match="encodes to no tokens"):
        smollm2.generate("")
    with pytest.raises(ValueError, match="role must be"):
        smollm2.chat([{"role": "robot", "content": "hi"}])
    short = vrun.LanguageModel(SMOLLM2, backend="cpu", context=8)
    with pytest.raises(ValueError, match="fit in the context"):
        short.generate("one two three four five six seven eight nine ten")


def test_export_equals_cli_export(cli, tmp_path):
    if not os.path.exists(SMOLLM2):
        pytest.skip("SmolLM2 not cached")
    ours, theirs = tmp_path / "py.vrp", tmp_path / "cli.vrp"
    assert vrun.export(SMOLLM2, ours, context=256) == "llama"
    run_cli(cli, "export", "-m", SMOLLM2, "-o", str(theirs), "--ctx", "256")
    assert ours.read_bytes() == theirs.read_bytes()
    m = vrun.LanguageModel(ours, backend="cpu")
    assert m.context == 256
    assert m.generate(PROMPTS[0], max_tokens=16, temperature=0) == cli_generate(cli, PROMPTS[0], 16, "--raw")
    with pytest.raises(vrun.Error, match="already a program"):
        vrun.export(ours, tmp_path / "again.vrp", dtype="q8_0")


def test_export_parakeet_options_as_cli(cli, tmp_path):
    model = os.path.join(DATA, "parakeet", "tdt_small.nemo")
    audio = os.path.join(DATA, "parakeet", "long_concat.wav")
    ours, theirs = tmp_path / "py.vrp", tmp_path / "cli.vrp"
    assert vrun.export(model, ours, long_frames=0, batch_size=2, local_window=64) == "parakeet"
    run_cli(cli, "export", "-m", model, "-o", str(theirs), "--long-frames", "0", "--batch-size", "2", "--local-window", "64")
    assert ours.read_bytes() == theirs.read_bytes()
    m = vrun.SpeechModel(ours, backend="cpu")
    out = tmp_path / "cli"
    run_cli(cli, "transcribe", "-m", str(ours), "--backend", "cpu", "-o", "srt", "--output-dir", str(out), audio)
    assert m.transcribe(audio).to_srt() == (out / "long_concat.srt").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="long_frames"):
        vrun.export(model, tmp_path / "bad.vrp", long_frames=-2)
    with pytest.raises(vrun.Error, match="--long-frames applies to Parakeet"):
        vrun.export(WHISPER, tmp_path / "w.vrp", long_frames=10)


def test_export_whisper_transcribes_as_cli(cli, tmp_path):
    if not os.path.isdir(WHISPER):
        pytest.skip("Whisper tiny.en not cached")
    vrp = tmp_path / "tiny.q8_0.vrp"
    assert vrun.export(WHISPER, vrp, dtype="q8_0") == "whisper"
    m = vrun.SpeechModel(vrp, backend="cpu")
    out = tmp_path / "cli"
    run_cli(cli, "transcribe", "-m", str(vrp), "--backend", "cpu", "-o", "srt", "--output-dir", str(out), CLIPS[0])
    assert m.transcribe(CLIPS[0]).to_srt() == (out / "speech_0880.srt").read_text(encoding="utf-8")


def test_generate_many_equals_generate(smollm2):
    prompts = PROMPTS + ["The three primary colours are"]
    alone = [smollm2.generate(p, max_tokens=24, temperature=0) for p in prompts]
    assert smollm2.generate_many(prompts, max_tokens=24, temperature=0) == alone
    batched = vrun.LanguageModel(SMOLLM2, backend="cpu", context=256, batch_slots=2)
    # Three prompts over two slots: the third joins when the first sequence ends.
    assert batched.generate_many(prompts, max_tokens=24, temperature=0) == alone
    chats = [smollm2.chat([("user", p)], max_tokens=16, temperature=0) for p in prompts[:2]]
    assert batched.generate_many(prompts[:2], chat=True, max_tokens=16, temperature=0) == chats
