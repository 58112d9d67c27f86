#include <cstdio>
#include <memory>
#include <vector>

#include "apps/cli/command.h"

namespace vrun::cli {
namespace {
struct Entry {
  std::string name, description;
  CommandSetup setup;
};
std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}
}  // namespace

CommandRegistrar::CommandRegistrar(std::string name, std::string description, CommandSetup setup) {
  entries().push_back({std::move(name), std::move(description), std::move(setup)});
}

int fail(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "vrun %s: %s\n", command.c_str(), message.c_str());
  return 1;
}

}  // namespace vrun::cli

int main(int argc, char** argv) {
  using namespace vrun::cli;
  CLI::App app{
      "vrun: language and speech models on one runtime (Vulkan GPU kernels, CPU fallback for every op).\n"
      "Run `vrun <command> --help` for a command's options."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vrun 0.1.0");
  int exit_code = 0;
  std::vector<std::function<int()>> actions(entries().size());
  for (size_t k = 0; k < entries().size(); ++k) {
    CLI::App* sub = app.add_subcommand(entries()[k].name, entries()[k].description);
    actions[k] = entries()[k].setup(*sub);
    sub->callback([&, k] { exit_code = actions[k](); });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
