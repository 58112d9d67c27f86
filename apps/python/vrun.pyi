"""Type stubs of the vrun module (apps/python): speech recognition, text generation, audio loading
and export through the engine of the vrun command line."""
import os
from typing import Callable, Iterator, Literal, Sequence, overload

import numpy as np
import numpy.typing as npt

_Path = str | os.PathLike[str]
_Backend = Literal["auto", "cpu", "vulkan"]

class Error(RuntimeError):
    """An error vrun reports (a model that does not load, audio that does not decode, ...)."""

def load_audio(path: _Path, sample_rate: int = 16000) -> npt.NDArray[np.float32]: ...
def export(src: _Path, dst: _Path, *, dtype: str | None = None, context: int = 0, chunk: int = 512,
           local_window: int | None = None, long_frames: int | None = None, batch_size: int = 0) -> str: ...

class Word:
    start: float
    end: float
    text: str
    probability: float

class Segment:
    start: float
    end: float
    text: str
    words: list[Word]
    tokens: list[int]
    avg_logprob: float
    no_speech_prob: float
    temperature: float
    compression_ratio: float

class Transcript:
    text: str
    language: str
    language_probability: float
    segments: list[Segment]
    source: str
    duration: float
    stats: dict[str, float]
    def render(self, format: Literal["txt", "srt", "vtt", "tsv", "json"], audio: str | None = None) -> str: ...
    def to_text(self) -> str: ...
    def to_srt(self) -> str: ...
    def to_vtt(self) -> str: ...
    def to_tsv(self) -> str: ...
    def to_json(self, audio: str | None = None) -> str: ...

_Audio = _Path | npt.NDArray[np.float32]

class SpeechModel:
    family: str
    device: str
    notes: list[str]
    path: str
    def __init__(self, path: _Path, backend: _Backend = "auto", threads: int = 0, decode_batch: int = 5,
                 batch_size: int = 1) -> None: ...
    def transcribe(self, audio: _Audio, *, on_segment: Callable[[Segment], None] | None = None,
                   language: str = "auto", task: Literal["transcribe", "translate"] = "transcribe", prompt: str = "",
                   timestamps: bool = True, word_timestamps: bool = False, beam_size: int = 1, best_of: int = 5,
                   patience: float = 1.0, length_penalty: float = 1.0, temperature: float = 0.0,
                   temperature_increment: float = 0.2, fallback: bool = True, seed: int = 0,
                   compression_ratio_threshold: float = 2.4, logprob_threshold: float = -1.0,
                   no_speech_threshold: float = 0.6, condition_on_previous_text: bool = True,
                   attention: Literal["full", "local"] = "full", vad: bool = False, vad_model: _Path = "") -> Transcript: ...
    def transcribe_many(self, audios: Sequence[_Audio], **options: object) -> list[Transcript]: ...

class TextStream(Iterator[str]):
    def __next__(self) -> str: ...
    def close(self) -> None: ...

_Message = dict[str, str] | tuple[str, str]

class LanguageModel:
    context: int
    chat_format: str
    path: str
    last_stats: dict[str, object]
    def __init__(self, path: _Path, backend: _Backend = "auto", threads: int = 0, context: int = 0,
                 chat_format: Literal["auto", "raw", "llama2", "llama3", "chatml"] = "auto", batch_slots: int = 0) -> None: ...
    def generate_many(self, prompts: Sequence[str], *, chat: bool = False, **options: object) -> list[str]: ...
    @overload
    def generate(self, prompt: str, *, stream: Literal[False] = False, max_tokens: int = 256, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                 repeat_last_n: int = 64, seed: int = 0, stop: str | Sequence[str] | None = None,
                 ignore_eos: bool = False) -> str: ...
    @overload
    def generate(self, prompt: str, *, stream: Literal[True], max_tokens: int = 256, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                 repeat_last_n: int = 64, seed: int = 0, stop: str | Sequence[str] | None = None,
                 ignore_eos: bool = False) -> TextStream: ...
    @overload
    def chat(self, messages: Sequence[_Message], *, stream: Literal[False] = False, **options: object) -> str: ...
    @overload
    def chat(self, messages: Sequence[_Message], *, stream: Literal[True], **options: object) -> TextStream: ...
    def tokenize(self, text: str, special: bool = False, add_bos: bool = False) -> list[int]: ...
    def detokenize(self, ids: Sequence[int]) -> str: ...
