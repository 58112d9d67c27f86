// What the subcommands that run a model share: the --backend and -t/--threads options, and the
// loading of a Llama-family runner from them.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/llama/llama_runner.h"

namespace vrun::cli {

struct BackendArgs {
  std::string backend = "auto";
  int threads = 0;
};

// Adds --backend and -t/--threads to a subcommand (their help shows the defaults).
void add_backend_options(CLI::App& sub, BackendArgs& a);

// Loads a Llama-family model on the backend `b` names; on failure prints "vrun <command>: <why>"
// (see fail) and returns null.
std::unique_ptr<llama::LlamaRunner> load_llama_runner(const std::string& command, const std::string& model,
                                                      const BackendArgs& b, const llama::LoadOptions& options);

// --devices all|0,1,...: Vulkan device indices, one entry per worker (a device may repeat); errors
// name `option` and the devices there are.
Result<std::vector<int>> parse_device_list(const std::string& option, const std::string& value);

}  // namespace vrun::cli
