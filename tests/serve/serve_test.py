"""`vrun serve` driven by the official `openai` Python client (and `requests` for what the client
cannot send): every answer is checked against the CLI's for the same input.

    serve_test.py VRUN api|parakeet|concurrency|errors|sigterm|batching|vad|devices
"""
import concurrent.futures
import json
import re
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import wave

import openai
import requests

from serve_common import (LLM_NAME, PARAKEET, SPEECH, WHISPER, WHISPER_NAME, Server, cli_generate, cli_transcribe, require_inputs, wait_for)

VAD_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "vad")
CHAT_PROMPTS = ["The capital of France is", "Write one sentence about the sea.", "List three fruits.", "What is 7 times 8?"]


def client(server, key="unused"):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=300)


def chat(c, prompt, max_tokens=32, system=None, **kw):
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    kw.setdefault("temperature", 0)
    r = c.chat.completions.create(model=LLM_NAME, messages=messages, max_tokens=max_tokens, **kw)
    return r


def stream_chat(c, prompt, max_tokens=32, on_first=None):
    s = c.chat.completions.create(model=LLM_NAME, messages=[{"role": "user", "content": prompt}], temperature=0,
                                  max_tokens=max_tokens, stream=True, stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    for chunk in s:
        if on_first:
            on_first()
            on_first = None
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            text += ch.delta.content or ""
            finish = ch.finish_reason or finish
    return text, finish, usage


def transcribe(c, audio, fmt="json", words=True):
    with open(audio, "rb") as f:
        kw = {"timestamp_granularities": ["word", "segment"]} if words else {}
        return c.audio.transcriptions.create(model=WHISPER_NAME, file=f, response_format=fmt, **kw)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what.splitlines()[0][:150], flush=True)


GENESIS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "llama", "kjv_genesis_1-12.txt")


def check_kept_prompt(vrun, c):
    """A long prompt sent again starts past the whole 512-token chunks its slot kept (usage's
    prompt_tokens_details.cached_tokens) with the same text as the CLI's; cache_prompt: false
    (llama-server's field) prefills it all again."""
    with open(GENESIS) as f:
        prompt = " ".join(f.read().split()[:450]) + "\nWho is named first?"
    want = cli_generate(vrun, prompt, 12)
    first, again = chat(c, prompt, 12), chat(c, prompt, 12)
    n = first.usage.prompt_tokens
    check(n > 513 and first.choices[0].message.content == want, "a %d-token prompt equals the CLI: %r" % (n, want))
    check(first.usage.prompt_tokens_details.cached_tokens == 0, "its first time nothing is cached")
    check(again.choices[0].message.content == want and again.usage.prompt_tokens_details.cached_tokens == (n - 1) // 512 * 512,
          "sent again: the same text, %d of its tokens kept" % again.usage.prompt_tokens_details.cached_tokens)
    fresh = chat(c, prompt, 12, extra_body={"cache_prompt": False})
    check(fresh.choices[0].message.content == want and fresh.usage.prompt_tokens_details.cached_tokens == 0,
          "cache_prompt false: the same text, nothing kept")


