// Command-line mistakes are caught before any model loads: exit code 2 for what the parser rejects
// (with the command's name in front and a suggestion for a near miss), 1 for what it checks after,
// and a message naming the option and its accepted range.
#include "cli_test_util.h"

namespace vrun::testing {
namespace {

// A model path that does not exist: every case below must fail before it is ever opened.
const std::string kNoModel = "-m /nonexistent/model.gguf";

TEST(CliErrors, MisspeltOptionGetsASuggestion) {
  const CliRun r = run_vrun("generate " + kNoModel + " --tmep 0", "misspelt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "vrun generate: unknown options or arguments: --tmep 0")) << r.err;
  EXPECT_TRUE(contains(r.err, "did you mean --temp?")) << r.err;
}

TEST(CliErrors, UnknownCommandGetsASuggestion) {
  const CliRun r = run_vrun("transcrbe " + kNoModel + " a.wav", "unknown_command");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "vrun: unknown command 'transcrbe'")) << r.err;
  EXPECT_TRUE(contains(r.err, "did you mean `vrun transcribe`?")) << r.err;
}

TEST(CliErrors, NoCommandListsThem) {
  const CliRun r = run_vrun("", "no_command");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "vrun: a command is required: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "transcribe")) << r.err;
}

TEST(CliErrors, ChatIsACommand) {
  const CliRun r = run_vrun("chat --help", "chat_help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "--system")) << r.out;
}

struct RangeCase {
  std::string args, option;
};

TEST(CliErrors, OutOfRangeValuesNameTheOption) {
  const RangeCase cases[] = {{"--top-p 5", "--top-p"}, {"--ctx -3", "--ctx"},      {"-t -2", "--threads"},
                             {"--temp -1", "--temp"},  {"--min-p 2", "--min-p"},   {"--top-k -1", "--top-k"},
                             {"-n -5", "--max-tokens"}, {"--backend gpu", "--backend"}};
  int k = 0;
  for (const auto& c : cases) {
    const CliRun r = run_vrun("generate " + kNoModel + " " + c.args, "range" + std::to_string(k++));
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "vrun generate: ")) << r.err;
    EXPECT_TRUE(contains(r.err, c.option)) << c.args << ": " << r.err;
  }
}

TEST(CliErrors, MissingModelIsNamedBeforeLoading) {
  const CliRun r = run_vrun("generate " + kNoModel + " -p hi", "missing_model");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "vrun generate: -m/--model: /nonexistent/model.gguf: no such file or folder")) << r.err;
}

TEST(CliErrors, ContextOfOneIsRefused) {
  const CliRun r = run_vrun("generate " + kNoModel + " --ctx 1 -p hi", "ctx1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--ctx must be 0 (the model's) or at least 2")) << r.err;
}

}  // namespace
}  // namespace vrun::testing

namespace vrun::testing {
namespace {

// The tiny random-weight Llama of tests/data (no real model needed, so this runs under the
// sanitizers too): a chat whose every reply fills the context goes on for 30 turns, each turn
// dropping the oldest messages, the system message kept.
TEST(ChatTiny, ThirtyTurnsThatEachFillTheContext) {
  std::string turns;
  for (int k = 0; k < 30; ++k) turns += "turn " + std::to_string(k) + "\n";
  const CliRun r = run_vrun("chat -m " + std::string(VRUN_TEST_DATA) +
                                "/llama/tiny_llama --chat-format chatml --system sys --ctx 160 -n -1 --temp 0 --backend cpu -t 1",
                            "tiny30", turns);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t stats = 0;
  for (size_t at = r.err.find("generated "); at != std::string::npos; at = r.err.find("generated ", at + 1)) ++stats;
  EXPECT_EQ(stats, 30u) << r.err;
  EXPECT_TRUE(contains(r.err, "(context)")) << r.err;
  EXPECT_TRUE(contains(r.err, "dropped its")) << r.err;
  EXPECT_TRUE(contains(r.err, "(the system message is kept)")) << r.err;
}

}  // namespace
}  // namespace vrun::testing

namespace vrun::testing {
namespace {

bool has_vulkan_device() { return contains(run_vrun("info", "info_devices").out, "vulkan device 0:"); }

// A model larger than the device memory vrun may take is refused with the sizes, not a crash
// (VRUN_VK_MEMORY_LIMIT sets that memory; lavapipe in CI).
TEST(GpuTrouble, ModelLargerThanTheDeviceMemoryIsRefusedWithTheSizes) {
  if (!has_vulkan_device()) GTEST_SKIP() << "no Vulkan device";
  const std::string run = "generate -m " + std::string(VRUN_TEST_DATA) + "/llama/tiny_llama --backend vulkan -p hi -n 4 --temp 0";
  const CliRun fits = run_vrun(run, "vk_no_limit");
  ASSERT_EQ(fits.exit_code, 0) << fits.err;  // the same run fits without a limit
  const CliRun r = run_vrun(run, "vk_limit", "", "VRUN_VK_MEMORY_LIMIT=64K");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "vrun generate: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "out of device memory allocating")) << r.err;
  EXPECT_TRUE(contains(r.err, "VRUN_VK_MEMORY_LIMIT allows 65536")) << r.err;
}

TEST(GpuTrouble, BadMemoryLimitIsNamed) {
  if (!has_vulkan_device()) GTEST_SKIP() << "no Vulkan device";
  const std::string run = "generate -m " + std::string(VRUN_TEST_DATA) + "/llama/tiny_llama --backend vulkan -p hi -n 4";
  const CliRun r = run_vrun(run, "vk_limit_bad", "", "VRUN_VK_MEMORY_LIMIT=lots");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "VRUN_VK_MEMORY_LIMIT='lots'")) << r.err;
}

// A GPU lost in the middle of a run (VRUN_VK_FAIL_SUBMIT makes the Nth submission report
// VK_ERROR_DEVICE_LOST): an error naming it and what to do, exit 1, no crash; the second
// submission is in the prompt's prefill, the fifth in the decode steps.
TEST(GpuTrouble, LostDeviceIsReportedNotACrash) {
  if (!has_vulkan_device()) GTEST_SKIP() << "no Vulkan device";
  const std::string run = "generate -m " + std::string(VRUN_TEST_DATA) + "/llama/tiny_llama --backend vulkan -p hi -n 8 --temp 0";
  for (const char* n : {"2", "5"}) {
    const CliRun r = run_vrun(run, std::string("vk_lost_") + n, "", std::string("VRUN_VK_FAIL_SUBMIT=") + n);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "vrun generate: ")) << r.err;
    EXPECT_TRUE(contains(r.err, "the GPU was lost (VK_ERROR_DEVICE_LOST")) << r.err;
    EXPECT_TRUE(contains(r.err, "--backend cpu")) << r.err;
  }
}

}  // namespace
}  // namespace vrun::testing
