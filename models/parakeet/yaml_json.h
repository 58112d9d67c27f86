// YAML documents (NeMo's model_config.yaml, written by OmegaConf) as JSON values, through libyaml.
// Plain scalars are typed as OmegaConf reads them: null/~, true/false (and yes/no/on/off), ints,
// floats (1e-05 without a dot included), .inf/.nan; quoted scalars stay strings. Anchors and
// aliases are refused (OmegaConf never writes them), which also rules out alias bombs.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "runtime/base/status.h"

namespace vrun::parakeet {

Result<nlohmann::json> parse_yaml(std::string_view text, const std::string& source);

}  // namespace vrun::parakeet
