"""What the module's tests share: the vrun CLI they compare with (VRUN_CLI), the cached real models
(scripts/fetch-models.sh; tests that need one skip without it) and the test clips."""
import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data"))
CLIPS = [os.path.join(DATA, "audio", "speech_0880.wav"), os.path.join(DATA, "audio", "speech_0930.wav"),
         os.path.join(DATA, "whisper", "espeak_slow.wav")]
MODELS = os.path.join(os.environ.get("VRUN_CACHE", os.path.expanduser("~/.cache/vrun")), "models")
WHISPER = os.path.join(MODELS, "whisper-tiny.en")
SMOLLM2 = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("VRUN_CLI")
    if not path or not os.path.exists(path):
        pytest.fail("VRUN_CLI must name the vrun binary (ctest sets it)")
    return path


def run_cli(cli, *args, check=True):
    p = subprocess.run([cli, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError("vrun %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


def cli_error(cli, *args):
    """The message `vrun` prints for a failing command, without the 'vrun <command>: ' prefix."""
    p = run_cli(cli, *args, check=False)
    assert p.returncode != 0, "vrun %s should fail" % " ".join(args)
    line = [l for l in p.stderr.splitlines() if l.startswith("vrun %s: " % args[0])][-1]
    return line[len("vrun %s: " % args[0]):]


def cli_generate(cli, prompt, n, *extra):
    p = run_cli(cli, "generate", "-m", SMOLLM2, "--backend", "cpu", "-p", prompt, "-n", str(n), "--temp", "0", "--json", "-q", *extra)
    return json.loads(p.stdout)["text"]


@pytest.fixture(scope="session")
def whisper():
    if not os.path.isdir(WHISPER):
        pytest.skip("Whisper tiny.en not cached: scripts/fetch-models.sh whisper-tiny")
    import vrun
    return vrun.SpeechModel(WHISPER, backend="cpu")


@pytest.fixture(scope="session")
def smollm2():
    if not os.path.exists(SMOLLM2):
        pytest.skip("SmolLM2 not cached: scripts/fetch-models.sh smollm2")
    import vrun
    return vrun.LanguageModel(SMOLLM2, backend="cpu")
