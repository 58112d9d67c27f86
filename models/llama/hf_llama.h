// Hugging Face Llama-family folders (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM):
// config.json + model.safetensors (or shards listed in model.safetensors.index.json) +
// tokenizer.json / tokenizer.model + tokenizer_config.json -> LlamaConfig, weights under the
// canonical (GGUF) names, and the tokenizer metadata a program carries.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/llama/gguf_llama.h"

namespace vrun::llama {

Result<ImportedModel> import_hf_folder(const std::string& dir);

// A folder goes to import_hf_folder, anything else to import_gguf.
Result<ImportedModel> import_llama_checkpoint(const std::string& path);

// The same weights with the 2-D projection matrices (attention, feed-forward and output
// projections) converted to `dtype` (f32, f16, bf16, q8_0, q4_0); other weights pass unchanged.
// A matrix whose rows are not whole quantisation blocks keeps its type; notes gets one line for it.
Result<WeightSource> convert_projections(const WeightSource& weights, const LlamaConfig& config, DType dtype,
                                         std::vector<std::string>* notes);

struct ExportOptions {
  std::optional<DType> dtype;  // projection weights' type; unset: as in the checkpoint
  int64_t context = 0;         // KV-cache rows; 0: the model's maximum
  int64_t chunk = 512;         // most tokens per call
};

// Imports a checkpoint (GGUF file or Hugging Face folder), builds its program and writes it to
// out_path (.vrp). notes gets one line per conversion made on the way.
// The program export_llama_program writes.
Result<std::shared_ptr<Program>> build_llama_export(const std::string& checkpoint, const ExportOptions& options,
                                                    std::vector<std::string>* notes);
Status export_llama_program(const std::string& checkpoint, const std::string& out_path, const ExportOptions& options,
                            std::vector<std::string>* notes);

}  // namespace vrun::llama
