#include "models/parakeet/parakeet_family.h"

#include "models/parakeet/parakeet_import.h"
#include "runtime/base/strings.h"

namespace vrun::parakeet {

bool is_parakeet_checkpoint_file(const std::string& path) {
  return is_hf_parakeet_folder(path) || (ends_with(path, ".nemo") && is_nemo_archive(path));
}

Result<std::shared_ptr<Program>> import_and_build(const std::string& path, const BuildSettings& settings) {
  ImportedParakeet m;
  if (is_hf_parakeet_folder(path)) {
    VRUN_ASSIGN_OR_RETURN(m, import_hf_parakeet(path));
  } else if (is_nemo_archive(path)) {
    VRUN_ASSIGN_OR_RETURN(m, import_nemo(path));
  } else {
    return err(ErrorCode::kUnsupported, path,
               ": not a Parakeet model vrun reads (a .nemo archive, a Hugging Face ParakeetForTDT / ParakeetForCTC folder, or a .vrp)");
  }
  return build_parakeet_program(m, settings);
}

}  // namespace vrun::parakeet
