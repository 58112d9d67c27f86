// `vrun transcribe` end to end with a Parakeet checkpoint: --batch-size groups files into batched
// encoder calls and prints, per file, what the file alone prints; the segments are NeMo's (goldens.json);
// an unreadable file among them fails alone, with a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace vrun::parakeet {
namespace {

const std::string kVrun = std::string(VRUN_BINARY_DIR) + "/bin/vrun";
const std::string kData = VRUN_TEST_DATA;
const std::string kModel = kData + "/parakeet/tdt_small.nemo";

struct CliRun {
  int exit_code;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

CliRun vrun(const std::string& args, const std::string& tag) {
  const std::string out = ::testing::TempDir() + "/cli_" + tag + ".out", err = ::testing::TempDir() + "/cli_" + tag + ".err";
  const int status = std::system((kVrun + " " + args + " > " + out + " 2> " + err).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// A file longer than the program's encode (2000 encoder frames, 160 s) goes whole through
// encode_long (full attention over up to 10 minutes in one call), as NeMo's transcribe() attends
// over it. A program exported with `--long-frames 0` has none: the file is encoded in
// overlapping chunks, which NeMo would not do, and the CLI says so for that file (and not for a
// short one). long_concat.wav (a canonical 44-byte header, 16-bit mono) seven times over is 190 s.
TEST(ParakeetCli, ChunkedFileIsNamedOnStderr) {
  const std::string clip = slurp(kData + "/parakeet/long_concat.wav");
  ASSERT_GT(clip.size(), 44u);
  const std::string pcm = clip.substr(44);
  std::string body;
  for (int k = 0; k < 7; ++k) body += pcm;
  std::string wav = clip.substr(0, 44);
  const auto put32 = [&wav](size_t at, uint32_t v) {
    for (int b = 0; b < 4; ++b) wav[at + static_cast<size_t>(b)] = static_cast<char>((v >> (8 * b)) & 0xff);
  };
  put32(4, static_cast<uint32_t>(36 + body.size()));
  put32(40, static_cast<uint32_t>(body.size()));
  const std::string path = ::testing::TempDir() + "/parakeet_long190.wav";
  std::ofstream(path, std::ios::binary) << wav << body;
  const CliRun whole = vrun("transcribe --backend cpu -t 2 -m " + kModel + " " + path, "whole");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(whole.err.find("overlapping chunks"), std::string::npos) << whole.err;
  EXPECT_NE(whole.err.find("; 1 windows,"), std::string::npos) << whole.err;
  const std::string chunked = ::testing::TempDir() + "/tdt_small_no_long.vrp";
  const CliRun exported = vrun("export -m " + kModel + " --long-frames 0 -o " + chunked, "export_no_long");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  // --long-frames is a build setting: a program already built refuses it, by name.
  const CliRun again = vrun("export -m " + chunked + " --long-frames 100 -o " + chunked + ".again.vrp", "export_again");
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("--long-frames"), std::string::npos) << again.err;
  const CliRun r = vrun("transcribe --backend cpu -t 2 -m " + chunked + " " + path + " " + kData + "/parakeet/short_0p62.wav", "chunked");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("parakeet_long190.wav: longer than the model's full attention reaches in one call: encoded in 2 overlapping chunks"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("short_0p62.wav: longer than"), std::string::npos) << r.err;
  const CliRun local = vrun("transcribe --backend cpu -t 2 --attention local -m " + chunked + " " + path, "chunked_local");
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_EQ(local.err.find("overlapping chunks"), std::string::npos) << local.err;
}

TEST(ParakeetCli, BatchSizeGivesEachFileItsOwnTranscript) {
  const auto goldens = nlohmann::json::parse(slurp(kData + "/parakeet/goldens.json"));
  std::string files;
  for (const char* clip : {"librivox_0880", "synth", "librivox_0930"})
    files += " " + kData + "/" + goldens["clips"][clip]["path"].get<std::string>();
  const CliRun one = vrun("transcribe --backend cpu -t 2 -m " + kModel + files, "one");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const CliRun batched = vrun("transcribe --backend cpu -t 2 --batch-size 3 -m " + kModel + files, "batched");
  ASSERT_EQ(batched.exit_code, 0) << batched.err;
  EXPECT_EQ(batched.out, one.out);
  EXPECT_NE(batched.err.find("3 files in"), std::string::npos) << batched.err;
  for (const char* clip : {"librivox_0880", "synth", "librivox_0930"}) {
    for (const auto& seg : goldens["tdt"]["clips"][clip]["segments"]) {
      const std::string text = seg["segment"].get<std::string>();
      EXPECT_NE(batched.out.find("]  " + text + "\n"), std::string::npos) << clip << ": NeMo's segment '" << text << "' not in\n"
                                                                       << batched.out;
    }
  }
  // A missing file fails alone: the others are still transcribed, the exit status says so.
  const CliRun missing = vrun("transcribe --backend cpu -t 2 --batch-size 2 -m " + kModel + " /nonexistent.wav" + files, "missing");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent.wav"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.out, one.out);
  EXPECT_NE(vrun("transcribe --batch-size -1 -m " + kModel + files, "negative").exit_code, 0);
  // The default on the CPU: one file at a time (no group line).
  EXPECT_EQ(one.err.find("files in"), std::string::npos) << one.err;
}

// A job over three clips of the Parakeet goldens: the command line's file arguments, their file
// stems, and an empty output folder `name` for the transcripts.
struct ClipJob {
  std::string files;
  std::vector<std::string> stems;
  std::string dir;
};
ClipJob three_clip_job(const std::string& name) {
  const auto goldens = nlohmann::json::parse(slurp(kData + "/parakeet/goldens.json"));
  ClipJob job;
  for (const char* clip : {"librivox_0880", "synth", "librivox_0930"}) {
    const std::string path = kData + "/" + goldens["clips"][clip]["path"].get<std::string>();
    job.files += " " + path;
    job.stems.push_back(std::filesystem::path(path).stem().string());
  }
  job.dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(job.dir);
  return job;
}

// Two workers (each its own model, one queue), alone and with groups of up to three files, write
// the transcripts one worker writes, and the summary records every file once. A worker's group
// is at most its share of the queued audio, so both workers get files even when one group could
// take them all.
TEST(ParakeetCli, TwoWorkersWriteWhatOneWrites) {
  const auto [files, stems, dir] = three_clip_job("parakeet_workers");
  const std::string common = "transcribe --backend cpu -m " + kModel + " -o txt,json --output-dir " + dir;
  ASSERT_EQ(vrun(common + "/one -t 2" + files, "w_one").exit_code, 0);
  const CliRun two = vrun(common + "/two --workers 2 --summary " + dir + "/two.jsonl" + files, "w_two");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const CliRun grouped = vrun(common + "/grouped --workers 2 --batch-size 3 --summary " + dir + "/grouped.jsonl" + files, "w_grouped");
  ASSERT_EQ(grouped.exit_code, 0) << grouped.err;
  for (const auto& stem : stems) {
    const std::string one = slurp(dir + "/one/" + stem + ".txt");
    EXPECT_EQ(slurp(dir + "/two/" + stem + ".txt"), one) << stem;
    EXPECT_EQ(slurp(dir + "/grouped/" + stem + ".txt"), one) << stem;
    EXPECT_EQ(slurp(dir + "/two/" + stem + ".json"), slurp(dir + "/one/" + stem + ".json")) << stem;
  }
  std::istringstream summary(slurp(dir + "/two.jsonl"));
  std::string line;
  std::set<std::string> inputs;
  size_t lines = 0;
  while (std::getline(summary, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["status"], "ok") << line;
    inputs.insert(j["input"].get<std::string>());
    ++lines;
  }
  EXPECT_EQ(lines, 3u);
  EXPECT_EQ(inputs.size(), 3u);
  std::istringstream grouped_summary(slurp(dir + "/grouped.jsonl"));
  std::set<int> workers;
  while (std::getline(grouped_summary, line)) workers.insert(nlohmann::json::parse(line).value("worker", -1));
  EXPECT_EQ(workers, (std::set<int>{0, 1})) << slurp(dir + "/grouped.jsonl");
}

// Without -o, --resume skips the files the summary records as ok, each with a "skipped" line, and
// transcribes the rest.
TEST(ParakeetCli, ResumeWithoutTranscriptsReadsTheSummary) {
  const auto goldens = nlohmann::json::parse(slurp(kData + "/parakeet/goldens.json"));
  const std::string a = kData + "/" + goldens["clips"]["librivox_0880"]["path"].get<std::string>();
  const std::string b = kData + "/" + goldens["clips"]["librivox_0930"]["path"].get<std::string>();
  const std::string summary = ::testing::TempDir() + "/parakeet_resume.jsonl";
  std::filesystem::remove(summary);
  const std::string common = "transcribe --backend cpu -t 2 -m " + kModel + " --summary " + summary;
  ASSERT_EQ(vrun(common + " " + a, "resume_first").exit_code, 0);
  const CliRun again = vrun(common + " --resume " + a + " " + b, "resume_again");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out.find("# " + a), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("# " + b), std::string::npos) << again.out;
  std::istringstream lines(slurp(summary));
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["input"], a);
  EXPECT_EQ(records[0]["status"], "ok");
  EXPECT_EQ(records[1]["input"], a);
  EXPECT_EQ(records[1]["status"], "skipped");
  EXPECT_EQ(records[1]["reason"], "done in the summary");
  EXPECT_EQ(records[2]["input"], b);
  EXPECT_EQ(records[2]["status"], "ok");
}

// --devices 0,0: two models on one Vulkan device, each in its own thread, write what one model on
// that device writes (skipped without a Vulkan device; Mesa's lavapipe counts).
TEST(ParakeetCli, TwoWorkersOnOneVulkanDevice) {
  if (vrun("info", "vk_info").out.find("vulkan device 0:") == std::string::npos) GTEST_SKIP() << "no Vulkan device";
  const auto [files, stems, dir] = three_clip_job("parakeet_devices");
  const std::string common = "transcribe -t 2 -m " + kModel + " -o txt --output-dir " + dir;
  ASSERT_EQ(vrun(common + "/one --backend vulkan" + files, "vk_one").exit_code, 0);
  const CliRun two = vrun(common + "/two --devices 0,0" + files, "vk_two");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  size_t loads = 0;
  for (size_t at = two.err.find("on vulkan"); at != std::string::npos; at = two.err.find("on vulkan", at + 1)) ++loads;
  EXPECT_EQ(loads, 2u) << two.err;
  for (const auto& stem : stems) EXPECT_EQ(slurp(dir + "/two/" + stem + ".txt"), slurp(dir + "/one/" + stem + ".txt")) << stem;
}

// `vrun export --dtype f16` stores the linear weights as halves; the tokens stay NeMo's (the
// goldens' clips have no near-tie), and a type the Parakeet kernels do not take is refused.
TEST(ParakeetCli, ExportF16TranscribesTheSame) {
  const auto goldens = nlohmann::json::parse(slurp(kData + "/parakeet/goldens.json"));
  const std::string f16 = ::testing::TempDir() + "/tdt_small_f16.vrp", f32 = ::testing::TempDir() + "/tdt_small_f32.vrp";
  ASSERT_EQ(vrun("export -m " + kModel + " -o " + f16 + " --dtype f16", "export16").exit_code, 0);
  ASSERT_EQ(vrun("export -m " + kModel + " -o " + f32, "export32").exit_code, 0);
  std::ifstream a(f16, std::ios::binary | std::ios::ate), b(f32, std::ios::binary | std::ios::ate);
  EXPECT_LT(static_cast<int64_t>(a.tellg()), static_cast<int64_t>(b.tellg()));
  const std::string clip = kData + "/" + goldens["clips"]["librivox_0930"]["path"].get<std::string>();
  const CliRun ours = vrun("transcribe --backend cpu -t 2 -m " + f16 + " " + clip, "f16");
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  for (const auto& seg : goldens["tdt"]["clips"]["librivox_0930"]["segments"])
    EXPECT_NE(ours.out.find("]  " + seg["segment"].get<std::string>() + "\n"), std::string::npos) << ours.out;
  const CliRun q4 = vrun("export -m " + kModel + " -o " + ::testing::TempDir() + "/q4.vrp --dtype q4_0", "q4");
  EXPECT_EQ(q4.exit_code, 1);
  EXPECT_NE(q4.err.find("f32, f16 or bf16"), std::string::npos) << q4.err;
}

// `vrun export --local-window W` then `transcribe --attention local`: NeMo's local-attention
// tokens (goldens_local.json); --attention local on a program exported without the method is
// refused, naming the way out.
TEST(ParakeetCli, LocalAttention) {
  const auto goldens = nlohmann::json::parse(slurp(kData + "/parakeet/goldens.json"));
  const auto local = nlohmann::json::parse(slurp(kData + "/parakeet/goldens_local.json"));
  const std::string with = ::testing::TempDir() + "/tdt_small_local.vrp", without = ::testing::TempDir() + "/tdt_small_nolocal.vrp";
  ASSERT_EQ(vrun("export -m " + kModel + " -o " + with + " --local-window " + std::to_string(local["window"].get<int64_t>()), "exportw")
                .exit_code,
            0);
  ASSERT_EQ(vrun("export -m " + kModel + " -o " + without + " --local-window 0", "export0").exit_code, 0);
  const std::string clip = kData + "/" + goldens["clips"]["long_concat"]["path"].get<std::string>();
  const CliRun ours = vrun("transcribe --backend cpu -t 2 --attention local -m " + with + " " + clip, "local");
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  for (const auto& seg : local["tdt"]["clips"]["long_concat"]["segments"])
    EXPECT_NE(ours.out.find("]  " + seg["segment"].get<std::string>() + "\n"), std::string::npos) << ours.out;
  const CliRun refused = vrun("transcribe --backend cpu -t 2 --attention local -m " + without + " " + clip, "nolocal");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("no local-attention method"), std::string::npos) << refused.err;
  EXPECT_NE(vrun("transcribe --attention sparse -m " + kModel + " " + clip, "badatt").exit_code, 0);
}

}  // namespace
}  // namespace vrun::parakeet
