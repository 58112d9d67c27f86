// transcribe --vad: Silero VAD keeps the speech of the audio (faster-whisper's defaults), the
// runner transcribes that alone, and segment and word times are mapped back to the original.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "apps/common/transcript/transcript.h"
#include "apps/common/vad/speech_spans.h"
#include "runtime/base/status.h"

namespace vrun::cli {

struct SpeechOnly {
  std::vector<float> samples;     // the speech spans one after another (16 kHz)
  std::vector<vad::Span> spans;   // where they were in the original audio
  vad::TimeMap map;               // times in `samples` -> times in the original audio
};

// The Silero VAD model used when --vad-model is not given: the one
// `scripts/fetch-models.sh silero-vad` puts in the cache ($VRUN_CACHE or ~/.cache/vrun).
std::string default_vad_model();

// Runs the VAD over 16 kHz samples; model_path empty: default_vad_model().
Result<SpeechOnly> keep_speech(std::span<const float> samples, const std::string& model_path,
                               const vad::SpanOptions& options = {});

// A segment of the speech-only audio, its times (and its words') in the original audio.
void map_to_original(transcript::Segment* segment, const vad::TimeMap& map);

}  // namespace vrun::cli
