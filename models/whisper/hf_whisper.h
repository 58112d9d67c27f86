// Hugging Face WhisperForConditionalGeneration folders: config.json (model_type "whisper"),
// model.safetensors or model.safetensors.index.json with its shards, tokenizer.json, and
// generation_config.json (alignment_heads, suppress_tokens, begin_suppress_tokens, lang_to_id,
// task_to_id, is_multilingual; older folders keep the suppress lists in config.json).
#pragma once

#include <string>

#include "models/whisper/ct2_whisper.h"

namespace vrun::whisper {

// A folder (or its config.json) whose config.json says model_type "whisper".
bool is_hf_whisper_folder(const std::string& path);

Result<ImportedWhisper> import_hf_whisper(const std::string& path);

}  // namespace vrun::whisper
