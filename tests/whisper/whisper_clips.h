// The audio clips of tests/data/whisper/goldens.json, made exactly as
// tests/reference/make_whisper_goldens.py makes them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/whisper/whisper_runner.h"
#include "runtime/base/status.h"

namespace vrun::whisper::testing {

// Clip names: librivox_0870, librivox_0920, goforward_raw, espeak_slow, espeak_fast, silence_10s,
// long_concat. Errors when a source file is missing (pocketsphinx-testdata not installed).
Result<std::vector<float>> make_clip(const std::string& name);

// Where the tiny.en CTranslate2 folder is: $VRUN_WHISPER_MODEL, else
// ~/.cache/vrun/models/whisper-tiny.en (tests/reference/fetch_whisper_tiny_en.sh); empty if absent.
std::string tiny_en_model_dir();

// tiny.en loaded on the CPU, a fresh runner each call; null (after a failed expectation when the
// load itself fails) when the model is absent.
std::unique_ptr<WhisperRunner> load_tiny_en(int decode_batch);

}  // namespace vrun::whisper::testing
