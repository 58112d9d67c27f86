// Voice activity for transcription (`vrun transcribe --vad`, the Python module's `vad=True`, the
// server's --vad): Silero VAD keeps the speech of the audio with faster-whisper's defaults, the
// recogniser transcribes that alone, and segment and word times are mapped back to the original.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "apps/common/transcript/transcript.h"
#include "apps/common/vad/speech_spans.h"
#include "apps/speech/speech_recognizer.h"
#include "runtime/base/status.h"

namespace vrun::onnx {
class SileroVad;
}

namespace vrun::speech {

struct SpeechOnly {
  std::vector<float> samples;    // the speech spans one after another (16 kHz)
  std::vector<vad::Span> spans;  // where they were in the original audio
  vad::TimeMap map;              // times in `samples` -> times in the original audio
};

// One loaded Silero VAD (on the CPU: 1-2 ms a second of audio), shared by threads: its calls take
// turns, each running the whole audio with its own LSTM state.
class VoiceActivity {
 public:
  // The model used when no path is given: the one `scripts/fetch-models.sh silero-vad` puts in
  // the cache ($VRUN_CACHE or ~/.cache/vrun).
  static std::string default_model();
  // path empty: default_model(). The error names the file (and, for the default, how to fetch it).
  static Result<std::shared_ptr<VoiceActivity>> load(const std::string& path);
  ~VoiceActivity();

  // The speech of 16 kHz samples.
  Result<SpeechOnly> keep_speech(std::span<const float> samples, const vad::SpanOptions& options = {});

 private:
  VoiceActivity() = default;
  std::mutex mu_;
  std::unique_ptr<onnx::SileroVad> vad_;
};

// The speech cut at its pauses into chunks of at most max_s seconds, for transcribing them side by
// side (faster-whisper's batched pipeline): spans joined in order while the chunk stays within
// max_s (a span longer than that is a chunk of its own; keep_speech cuts spans at
// SpanOptions::max_speech_s). [begin, end) in samples of SpeechOnly::samples.
struct Chunk {
  int64_t begin = 0, end = 0;
};
std::vector<Chunk> chunk_speech(const SpeechOnly& speech, double max_s = 30.0);

// The chunks' transcripts (each timed from its chunk's start) as one transcript of the speech-only
// audio: segments and words shifted to where their chunk begins, stats summed, the language the
// first chunk's.
transcript::Transcript join_chunks(std::vector<transcript::Transcript> parts, const std::vector<Chunk>& chunks);

// The speech's chunks through the recogniser, `batch` a transcribe_many call, each chunk on its
// own, joined and timed in the original audio; progress gets the seconds of speech done. The
// speech should come from keep_speech with chunk_span_options(), so that no span is over 30 s.
Result<transcript::Transcript> transcribe_in_chunks(Recognizer& r, const SpeechOnly& speech, const Options& options, int batch,
                                                    const OnProgress& progress = {});
// faster-whisper's defaults with spans over 30 s cut (its batched pipeline's chunk_length).
vad::SpanOptions chunk_span_options();

// A segment of the speech-only audio (or all of a transcript's): its times, and its words', in the
// original audio.
void map_to_original(transcript::Segment* segment, const vad::TimeMap& map);
void map_to_original(transcript::Transcript* transcript, const vad::TimeMap& map);

}  // namespace vrun::speech
