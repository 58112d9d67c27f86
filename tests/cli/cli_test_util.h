// Runs the vrun binary of this build with a shell command line and collects its exit code and output.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace vrun::testing {

struct CliRun {
  int exit_code;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string vrun_binary() { return std::string(VRUN_BINARY_DIR) + "/bin/vrun"; }

// `args` follow `vrun`; `stdin_text` (if any) is written to a file and redirected in; `env`
// ("NAME=value ...") is set for the command.
inline CliRun run_vrun(const std::string& args, const std::string& tag, const std::string& stdin_text = "",
                       const std::string& env = "") {
  const std::string base = ::testing::TempDir() + "/vrun_cli_" + tag;
  std::string cmd = (env.empty() ? "" : "env " + env + " ") + vrun_binary() + " " + args + " > " + base + ".out 2> " + base + ".err";
  if (!stdin_text.empty()) {
    std::ofstream(base + ".in", std::ios::binary) << stdin_text;
    cmd += " < " + base + ".in";
  } else {
    cmd += " < /dev/null";
  }
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(base + ".out"), slurp(base + ".err")};
}

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace vrun::testing
