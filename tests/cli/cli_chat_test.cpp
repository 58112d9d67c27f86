// `vrun chat` / `vrun generate -i` with SmolLM2-135M-Instruct (the real GGUF, cached by
// scripts/fetch-models.sh; skipped when absent): conversations that outgrow the context drop their
// oldest turns and go on, never ending the chat or corrupting memory (the case that once crashed:
// a 64-token context, unlimited replies, --truncate); a turn too long for the context alone is
// refused and the chat goes on; -p is the first turn; Ctrl-C stops a reply and the chat goes on.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "cli_test_util.h"

namespace vrun::testing {
namespace {

std::string model_path() {
  if (const char* env = std::getenv("VRUN_SMOLLM2_GGUF")) return env;
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/vrun/models/SmolLM2-135M-Instruct.Q4_1.gguf" : "";
}

#define REQUIRE_MODEL()                                                                         \
  const std::string model = model_path();                                                       \
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "SmolLM2 GGUF not cached: " << model;

// Replies the chat finished: one stats line each.
int replies(const std::string& err) {
  const std::regex stats("prompt [0-9]+ tokens, generated [0-9]+ tokens");
  return static_cast<int>(std::distance(std::sregex_iterator(err.begin(), err.end(), stats), std::sregex_iterator()));
}

TEST(Chat, FillingTheContextDropsOldTurnsInsteadOfCrashing) {
  REQUIRE_MODEL();
  const CliRun r = run_vrun("generate -m " + model + " -i --ctx 64 -n -1 --temp 0 --truncate --backend cpu -t 2", "fill64",
                            "Tell me a story.\nAnd then?\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(replies(r.err), 2) << r.err;
  EXPECT_TRUE(contains(r.err, "outgrew the 64-token context: dropped its")) << r.err;
  EXPECT_FALSE(contains(r.err, "outside the vocabulary")) << r.err;
  EXPECT_FALSE(contains(r.err, "fit in the context")) << r.err;
}

TEST(Chat, FiftyTurnsInA128TokenContextRunToTheEnd) {
  REQUIRE_MODEL();
  std::string turns;
  for (int k = 0; k < 50; ++k) turns += "Tell me one fact about the number " + std::to_string(k) + ".\n";
  const CliRun r = run_vrun("chat -m " + model + " --ctx 128 -n 30 --temp 0 --backend cpu -t 2 --system \"Answer briefly.\"",
                            "fifty", turns);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(replies(r.err), 50) << r.err;
  EXPECT_TRUE(contains(r.err, "(the system message is kept)")) << r.err;
}

TEST(Chat, ATurnLongerThanTheContextIsRefusedAndTheChatGoesOn) {
  REQUIRE_MODEL();
  std::string long_turn;
  for (int k = 0; k < 200; ++k) long_turn += "word" + std::to_string(k) + " ";
  const CliRun r = run_vrun("chat -m " + model + " --ctx 64 -n 8 --temp 0 --backend cpu -t 2", "refused",
                            long_turn + "\nHello!\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "does not fit in the 64-token context even alone")) << r.err;
  EXPECT_EQ(replies(r.err), 1) << r.err;
}

TEST(Chat, PromptIsTheFirstTurnAndMatchesGenerate) {
  REQUIRE_MODEL();
  // The first turn of a chat is the same rendered prompt as a one-shot generate, so at
  // temperature 0 its reply is the same text.
  const std::string opts = " --temp 0 -n 16 --backend cpu -t 2 -q -p \"What is the capital of France?\"";
  const CliRun one = run_vrun("generate -m " + model + opts, "oneshot");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CliRun chat = run_vrun("chat -m " + model + opts, "firstturn");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_TRUE(contains(chat.err, "> What is the capital of France?")) << chat.err;
  EXPECT_EQ(chat.out, one.out);
  EXPECT_FALSE(one.out.empty());
}

// Ctrl-C (SIGINT) during a long reply stops that reply (its stats say "callback") and returns to
// the prompt: the next turn is answered and the chat ends normally when its input does.
TEST(Chat, CtrlCStopsTheReplyAndTheChatGoesOn) {
  REQUIRE_MODEL();
  const std::string base = ::testing::TempDir() + "/vrun_cli_ctrl_c";
  // Output of an earlier run would look like this reply's text: the signal must wait for the new one.
  std::filesystem::remove(base + ".out");
  std::filesystem::remove(base + ".err");
  int in[2];
  ASSERT_EQ(pipe(in), 0);
  const std::string cmd = "exec " + vrun_binary() + " chat -m " + model + " -n 2000 --temp 0 --backend cpu -t 2 > " + base +
                          ".out 2> " + base + ".err";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(in[0], 0);
    close(in[0]);
    close(in[1]);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  auto say = [&](const std::string& line) { return write(in[1], line.data(), line.size()) == static_cast<ssize_t>(line.size()); };
  ASSERT_TRUE(say("Count from 1 to 1000, separated by commas.\n"));
  // Interrupt once the reply is well under way (text on stdout).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (slurp(base + ".out").size() < 40 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGINT);
  // The interrupted reply's stats line, then the next turn.
  while (replies(slurp(base + ".err")) < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(say("Hello!\n"));
  close(in[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string err = slurp(base + ".err");
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_EQ(replies(err), 2) << err;
  const std::regex first("generated ([0-9]+) tokens \\(callback\\)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, first)) << err;
  EXPECT_LT(std::stoi(m[1]), 2000) << err;
}

}  // namespace
}  // namespace vrun::testing
