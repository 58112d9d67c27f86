// The decoding choices a user makes for a transcription, with their defaults and range checks, as
// `vrun transcribe` and the Python module's transcribe() both take them (under their own spellings:
// --beam-size, beam_size), turned into the speech interface's options.
#pragma once

#include <cstdint>
#include <string>

#include "apps/speech/speech_recognizer.h"
#include "runtime/base/status.h"

namespace vrun::speech {

struct DecodingChoices {
  std::string language = "auto", task = "transcribe", prompt, attention = "full";
  bool timestamps = true, word_timestamps = false, fallback = true, condition_on_previous_text = true;
  int beam_size = 1, best_of = 5;
  double patience = 1.0, length_penalty = 1.0, temperature = 0.0, temperature_increment = 0.2;
  double compression_ratio_threshold = 2.4, logprob_threshold = -1.0, no_speech_threshold = 0.6;
  uint64_t seed = 0;

  // The first choice out of range, named by its field name spelt with `prefix` and with `separator`
  // for '_' ("--", '-' gives --beam-size): "<name> must be <accepted>, got <value>".
  Status validate(const std::string& prefix = "", char separator = '_') const;
  // The options for the recogniser (the temperature schedule from temperature, increment, fallback).
  Options options() const;
};

}  // namespace vrun::speech
