// faster-whisper / CTranslate2 Whisper folders: model.bin (WhisperSpec), config.json
// (suppress_ids, suppress_ids_begin, alignment_heads) and tokenizer.json.
#pragma once

#include <string>
#include <vector>

#include "models/whisper/whisper_model.h"

namespace vrun::whisper {

struct ImportedWhisper {
  WhisperConfig config;
  WeightSource weights;
  WhisperExtras extras;
  std::vector<std::string> notes;  // one line per conversion made (e.g. int8 weights dequantised)
};

// `path` is the folder or its model.bin.
Result<ImportedWhisper> import_ct2_whisper(const std::string& path);

// Whether `path` looks like a CTranslate2 Whisper folder (holds a model.bin).
bool is_ct2_folder(const std::string& path);

}  // namespace vrun::whisper
