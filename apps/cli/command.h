// Subcommands register themselves: each cmd_<name>.cpp defines one CommandRegistrar whose setup
// adds the subcommand's options and returns the function that runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace vrun::cli {

// Called with the subcommand's CLI::App; returns the action run after parsing (its int is the
// process exit code).
using CommandSetup = std::function<std::function<int()>(CLI::App& sub)>;

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, CommandSetup setup);
};

// Prints "vrun <command>: <message>" to stderr and returns the exit code to use (1).
int fail(const std::string& command, const std::string& message);

}  // namespace vrun::cli
