// Llama-family GGUF files (architectures llama, mistral, qwen2) -> LlamaConfig + weights.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/gguf/gguf_file.h"
#include "models/llama/llama_model.h"

namespace vrun::llama {

struct ImportedModel {
  LlamaConfig config;
  WeightSource weights;
  // Metadata to carry into the program: the tokenizer (tokenizer.kind + tokenizer.ggml.*) and
  // the chat template, so a .vrp holds everything the runner needs.
  std::map<std::string, MetaValue> metadata;
  std::vector<std::string> notes;  // one line per tensor type converted at import
};

Result<ImportedModel> import_gguf(const std::string& path);

}  // namespace vrun::llama
