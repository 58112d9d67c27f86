// The transcript every speech runner produces (Whisper, Parakeet): segments with times, optional
// words, the decoded tokens and the figures the writers and the CLI print.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vrun::transcript {

struct Word {
  double start = 0, end = 0;  // seconds
  std::string text;           // with its leading space, as decoded
  double probability = 1.0;
};

struct Segment {
  double start = 0, end = 0;  // seconds
  std::string text;
  std::vector<int32_t> tokens;  // the tokens the model emitted for this segment
  std::vector<Word> words;      // empty unless the runner was asked for word times
  double avg_logprob = 0, no_speech_prob = 0, temperature = 0, compression_ratio = 0;
};

struct Stats {
  double audio_s = 0, features_s = 0, encode_s = 0, decode_s = 0;
  double align_s = 0;  // word timestamps (cross-attention alignment), when asked for
  int windows = 0, tokens = 0;  // windows: 30-s Whisper windows or encoder chunks
};

struct Transcript {
  std::vector<Segment> segments;
  Stats stats;
  std::string language = "en";
  double language_probability = 1.0;  // of a detected language; 1 when given or English-only
  std::string text() const;  // segment texts joined, outer spaces trimmed
};

}  // namespace vrun::transcript
