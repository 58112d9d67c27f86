// `vrun transcribe` checks its command before the model loads: every case below names a model that
// does not exist, so a message about the option (not about the model) shows the check came first.
#include <algorithm>
#include <filesystem>

#include "cli_test_util.h"

namespace vrun::testing {
namespace {

const std::string kNoModel = "-m /nonexistent/model";

// A tiny WAV (0.1 s of silence, 16 kHz mono s16) in `dir`.
std::string write_wav(const std::string& dir, const std::string& name) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream f(path, std::ios::binary);
  const uint32_t frames = 1600, data = frames * 2, riff = 36 + data, fmt = 16, rate = 16000, bps = rate * 2;
  const uint16_t pcm = 1, ch = 1, align = 2, bits = 16;
  f.write("RIFF", 4).write(reinterpret_cast<const char*>(&riff), 4).write("WAVEfmt ", 8);
  f.write(reinterpret_cast<const char*>(&fmt), 4).write(reinterpret_cast<const char*>(&pcm), 2);
  f.write(reinterpret_cast<const char*>(&ch), 2).write(reinterpret_cast<const char*>(&rate), 4);
  f.write(reinterpret_cast<const char*>(&bps), 4).write(reinterpret_cast<const char*>(&align), 2);
  f.write(reinterpret_cast<const char*>(&bits), 2).write("data", 4).write(reinterpret_cast<const char*>(&data), 4);
  const std::string zeros(data, '\0');
  f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  return path;
}

struct Case {
  std::string args, message;
};

// Each case run on `wav` exits with `exit_code` and the message "vrun transcribe: <message>".
template <size_t N>
void expect_refused(const Case (&cases)[N], const std::string& wav, int exit_code, const std::string& tag) {
  int k = 0;
  for (const auto& c : cases) {
    const CliRun r = run_vrun("transcribe " + kNoModel + " " + c.args + " " + wav, tag + std::to_string(k++));
    EXPECT_EQ(r.exit_code, exit_code) << c.args << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "vrun transcribe: " + c.message)) << c.args << ": " << r.err;
  }
}

TEST(CliTranscribeValidate, RangesNameTheOptionBeforeLoading) {
  const std::string wav = write_wav(::testing::TempDir() + "/vrun_tv", "a.wav");
  const Case cases[] = {{"--beam-size 0", "--beam-size must be >= 1, got 0"},
                        {"--best-of 0", "--best-of must be >= 1, got 0"},
                        {"--temperature 2", "--temperature must be in [0, 1], got 2"},
                        {"--temperature -0.5", "--temperature must be in [0, 1], got -0.5"},
                        {"--patience 0", "--patience must be > 0, got 0"},
                        {"--batch-size -1", "--batch-size must be >= 0, got -1"},
                        {"--rate 16000 --channels 65", "--channels must be in 1..64, got 65"},
                        {"--rate 16000 --channels 0", "--channels must be in 1..64, got 0"},
                        {"--rate -5", "--rate must be > 0, got -5"}};
  expect_refused(cases, wav, 1, "tv_range");
}

// Choices the parser itself knows: exit code 2, the option and its accepted values named.
TEST(CliTranscribeValidate, ChoicesAreCheckedByTheParser) {
  const std::string wav = write_wav(::testing::TempDir() + "/vrun_tv", "c.wav");
  const Case cases[] = {{"--task summarize", "--task: summarize not in {transcribe,translate}"},
                        {"--attention sparse", "--attention: sparse not in {full,local}"}};
  expect_refused(cases, wav, 2, "tv_choice");
}

TEST(CliTranscribeValidate, MissingInputIsNamedBeforeLoading) {
  const CliRun r = run_vrun("transcribe " + kNoModel + " /nonexistent/x.wav", "tv_missing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "vrun transcribe: /nonexistent/x.wav: no such file")) << r.err;
}

// Same-named files in different folders write different transcripts (d1/x.*, d2/x.*), so the check
// lets them through and the command gets as far as the (missing) model.
TEST(CliTranscribeValidate, SameNamedInputsInDifferentFoldersPass) {
  const std::string root = ::testing::TempDir() + "/vrun_tv_same";
  const std::string a = write_wav(root + "/d1", "x.wav"), b = write_wav(root + "/d2", "x.wav");
  const CliRun r = run_vrun("transcribe " + kNoModel + " -o srt --output-dir " + root + "/out " + a + " " + b, "tv_same");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(contains(r.err, "would both write")) << r.err;
  EXPECT_TRUE(contains(r.err, "/nonexistent/model")) << r.err;
}

// Two inputs that would write the same transcript are refused before loading, naming both: the same file
// twice, or x.wav and x.flac in one folder.
TEST(CliTranscribeValidate, InputsWritingOneTranscriptAreRefusedNamingBoth) {
  const std::string root = ::testing::TempDir() + "/vrun_tv_clash";
  const std::string a = write_wav(root + "/in", "x.wav");
  CliRun r = run_vrun("transcribe " + kNoModel + " -o srt --output-dir " + root + "/out " + a + " " + a, "tv_twice");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, a + " and " + a + " would both write x.*")) << r.err;
  const std::string b = write_wav(root + "/in", "x.flac");
  r = run_vrun("transcribe " + kNoModel + " -o srt --output-dir " + root + "/out " + root + "/in", "tv_clash");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "would both write x.*")) << r.err;
  EXPECT_TRUE(contains(r.err, b)) << r.err;
  EXPECT_FALSE(std::filesystem::exists(root + "/out/x.srt"));
}

