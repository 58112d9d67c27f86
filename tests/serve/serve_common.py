"""What the `vrun serve` tests share: starting a server on a free loopback port, and the CLI's
own answers (`vrun generate --temp 0`, `vrun transcribe`) that the server's must equal."""
import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

MODELS = os.path.join(os.environ.get("VRUN_CACHE", os.path.expanduser("~/.cache/vrun")), "models")
LLM = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
WHISPER = os.path.join(MODELS, "whisper-tiny.en")
SPEECH = sorted(glob.glob("/usr/share/pocketsphinx/test/data/librivox/*.wav"))
LLM_NAME, WHISPER_NAME = "smollm2", "whisper-tiny.en"
# A small Parakeet CTC checkpoint from the test data (random weights: its text is noise, but
# deterministic, so the server's must still equal the CLI's).
PARAKEET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "parakeet", "ctc_small.nemo")


def require_inputs():
    missing = [p for p in (LLM, WHISPER) if not os.path.exists(p)]
    if missing or not SPEECH:
        raise SystemExit("missing test inputs %s (scripts/fetch-models.sh smollm2 whisper-tiny; Debian pocketsphinx-testdata)"
                         % (missing or "speech files"))


class Server:
    """`vrun serve` with SmolLM2 (alias smollm2) and Whisper tiny.en on a free loopback port."""

    def __init__(self, vrun, *extra, models=None):
        # models: [path, alias] pairs instead of SmolLM2 and Whisper tiny.en.
        served = [a for path, alias in models for a in ("-m", path, "--alias", alias)] if models else \
            ["-m", LLM, "--alias", LLM_NAME, "-m", WHISPER]
        self.cmd = [vrun, "serve", *served, "--port", "0", *extra]
        self.proc = subprocess.Popen(self.cmd, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.port = None
        ready = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.lines.append(line.rstrip("\n"))
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=pump, daemon=True)
        self.reader.start()
        if not ready.wait(120) or self.port is None:
            self.proc.kill()
            raise AssertionError("server did not start:\n" + "\n".join(self.lines))
        self.url = "http://127.0.0.1:%d" % self.port

    def rss_bytes(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self, sig=signal.SIGTERM, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self.reader.join(10)
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_cli_cache = {}


def cli_generate(vrun, prompt, max_tokens, system=None, raw=False, stop=None):
    """The text `vrun generate --temp 0` prints (its trailing newline removed)."""
    key = (prompt, max_tokens, system, raw, stop)
    if key not in _cli_cache:
        cmd = [vrun, "generate", "-m", LLM, "-p", prompt, "-n", str(max_tokens), "--temp", "0", "-q"]
        if system:
            cmd += ["--system", system]
        if raw:
            cmd += ["--raw"]
        if stop:
            cmd += ["--stop", stop]
        out = subprocess.run(cmd, check=True, capture_output=True).stdout.decode()
        assert out.endswith("\n"), out
        _cli_cache[key] = out[:-1]
    return _cli_cache[key]


def cli_transcribe(vrun, audio, word_timestamps=True, model=WHISPER, extra=()):
    """`vrun transcribe -o json,srt,vtt [extra]`: {"json": parsed json, "srt": text, "vtt": text}."""
    key = (audio, word_timestamps, model, tuple(extra))
    if key not in _cli_cache:
        with tempfile.TemporaryDirectory() as d:
            cmd = [vrun, "transcribe", "-m", model, "-o", "json,srt,vtt", "--output-dir", d, *extra, audio]
            if word_timestamps:
                cmd.insert(2, "--word-timestamps")
            subprocess.run(cmd, check=True, capture_output=True)
            stem = os.path.join(d, os.path.splitext(os.path.basename(audio))[0])
            with open(stem + ".json") as f:
                result = {"json": json.load(f)}
            for ext in ("srt", "vtt"):
                with open(stem + "." + ext) as f:
                    result[ext] = f.read()
        _cli_cache[key] = result
    return _cli_cache[key]


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)
