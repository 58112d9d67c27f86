// Small file helpers the checkpoint importers share.
#pragma once

#include <filesystem>
#include <string>

#include "runtime/base/status.h"

namespace vrun::models {

// The whole file as bytes; kNotFound "<path>: cannot open" when it cannot be opened.
Result<std::string> read_file(const std::filesystem::path& path);

}  // namespace vrun::models