// A list's mistakes name the list file and the line, before the model loads.
TEST(CliTranscribeValidate, InputListErrorsNameFileAndLine) {
  const std::string dir = ::testing::TempDir() + "/vrun_tv_list";
  write_wav(dir, "a.wav");
  const Case cases[] = {
      {"# header\n\n{\"path\": 3}\n", "bad1.txt:3: needs \"path\", a non-empty string"},
      {"a.wav\n{\"path\": \"a.wav\"\n", "bad2.txt:2: not a JSON object"},
      {"{\"path\": \"a.wav\", \"id\": \"../up\"}\n", "bad3.txt:1: \"id\" ../up must not contain '..'"},
      {"{\"path\": \"a.wav\", \"id\": \"/abs\"}\n", "bad4.txt:1: \"id\" /abs must be a relative path"},
      {"{\"path\": \"a.wav\", \"id\": \"k\"}\n{\"path\": \"a.wav\", \"id\": \"k\"}\n", "bad5.txt:1 and " + dir + "/bad5.txt:2 would both write k.*"},
      {"# nothing but comments\n", "bad6.txt: lists no audio"}};
  int k = 0;
  for (const auto& c : cases) {
    const std::string list = dir + "/bad" + std::to_string(++k) + ".txt";
    std::ofstream(list) << c.args;
    const CliRun r = run_vrun("transcribe " + kNoModel + " --input-list " + list, "tv_list" + std::to_string(k));
    EXPECT_EQ(r.exit_code, 1) << list << ": " << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << list << ": " << r.err;
  }
  const CliRun r = run_vrun("transcribe " + kNoModel + " --input-list " + dir + "/missing.txt", "tv_list_missing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--input-list " + dir + "/missing.txt: cannot be read")) << r.err;
}

// The job's options are checked before loading too.
TEST(CliTranscribeValidate, JobOptionsAreCheckedBeforeLoading) {
  const std::string dir = ::testing::TempDir() + "/vrun_tv_job";
  const std::string wav = write_wav(dir, "a.wav");
  std::filesystem::create_directories(dir + "/empty");
  const Case cases[] = {{"--shard 3/3 " + wav, "--shard must be I/N with 0 <= I < N (e.g. 0/4), got '3/3'"},
                        {"--shard 1 " + wav, "--shard must be I/N with 0 <= I < N (e.g. 0/4), got '1'"},
                        {"--resume " + wav, "--resume needs -o (the transcripts to look for) or --summary"},
                        {"--workers 0 " + wav, "--workers must be >= 1, got 0"},
                        {"--backend cpu --devices 0 " + wav, "--devices picks Vulkan devices; with --backend cpu use --workers N"},
                        {"--devices 0,0 --workers 2 " + wav, "--devices and --workers exclude each other"},
                        {dir + "/empty", dir + "/empty: a folder with no audio files"}};
  int k = 0;
  for (const auto& c : cases) {
    const CliRun r = run_vrun("transcribe " + kNoModel + " " + c.args, "tv_job" + std::to_string(k++));
    EXPECT_EQ(r.exit_code, 1) << c.args << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "vrun transcribe: " + c.message)) << c.args << ": " << r.err;
  }
}

TEST(CliTranscribeValidate, UnwritableOutputFolderFailsFirst) {
  const std::string wav = write_wav(::testing::TempDir() + "/vrun_tv", "b.wav");
  const CliRun r = run_vrun("transcribe " + kNoModel + " -o txt --output-dir /proc/vrun-no " + wav, "tv_outdir");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "vrun transcribe: --output-dir /proc/vrun-no: not writable")) << r.err;
}

// With the real tiny.en (when cached): the transcript file is written whole, no temporary file is left,
// and its text is the one printed on stdout.
TEST(CliTranscribeValidate, TranscriptIsWrittenWholeWithNoTemporaryLeft) {
  const char* home = std::getenv("HOME");
  const std::string model = home ? std::string(home) + "/.cache/vrun/models/whisper-tiny.en" : "";
  const std::string speech = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav";
  if (!std::filesystem::exists(model) || !std::filesystem::exists(speech)) GTEST_SKIP() << "tiny.en or the speech sample missing";
  const std::string out = ::testing::TempDir() + "/vrun_tv_atomic";
  std::filesystem::remove_all(out);
  const CliRun r = run_vrun("transcribe -m " + model + " --no-timestamps -o txt --output-dir " + out + " " + speech, "tv_atomic");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string txt = slurp(out + "/sense_and_sensibility_01_austen_64kb-0870.txt");
  EXPECT_FALSE(txt.empty());
  EXPECT_TRUE(contains(r.out, txt.substr(0, std::min<size_t>(txt.size(), 40)))) << r.out << " vs " << txt;
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    ++files;
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp")) << e.path();
  }
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace vrun::testing
