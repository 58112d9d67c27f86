// One file's long-form transcription state (WhisperRunner::transcribe's loop between windows).
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "apps/whisper/whisper_runner.h"
#include "preprocess/whisper_mel.h"

namespace vrun::whisper {

struct WhisperRunner::FileJob {
  TranscribeOptions o;
  std::function<void(const Segment&)> on_segment;
  std::function<void(double)> on_progress;
  preprocess::WhisperMelSpectrogram::Stream stream;
  Transcript out;
  std::string language;            // "" until detected
  std::vector<int32_t> all_tokens;  // the text so far (conditioning), after the initial prompt
  size_t prompt_reset_since = 0;
  double last_speech_timestamp = 0;
  int64_t content = 0, seek = 0;
  int64_t size = 0;                 // frames of the current window
  std::mt19937_64 rng;              // sampling at fallback temperatures
  bool done() const { return seek >= content; }
};

}  // namespace vrun::whisper
