#include <algorithm>
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

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidate nearest to `word` when it is near enough to be a misspelling of it, else "".
std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

std::vector<std::string> option_names(const CLI::App& sub) {
  std::vector<std::string> names;
  for (const CLI::Option* o : sub.get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

}  // namespace

int report_parse_error(CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& commands) {
  // --help and --version are "errors" with exit code 0 in CLI11: print what they print.
  if (e.get_exit_code() == 0) return app.exit(e);
  CLI::App* sub = nullptr;
  for (CLI::App* s : app.get_subcommands()) sub = s;
  std::string where = sub ? sub->get_name() : "";
  std::string message = e.what();
  std::string hint;
  const std::vector<std::string> extras = sub ? sub->remaining() : app.remaining();
  if (!sub && (extras.empty() || extras[0].empty() || extras[0][0] != '-')) {
    // No command, or a word that is not one.
    std::string list;
    for (const auto& c : commands) list += (list.empty() ? "" : ", ") + c;
    if (extras.empty()) {
      message = "a command is required: " + list;
    } else {
      message = "unknown command '" + extras[0] + "' (commands: " + list + ")";
      const std::string near = nearest(extras[0], commands);
      if (!near.empty()) hint = "did you mean `vrun " + near + "`?";
    }
  } else if (!extras.empty()) {
    message = std::string(extras.size() == 1 ? "unknown option or argument: " : "unknown options or arguments: ");
    for (size_t k = 0; k < extras.size(); ++k) message += (k ? " " : "") + extras[k];
    for (const auto& x : extras) {
      if (x.empty() || x[0] != '-') continue;
      const std::string near = nearest(x.substr(0, x.find('=')), option_names(sub ? *sub : app));
      if (!near.empty()) {
        hint = "did you mean " + near + "?";
        break;
      }
    }
  }
  std::fprintf(stderr, "vrun%s%s: %s\n", where.empty() ? "" : " ", where.c_str(), message.c_str());
  if (!hint.empty()) std::fprintf(stderr, "vrun%s%s: %s\n", where.empty() ? "" : " ", where.c_str(), hint.c_str());
  std::fprintf(stderr, "Run `vrun%s%s --help` for the options.\n", where.empty() ? "" : " ", where.c_str());
  return 2;
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
  std::vector<std::string> commands;
  for (size_t k = 0; k < entries().size(); ++k) {
    commands.push_back(entries()[k].name);
    CLI::App* sub = app.add_subcommand(entries()[k].name, entries()[k].description);
    actions[k] = entries()[k].setup(*sub);
    sub->callback([&, k] { exit_code = actions[k](); });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return report_parse_error(app, e, commands);
  }
  return exit_code;
}
