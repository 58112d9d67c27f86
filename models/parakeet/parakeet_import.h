// Parakeet checkpoints as NVIDIA and Hugging Face publish them, read into one canonical form:
// weights under their NeMo state-dict names, the config, the preprocessor config (NeMo keys, as
// JSON) and the vocabulary.
//   .nemo: a tar archive (plain or gzip) with model_config.yaml, model_weights.ckpt (a PyTorch zip
//          checkpoint, read by the safe pickle reader) and the SentencePiece tokenizer files.
//   Hugging Face folder: config.json (ParakeetForTDT / ParakeetForCTC), model.safetensors (or an
//          index of shards), preprocessor_config.json, tokenizer.json; names mapped back to NeMo's
//          as transformers' convert_nemo_to_hf.py maps them forward.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/parakeet/parakeet_config.h"
#include "models/parakeet/vocabulary.h"

namespace vrun::parakeet {

struct ImportedParakeet {
  ParakeetConfig config;
  std::map<std::string, Weight> weights;  // NeMo names
  std::string preprocessor_json;          // the `preprocessor` object with NeMo's keys
  Vocabulary vocab;
  std::string spm_model;  // tokenizer.model bytes when the checkpoint has them
  std::string format;     // "nemo" or "hf"
  WeightSource source() const;
};

bool is_nemo_archive(const std::string& path);
bool is_hf_parakeet_folder(const std::string& path);

Result<ImportedParakeet> import_nemo(const std::string& path);
Result<ImportedParakeet> import_hf_parakeet(const std::string& folder);

// The NeMo name of a Hugging Face Parakeet tensor name.
std::string hf_to_nemo_name(const std::string& hf_name);

}  // namespace vrun::parakeet
