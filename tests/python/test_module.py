"""The module without a real model: argument checks before anything loads, vrun's messages for
files that are missing or not audio, load_audio, and the module's documentation."""
import os

import numpy as np
import pytest

import vrun
from conftest import CLIPS, DATA, cli_error


def test_error_is_a_runtime_error():
    assert issubclass(vrun.Error, RuntimeError)


def test_missing_model_raises_before_loading(tmp_path):
    missing = str(tmp_path / "nope.gguf")
    with pytest.raises(FileNotFoundError, match="no such file") as e:
        vrun.LanguageModel(missing)
    assert missing in str(e.value)
    with pytest.raises(FileNotFoundError, match="no such file"):
        vrun.SpeechModel(tmp_path / "whisper")
    with pytest.raises(FileNotFoundError):
        vrun.export(missing, str(tmp_path / "out.vrp"))
    # A leading ~ is the home folder, as a shell would expand it.
    with pytest.raises(FileNotFoundError) as e:
        vrun.SpeechModel("~/no-such-vrun-model")
    assert os.path.join(os.path.expanduser("~"), "no-such-vrun-model") in str(e.value)


def test_bad_constructor_arguments(tmp_path):
    with pytest.raises(ValueError, match="backend must be auto, cpu or vulkan, got 'gpu'"):
        vrun.SpeechModel(CLIPS[0], backend="gpu")
    with pytest.raises(ValueError, match="threads must be >= 0"):
        vrun.LanguageModel(CLIPS[0], threads=-1)
    with pytest.raises(ValueError, match="context must be 0"):
        vrun.LanguageModel(CLIPS[0], context=1)
    with pytest.raises(ValueError, match="dtype 'q3': not a type vrun knows"):
        vrun.export(CLIPS[0], str(tmp_path / "x.vrp"), dtype="q3")


def test_not_a_model_has_vrun_message(cli, tmp_path):
    # A WAV file is no model: the same message as the CLI's.
    want = cli_error(cli, "transcribe", "-m", CLIPS[0], CLIPS[1])
    with pytest.raises(vrun.Error) as e:
        vrun.SpeechModel(CLIPS[0])
    assert str(e.value) in want and "not a model vrun reads" in str(e.value)


def test_load_audio_matches_file():
    a = vrun.load_audio(CLIPS[0])
    assert a.dtype == np.float32 and a.ndim == 1
    assert 2.9 < len(a) / 16000 < 3.1 and np.abs(a).max() > 0.05
    native = vrun.load_audio(CLIPS[0], sample_rate=0)
    assert native.dtype == np.float32 and len(native) > 0
    a8 = vrun.load_audio(CLIPS[0], sample_rate=8000)
    assert abs(len(a8) * 2 - len(a)) <= 2


def test_load_audio_errors(cli, tmp_path):
    with pytest.raises(FileNotFoundError):
        vrun.load_audio(tmp_path / "missing.wav")
    not_audio = os.path.join(DATA, "audio", "nemo_defaults80.json")
    with pytest.raises(vrun.Error, match="not a readable audio file") as e:
        vrun.load_audio(not_audio)
    # The message the CLI prints for the same file.
    assert str(e.value) == cli_error(cli, "mel", not_audio, "--kind", "whisper", "-o", str(tmp_path / "x.npy"))


def test_help_documents_the_api():
    doc = vrun.__doc__
    for name in ("SpeechModel", "LanguageModel", "load_audio", "export"):
        assert name in doc
    assert "word_timestamps" in vrun.SpeechModel.transcribe.__doc__
    assert "stream" in vrun.LanguageModel.generate.__doc__
    stubs = os.path.join(os.path.dirname(vrun.__file__), "vrun.pyi")
    assert os.path.exists(stubs)
