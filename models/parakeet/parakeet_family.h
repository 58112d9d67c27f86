// The Parakeet family's way in (models/registry): which checkpoints are Parakeet ones, and the
// program built from one.
#pragma once

#include <memory>
#include <string>

#include "models/parakeet/parakeet_model.h"

namespace vrun::parakeet {

// A NeMo .nemo archive or a Hugging Face ParakeetForTDT / ParakeetForCTC folder (not a .vrp).
bool is_parakeet_checkpoint_file(const std::string& path);
// Imports such a checkpoint and builds its program.
Result<std::shared_ptr<Program>> import_and_build(const std::string& path, const BuildSettings& settings);

}  // namespace vrun::parakeet
