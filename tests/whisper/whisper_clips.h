// The audio clips of tests/data/whisper/goldens.json, made exactly as
// tests/reference/make_whisper_goldens.py makes them.
#pragma once

#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::whisper::testing {

// Clip names: librivox_0870, librivox_0920, goforward_raw, espeak_slow, espeak_fast, silence_10s,
// long_concat. Errors when a source file is missing (pocketsphinx-testdata not installed).
Result<std::vector<float>> make_clip(const std::string& name);

// Where the tiny.en CTranslate2 folder is: $VRUN_WHISPER_MODEL, else
// ~/.cache/vrun/models/whisper-tiny.en (tests/reference/fetch_whisper_tiny_en.sh); empty if absent.
std::string tiny_en_model_dir();

}  // namespace vrun::whisper::testing