def case_api(vrun):
    with Server(vrun) as s:
        c = client(s)
        ids = [m.id for m in c.models.list().data]
        check(ids == [LLM_NAME, WHISPER_NAME], "GET /v1/models lists both models: %s" % ids)
        check(requests.get(s.url + "/health").json() == {"status": "ok"}, "GET /health")
        for prompt in CHAT_PROMPTS[:2]:
            want = cli_generate(vrun, prompt, 32)
            r = chat(c, prompt)
            got = r.choices[0].message.content
            check(got == want, "chat equals `vrun generate --temp 0`: %r vs %r" % (got, want))
            check(r.usage.completion_tokens <= 32 and r.usage.prompt_tokens > 0, "chat usage %s" % r.usage)
            text, finish, usage = stream_chat(c, prompt)
            check(text == want, "streamed chat equals the CLI: %r" % text)
            check(finish in ("stop", "length") and usage and usage.completion_tokens == r.usage.completion_tokens,
                  "stream ends with finish_reason %s and a usage chunk %s" % (finish, usage))
        want = cli_generate(vrun, "Name a colour.", 24, system="You answer in French.")
        got = chat(c, "Name a colour.", 24, system="You answer in French.").choices[0].message.content
        check(got == want, "chat with a system message equals `vrun generate --system`: %r" % got)
        base = cli_generate(vrun, CHAT_PROMPTS[0], 32)
        words = base.split()
        stop = words[len(words) // 2] if len(words) > 2 else None
        if stop:
            want = cli_generate(vrun, CHAT_PROMPTS[0], 32, stop=stop)
            got = chat(c, CHAT_PROMPTS[0], stop=[stop]).choices[0]
            check(got.message.content == want and got.finish_reason == "stop", "stop %r equals `--stop`: %r" % (stop, want))
        want = cli_generate(vrun, "Once upon a time", 24, raw=True)
        r = c.completions.create(model=LLM_NAME, prompt="Once upon a time", max_tokens=24, temperature=0)
        check(r.choices[0].text == want, "completion equals `vrun generate --raw --temp 0`: %r" % want)
        streamed = "".join(ch.choices[0].text for ch in c.completions.create(
            model=LLM_NAME, prompt="Once upon a time", max_tokens=24, temperature=0, stream=True) if ch.choices)
        check(streamed == want, "streamed completion equals the CLI")
        r = c.chat.completions.create(model=LLM_NAME, messages=[{"role": "user", "content": "Tell me a story."}], temperature=0.9,
                                      seed=7, max_tokens=16)
        r2 = c.chat.completions.create(model=LLM_NAME, messages=[{"role": "user", "content": "Tell me a story."}], temperature=0.9,
                                       seed=7, max_tokens=16)
        check(r.choices[0].message.content == r2.choices[0].message.content, "sampling with a seed repeats")
        for audio in SPEECH[:2]:
            ref = cli_transcribe(vrun, audio)
            check(transcribe(c, audio, "json").text == ref["json"]["text"], "transcription json equals the CLI: %r" % ref["json"]["text"])
            check(transcribe(c, audio, "text") == ref["json"]["text"] + "\n", "transcription text")
            check(transcribe(c, audio, "srt") == ref["srt"], "transcription srt equals the CLI's file")
            check(transcribe(c, audio, "vtt") == ref["vtt"], "transcription vtt equals the CLI's file")
            v = transcribe(c, audio, "verbose_json")
            ref_words = [w for seg in ref["json"]["segments"] for w in seg["words"]]
            got_words = [(w.word, w.start, w.end) for w in v.words]
            check(v.text == ref["json"]["text"] and len(v.segments) == len(ref["json"]["segments"]),
                  "verbose_json text and segments equal the CLI's")
            check(got_words == [(w["word"], w["start"], w["end"]) for w in ref_words] and len(got_words) > 3,
                  "verbose_json words equal the CLI's word timestamps (%d words)" % len(got_words))
            check(all(0 <= w.start <= w.end <= v.duration + 0.01 for w in v.words), "word times inside the audio")
        # tiny.en cannot translate (as `vrun transcribe --task translate` says): a 400, not a crash.
        try:
            with open(SPEECH[0], "rb") as f:
                c.audio.translations.create(model=WHISPER_NAME, file=f)
            raise AssertionError("an English-only model accepted a translation")
        except openai.BadRequestError as e:
            check("English-only" in e.message, "translation with an English-only model: 400 %s" % e.message)
        check_kept_prompt(vrun, c)
        metrics = requests.get(s.url + "/metrics").text
        check(re.search(r'vrun_requests_total\{endpoint="/v1/chat/completions",status="200"\} \d+', metrics) is not None,
              "metrics count requests by endpoint and status")
        for name in ("vrun_completion_tokens_total", "vrun_prompt_tokens_total", "vrun_audio_seconds_total",
                     "vrun_time_to_first_token_seconds_count", "vrun_request_duration_seconds_count", "vrun_batch_size_count",
                     "vrun_queue_depth", "vrun_step_seconds_count", "vrun_step_prefill_seconds_total",
                     "vrun_prompt_tokens_cached_total"):
            check(re.search(name + r"\{[^}]*\} [0-9.e+]+", metrics) is not None, "metrics has " + name)
        tokens = float(re.search(r'vrun_completion_tokens_total\{model="smollm2"\} (\S+)', metrics).group(1))
        kept = float(re.search(r'vrun_prompt_tokens_cached_total\{model="smollm2"\} (\S+)', metrics).group(1))
        check(kept >= 512, "kept prompt tokens counted (%g)" % kept)
        check(tokens > 100, "completion tokens counted (%g)" % tokens)
        step_s = float(re.search(r'vrun_step_seconds_sum\{model="smollm2"\} (\S+)', metrics).group(1))
        prompt_s = float(re.search(r'vrun_step_prefill_seconds_total\{model="smollm2"\} (\S+)', metrics).group(1))
        check(0 < prompt_s < step_s, "steps' prompt chunks timed: %.3f of %.3f s" % (prompt_s, step_s))
        check(s.stop() == 0, "SIGTERM: exit 0")
        check(any(re.match(r"vrun serve: POST /v1/chat/completions 200 [0-9.]+ ms$", l) for l in s.lines), "access log lines")
        check(not any("capital of France" in l for l in s.lines), "nothing from request bodies in the log")


def long_pause_wav(path):
    """The long-pause case: 7.1 s of speech, 60 s of silence, 3.3 s of speech (16 kHz, 16-bit)."""
    frames = []
    for name in ("librivox_0870.wav", "librivox_0930.wav"):
        with wave.open(os.path.join(VAD_DATA, name)) as w:
            frames.append(w.readframes(w.getnframes()))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(frames[0] + b"\0\0" * (60 * 16000) + frames[1])
    return path


def case_vad(vrun):
    """--vad: the long-pause clip's transcription equals `vrun transcribe --vad`'s (the second segment at
    67.1 s, not pulled early by the pause); vad_filter=false gives the plain CLI's; a bad vad_filter, or
    vad_filter=true on a server started without --vad, is a 400."""
    model = os.path.join(VAD_DATA, "silero_vad_16k_op15.onnx")
    with tempfile.TemporaryDirectory() as d:
        wav = long_pause_wav(os.path.join(d, "long_pause.wav"))
        want = cli_transcribe(vrun, wav, extra=("--vad", "--vad-model", model))
        plain = cli_transcribe(vrun, wav)
        check(want["srt"] != plain["srt"], "the CLI's --vad changes the long-pause transcript")
        with Server(vrun, "--vad", "--vad-model", model) as s:
            c = client(s)
            v = transcribe(c, wav, "verbose_json")
            check(v.text == want["json"]["text"] and [(x.start, x.end) for x in v.segments] ==
                  [(x["start"], x["end"]) for x in want["json"]["segments"]], "--vad verbose_json equals `vrun transcribe --vad`")
            check(abs(v.segments[1].start - 67.1) < 0.5, "the second segment starts at %.2f s (67.1 s in the audio)" % v.segments[1].start)
            check(transcribe(c, wav, "srt") == want["srt"], "--vad srt equals the CLI's --vad file")
            with open(wav, "rb") as f:
                off = c.audio.transcriptions.create(model=WHISPER_NAME, file=f, response_format="srt",
                                                    timestamp_granularities=["word", "segment"], extra_body={"vad_filter": "false"})
            check(off == plain["srt"], "vad_filter=false equals the CLI without --vad")
            with open(wav, "rb") as f:
                r = requests.post(s.url + "/v1/audio/transcriptions", files={"file": f},
                                  data={"model": WHISPER_NAME, "vad_filter": "maybe"})
            check(r.status_code == 400 and r.json()["error"]["param"] == "vad_filter", "vad_filter=maybe: 400 %s" % r.text[:120])
        with Server(vrun) as s:
            with open(wav, "rb") as f:
                r = requests.post(s.url + "/v1/audio/transcriptions", files={"file": f},
                                  data={"model": WHISPER_NAME, "vad_filter": "true"})
            check(r.status_code == 400 and "--vad" in r.json()["error"]["message"],
                  "vad_filter=true without --vad: 400 %s" % r.text[:120])
    p = subprocess.run([vrun, "serve", "-m", WHISPER, "--vad", "--vad-model", "/nonexistent/vad.onnx"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and "/nonexistent/vad.onnx" in p.stderr, "a missing --vad-model stops the server before it loads: %s" % p.stderr.strip()[:120])


def case_parakeet(vrun):
    """A Parakeet model served beside Whisper: each answers to its own name, with the CLI's text."""
    with Server(vrun, "-m", PARAKEET, "--max-concurrent", "32") as s:
        c = client(s)
        check([m.id for m in c.models.list().data] == [LLM_NAME, WHISPER_NAME, "ctc_small.nemo"], "three models listed")
        for audio in SPEECH[:3]:
            ref = cli_transcribe(vrun, audio, model=PARAKEET)
            with open(audio, "rb") as f:
                v = c.audio.transcriptions.create(model="ctc_small.nemo", file=f, response_format="verbose_json",
                                                  timestamp_granularities=["word"])
            check(v.text == ref["json"]["text"], "Parakeet verbose_json text equals the CLI: %r" % v.text)
            ref_words = [(w["word"], w["start"], w["end"]) for seg in ref["json"]["segments"] for w in seg["words"]]
            check([(w.word, w.start, w.end) for w in v.words] == ref_words, "Parakeet words equal the CLI's")
            with open(audio, "rb") as f:
                srt = c.audio.transcriptions.create(model="ctc_small.nemo", file=f, response_format="srt")
            check(srt == ref["srt"], "Parakeet srt equals the CLI's file")
            check(transcribe(c, audio, "srt") == cli_transcribe(vrun, audio)["srt"], "Whisper beside it unchanged")

        # Concurrent Parakeet requests may share batched encoder calls; each text stays the CLI's.
        def srt(audio):
            with open(audio, "rb") as f:
                return c.audio.transcriptions.create(model="ctc_small.nemo", file=f, response_format="srt")

        files = SPEECH * 4
        with concurrent.futures.ThreadPoolExecutor(len(files)) as pool:
            got = list(pool.map(srt, files))
        check(all(g == cli_transcribe(vrun, a, model=PARAKEET)["srt"] for g, a in zip(got, files)),
              "%d concurrent Parakeet requests equal the CLI's" % len(files))
        m = re.search(r'vrun_batch_size_count\{model="ctc_small.nemo"\} (\d+)', requests.get(s.url + "/metrics").text)
        print("Parakeet worker steps for %d requests: %s" % (len(files) + 6, m.group(1) if m else "?"))
        check(s.stop() == 0, "exit 0")


def cli_answers(vrun, jobs, max_tokens):
    """The CLI's answer to each distinct (kind, input) job: generated text (chat) or an SRT (audio)."""
    return {(kind, x): cli_generate(vrun, x, max_tokens) if kind == "chat" else cli_transcribe(vrun, x)["srt"]
            for kind, x in set(jobs)}


def check_alone(c, want, max_tokens):
    """Served alone, one after another, each job answers what the CLI does: the reference each
    concurrent answer must equal."""
    for (kind, x), text in sorted(want.items()):
        alone = chat(c, x, max_tokens).choices[0].message.content if kind == "chat" else transcribe(c, x, "srt")
        check(alone == text, "alone: %s %s equals the CLI" % (kind, x[-40:]))


def mixed_jobs(n, audio_at):
    """n requests: ("audio", file) where audio_at(k), else ("chat", prompt), each list taken in turn."""
    return [("audio", SPEECH[k % len(SPEECH)]) if audio_at(k) else ("chat", CHAT_PROMPTS[k % len(CHAT_PROMPTS)])
            for k in range(n)]


def run_clients(jobs, clients, answer, limit_s):
    """Client k < clients asks its share of jobs in turn (the k-th of equal runs), answer(k, j, kind, x)
    giving the j-th one's answer; all clients at once. Returns (kind, x, answer) for each job, in
    client order."""
    per_client = len(jobs) // clients

    def one_client(k):
        return [(kind, x, answer(k, j, kind, x)) for j, (kind, x) in enumerate(jobs[k * per_client:(k + 1) * per_client])]

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return [r for f in [pool.submit(one_client, k) for k in range(clients)] for r in f.result(timeout=limit_s)]


def check_memory_back(s, idle_rss):
    rss = s.rss_bytes()
    check(rss < idle_rss * 1.25 + (64 << 20), "memory back near idle: %.0f MiB after vs %.0f MiB idle" % (rss / 2**20, idle_rss / 2**20))


def check_equal_to_alone(results, want):
    for kind, x, got in results:
        if got != want[(kind, x)]:
            raise AssertionError("concurrent %s %s differs from alone: %r vs %r" % (kind, x, got, want[(kind, x)]))


def case_concurrency(vrun, clients=16, per_client=2, limit_s=600):
    jobs = mixed_jobs(clients * per_client, lambda k: k % 2 == 1)
    want = cli_answers(vrun, jobs, 32)
    with Server(vrun, "--max-concurrent", str(clients * per_client)) as s:
        c = client(s)
        check_alone(c, want, 32)
        idle_rss = s.rss_bytes()
        t0 = time.time()

        def answer(k, j, kind, x):
            if kind == "chat" and j % 2 == 1:
                return stream_chat(c, x)[0]
            return chat(c, x).choices[0].message.content if kind == "chat" else transcribe(c, x, "srt")

        results = run_clients(jobs, clients, answer, limit_s)
        wall = time.time() - t0
        check(len(results) == clients * per_client, "%d responses in %.1f s" % (len(results), wall))
        check(wall < limit_s, "inside the time limit")
        check_equal_to_alone(results, want)
        check(True, "every concurrent response equals the request served alone")
        check_memory_back(s, idle_rss)
        check(s.stop() == 0, "exit 0")


def raw_post(s, path, body, headers=None):
    return requests.post(s.url + path, data=body, headers=headers or {"Content-Type": "application/json"}, timeout=120)


def multipart(fields, boundary="vrunTestBoundary", close=True):
    out = b""
    for name, value, filename in fields:
        disp = 'form-data; name="%s"' % name + ('; filename="%s"' % filename if filename else "")
        out += b"--" + boundary.encode() + b"\r\nContent-Disposition: " + disp.encode() + b"\r\n\r\n" + value + b"\r\n"
    if close:
        out += b"--" + boundary.encode() + b"--\r\n"
    return out, {"Content-Type": "multipart/form-data; boundary=" + boundary}


def case_errors(vrun):
    audio = open(SPEECH[0], "rb").read()
    ok_chat = json.dumps({"model": LLM_NAME, "messages": [{"role": "user", "content": CHAT_PROMPTS[0]}], "temperature": 0,
                          "max_tokens": 32})
    with Server(vrun, "--parallel", "2", "--ctx-size", "512", "--max-body-mb", "1", "--max-tokens", "64") as s:
        long_prompt = " ".join(["word"] * 400)
        cases = [
            ("/v1/chat/completions", b"{not json", None, 400, None),
            ("/v1/chat/completions", b"[1, 2]", None, 400, None),
            ("/v1/chat/completions", b"", None, 400, None),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME}), None, 400, "messages"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": "hi"}), None, 400, "messages"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": [{"role": "wizard", "content": "x"}]}), None, 400,
             "messages[0].role"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": [{"role": "user", "content": 5}]}), None, 400,
             "messages[0].content"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": [{"role": "user", "content": "x"}],
                                                 "temperature": "hot"}), None, 400, "temperature"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": [{"role": "user", "content": "x"}], "n": 2}), None, 400,
             "n"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": [{"role": "user", "content": "x"}],
                                                 "max_tokens": 1000}), None, 400, "max_tokens"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": [{"role": "user", "content": "x"}],
                                                 "max_tokens": -3}), None, 400, "max_tokens"),
            ("/v1/chat/completions", json.dumps({"model": 12, "messages": [{"role": "user", "content": "x"}]}), None, 400, "model"),
            ("/v1/chat/completions", json.dumps({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}), None, 404, "model"),
            ("/v1/chat/completions", json.dumps({"model": WHISPER_NAME, "messages": [{"role": "user", "content": "x"}]}), None, 400,
             "model"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": [{"role": "user", "content": long_prompt}]}), None,
             400, "messages"),
            ("/v1/completions", json.dumps({"model": LLM_NAME, "prompt": long_prompt}), None, 400, "prompt"),
            ("/v1/completions", json.dumps({"model": LLM_NAME, "prompt": {"a": 1}}), None, 400, "prompt"),
            ("/v1/chat/completions", json.dumps({"model": LLM_NAME, "messages": [{"role": "user", "content": "x"}],
                                                 "tools": [{"type": "function", "function": {"name": "f"}}]}), None, 400, "tools"),
            ("/v1/completions", json.dumps({"model": LLM_NAME, "prompt": "x", "stop": [1]}), None, 400, "stop"),
            ("/v1/audio/transcriptions", *multipart([("model", WHISPER_NAME.encode(), None), ("file", b"not audio at all", "a.wav")]),
             400, "file"),
            ("/v1/audio/transcriptions", *multipart([("model", WHISPER_NAME.encode(), None)]), 400, "file"),
            ("/v1/audio/transcriptions", *multipart([("file", audio, "a.wav")]), 400, "model"),
            ("/v1/audio/transcriptions", *multipart([("model", b"nope", None), ("file", audio, "a.wav")]), 404, "model"),
            ("/v1/audio/transcriptions", *multipart([("model", LLM_NAME.encode(), None), ("file", audio, "a.wav")]), 400, "model"),
            ("/v1/audio/transcriptions", *multipart([("model", WHISPER_NAME.encode(), None), ("file", audio, "a.wav"),
                                                     ("response_format", b"docx", None)]), 400, "response_format"),
            ("/v1/audio/transcriptions", *multipart([("model", WHISPER_NAME.encode(), None), ("file", audio, "a.wav"),
                                                     ("temperature", b"warm", None)]), 400, "temperature"),
            ("/v1/audio/transcriptions", *multipart([("model", WHISPER_NAME.encode(), None), ("file", audio[:len(audio) // 2], "a.wav")],
                                                    close=False), 400, None),
            ("/v1/audio/transcriptions", *multipart([("model", WHISPER_NAME.encode(), None), ("file", audio[:44], "a.wav")]), 400, "file"),
            ("/v1/audio/transcriptions", b'{"model": "whisper-tiny.en"}', None, 400, None),
            ("/v1/audio/transcriptions", *multipart([("model", WHISPER_NAME.encode(), None), ("file", b"\0" * (2 << 20), "a.wav")]),
             413, None),
            ("/v1/chat/completions", b" " * (2 << 20), None, 413, None),
            ("/v1/nothing", b"{}", None, 404, None),
        ]
        for path, body, headers, status, param in cases:
            r = raw_post(s, path, body, headers)
            e = r.json().get("error", {})
            check(r.status_code == status and isinstance(e.get("message"), str) and e.get("message") and "type" in e and
                  "code" in e and e.get("param") == (param if status != 413 and param else e.get("param")),
                  "%s %r... -> %d %s (%s)" % (path, body[:40], r.status_code, e.get("message", "")[:80], e.get("param")))
            check(requests.get(s.url + "/health").status_code == 200, "still serving")
        try:
            client(s).chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
            raise AssertionError("unknown model accepted")
        except openai.NotFoundError as e:
            check(e.code == "model_not_found", "openai client reads the 404 model_not_found error")
        # A client that disconnects mid-stream cancels its generation: far fewer tokens are
        # generated than it asked for.
        before = tokens_generated(s)
        r = requests.post(s.url + "/v1/completions", json={"model": LLM_NAME, "prompt": "Once upon a time", "max_tokens": 64,
                                                           "temperature": 0, "stream": True, "stop": ["zzzz"]}, stream=True)
        next(r.iter_lines())
        r.close()
        wait_for(lambda: tokens_generated(s) > before, 60, "the cancelled generation to end")
        check(tokens_generated(s) - before < 64, "disconnect cancelled the generation after %d tokens" % (tokens_generated(s) - before))
        r = raw_post(s, "/v1/chat/completions", ok_chat)
        check(r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == cli_generate(vrun, CHAT_PROMPTS[0], 32),
              "after all that, a good request is served as before")
        check(s.stop() == 0, "exit 0")
    with Server(vrun, "--api-key", "sesame", "--max-concurrent", "1") as s:
        check(raw_post(s, "/v1/chat/completions", ok_chat).status_code == 401, "no key: 401")
        r = raw_post(s, "/v1/chat/completions", ok_chat, {"Authorization": "Bearer wrong", "Content-Type": "application/json"})
        check(r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", "wrong key: 401")
        check(requests.get(s.url + "/health").status_code == 200, "/health needs no key")
        try:
            client(s, "wrong").models.list()
            raise AssertionError("wrong key accepted")
        except openai.AuthenticationError:
            check(True, "openai client gets AuthenticationError")
        c = client(s, "sesame")
        check(chat(c, CHAT_PROMPTS[0]).choices[0].message.content == cli_generate(vrun, CHAT_PROMPTS[0], 32), "right key: served")
        statuses = []

        def post():
            r = raw_post(s, "/v1/chat/completions", ok_chat, {"Authorization": "Bearer sesame", "Content-Type": "application/json"})
            statuses.append(r.status_code)

        threads = [threading.Thread(target=post) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(200 in statuses and 429 in statuses and set(statuses) <= {200, 429},
              "--max-concurrent 1: beyond it 429 (%s)" % sorted(statuses))
        check(s.stop(signal.SIGINT) == 0, "SIGINT: exit 0")


def tokens_generated(s):
    m = re.search(r'vrun_completion_tokens_total\{model="smollm2"\} (\S+)', requests.get(s.url + "/metrics").text)
    return float(m.group(1)) if m else 0.0


def audio_accepted(s):
    """Transcription requests the server has taken: queued or running, plus those answered."""
    text = requests.get(s.url + "/metrics").text
    depth = re.search(r'vrun_queue_depth\{model="%s"\} (\S+)' % re.escape(WHISPER_NAME), text)
    done = re.findall(r'vrun_requests_total\{endpoint="/v1/audio/transcriptions",status="200"\} (\S+)', text)
    return (float(depth.group(1)) if depth else 0.0) + sum(float(d) for d in done)


def case_sigterm(vrun, streams=6):
    want = cli_generate(vrun, CHAT_PROMPTS[1], 64)
    want_audio = {a: cli_transcribe(vrun, a)["srt"] for a in SPEECH[:3]}
    with Server(vrun, "--max-concurrent", "32") as s:
        c = client(s)
        acknowledged = []
        lock = threading.Lock()

        def ack():
            with lock:
                acknowledged.append(1)

        with concurrent.futures.ThreadPoolExecutor(streams + len(want_audio)) as pool:
            futures = [pool.submit(stream_chat, c, CHAT_PROMPTS[1], 64, ack) for _ in range(streams)]
            audio = {a: pool.submit(transcribe, c, a, "srt") for a in want_audio}
            wait_for(lambda: len(acknowledged) == streams, 300, "every stream's first chunk")
            # Only requests the server has taken count as in flight: on a busy machine an upload
            # may still be on its way when the signal comes, and that one is rightly refused.
            wait_for(lambda: audio_accepted(s) >= len(want_audio), 300, "the transcriptions to be taken")
            s.proc.send_signal(signal.SIGTERM)
            wait_for(lambda: any("SIGTERM" in l for l in s.lines), 30, "the server to see SIGTERM")
            try:
                late = requests.get(s.url + "/v1/models", timeout=30).status_code
            except requests.ConnectionError:
                late = "refused"
            check(late in (503, "refused"), "a request after SIGTERM is refused (%s)" % late)
            texts = [f.result(timeout=600)[0] for f in futures]
            got_audio = {a: f.result(timeout=600) for a, f in audio.items()}
        check(all(t == want for t in texts), "SIGTERM during load: all %d acknowledged streams complete and equal the CLI" % streams)
        check(got_audio == want_audio, "SIGTERM during load: in-flight transcriptions complete")
        check(s.stop() == 0, "exit 0 after SIGTERM")
        check(any("SIGTERM" in l for l in s.lines), "the shutdown is logged")


def metric(s, name, model=LLM_NAME):
    m = re.search(r'%s\{model="%s"\} (\S+)' % (name, re.escape(model)), requests.get(s.url + "/metrics").text)
    return float(m.group(1)) if m else None


def case_batching(vrun, clients=32, per_client=4, limit_s=240):
    """Continuous batching: 32 clients x 4 requests, chat (greedy, some streamed) among
    transcriptions, every answer equal to the same request served alone and to the CLI; memory
    back near idle; streams cancelled mid-way free their slots for the queue."""
    jobs = mixed_jobs(clients * per_client, lambda k: k % 8 == 7)
    want = cli_answers(vrun, jobs, 24)
    with Server(vrun, "--parallel", "8", "--max-concurrent", str(clients * per_client)) as s:
        c = client(s)
        check_alone(c, want, 24)
        idle_rss = s.rss_bytes()
        t0 = time.time()

        def answer(k, j, kind, x):
            if kind == "audio":
                return transcribe(c, x, "srt")
            if (k + j) % 3 == 0:
                return stream_chat(c, x, 24)[0]
            return chat(c, x, 24).choices[0].message.content

        results = run_clients(jobs, clients, answer, limit_s)
        wall = time.time() - t0
        check(len(results) == clients * per_client, "%d responses from %d clients in %.1f s" % (len(results), clients, wall))
        check_equal_to_alone(results, want)
        check(True, "every concurrent response equals the request served alone and the CLI")
        text = requests.get(s.url + "/metrics").text
        ones = re.search(r'vrun_batch_size_bucket\{model="%s",le="1"\} (\d+)' % LLM_NAME, text)
        steps = re.search(r'vrun_batch_size_count\{model="%s"\} (\d+)' % LLM_NAME, text)
        check(ones and steps and int(steps.group(1)) > int(ones.group(1)),
              "decode steps shared by several requests (%s of %s steps had more than one)" %
              (int(steps.group(1)) - int(ones.group(1)), steps.group(1)))
        wait_for(lambda: metric(s, "vrun_slots_busy") == 0 and metric(s, "vrun_queue_depth") == 0, 30, "every slot free")
        check_memory_back(s, idle_rss)
        # Seeded sampling is reproducible alone; among others each request samples with its own
        # options (its logits may differ in the last bits with the batch, so its text may too).
        sampled = lambda k: chat(c, CHAT_PROMPTS[k % 2], 24, temperature=0.9, seed=7 + k % 2)
        check(sampled(0).choices[0].message.content == sampled(0).choices[0].message.content,
              "seeded sampling (temperature 0.9) alone: the same text twice")
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            together = list(pool.map(sampled, range(6)))
        check(all(r.usage.completion_tokens > 0 and r.choices[0].message.content for r in together),
              "seeded sampling among others: every request answered")
        check_cancellation(s, c)
        check(s.stop() == 0, "exit 0")


def check_cancellation(s, c, slots=8):
    """Every slot busy with a long stream, one more request queued behind them; closing the streams
    frees the slots at once, and the queued request is served with its greedy text."""
    # Counting goes on far past what the test waits for (no early end of text).
    body = {"model": LLM_NAME, "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", "temperature": 0, "max_tokens": 2000,
            "stream": True}
    streams = [requests.post(s.url + "/v1/completions", json=body, stream=True, timeout=120) for _ in range(slots)]
    lines = [r.iter_lines() for r in streams]  # kept: dropping one closes its connection
    for it in lines:
        next(it)  # a first token: the request holds a slot
    wait_for(lambda: metric(s, "vrun_slots_busy") == slots, 60, "all %d slots busy" % slots)
    want = cli_generate(sys.argv[1], CHAT_PROMPTS[3], 24)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        late = pool.submit(lambda: chat(c, CHAT_PROMPTS[3], 24).choices[0].message.content)
        wait_for(lambda: metric(s, "vrun_queue_waiting") == 1, 30, "the next request to queue behind the full slots")
        check(metric(s, "vrun_slots_busy") == slots, "a request beyond --parallel waits in the queue")
        t0 = time.time()
        for r in streams:
            r.close()
        got = late.result(timeout=60)
    check(got == want, "after the streams were cancelled the queued request is served (%.1f s) with its greedy text" % (time.time() - t0))
    wait_for(lambda: metric(s, "vrun_slots_busy") == 0, 30, "the cancelled streams' slots to free")
    check(True, "cancelled streams freed their slots (vrun_slots_busy 0)")


def case_devices(vrun, streams=4):
    """--devices 0,0: the model twice on one Vulkan device (lavapipe in CI), a worker each, two slots
    each: four streams hold four slots at once (one copy has two), and concurrent greedy requests
    give the text each gets alone."""
    if not re.search(r"^vulkan device 0:", subprocess.run([vrun, "info"], capture_output=True, text=True).stdout, re.M):
        print("SKIP: no Vulkan device")
        return
    tiny = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "llama", "tiny_llama")
    with Server(vrun, "--devices", "0,0", "--parallel", "2", models=[(tiny, "tiny")]) as s:
        check(any("on 2 devices, a worker each" in line for line in s.lines), "loaded on two devices")
        check(metric(s, "vrun_slots_total", "tiny") == 4, "four slots: two on each copy")
        body = {"model": "tiny", "prompt": "hello", "temperature": 0, "max_tokens": 200, "stream": True}
        held = [requests.post(s.url + "/v1/completions", json=body, stream=True, timeout=120) for _ in range(streams)]
        lines = [r.iter_lines() for r in held]  # kept: dropping one closes its connection
        for it in lines:
            next(it)
        wait_for(lambda: metric(s, "vrun_slots_busy", "tiny") == streams, 60, "four slots busy on two copies")
        for r in held:
            r.close()
        wait_for(lambda: metric(s, "vrun_slots_busy", "tiny") == 0, 60, "the streams' slots to free")
        c = client(s)
        prompts = ["one two three", "the cat sat", "a b c d e", "seven", "red green blue", "x y"]
        ask = lambda p: c.completions.create(model="tiny", prompt=p, temperature=0, max_tokens=16).choices[0].text
        alone = [ask(p) for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            together = list(pool.map(ask, prompts))
        check(together == alone and any(alone), "concurrent requests over two copies equal each served alone")
        check(s.stop() == 0, "exit 0")


if __name__ == "__main__":
    require_inputs()
    vrun, case = sys.argv[1], sys.argv[2]
    {"api": case_api, "parakeet": case_parakeet, "concurrency": case_concurrency, "errors": case_errors, "sigterm": case_sigterm, "batching": case_batching, "vad": case_vad,
     "devices": case_devices}[case](vrun)
    print("PASS", case)
