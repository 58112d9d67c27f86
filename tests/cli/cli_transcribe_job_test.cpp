// `vrun transcribe` as a job over many files, end to end with the real Whisper tiny.en on the CPU
// backend (skipped when the model is not cached): folders with same-named files in different
// subfolders, lists of paths and JSONL entries, a bad file recorded and skipped, a run stopped by a
// signal and resumed, shards that cover the input once, two workers giving one worker's text, and
// files transcribed together (--batch-size) giving each file's text alone.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace vrun::testing {
namespace {

namespace fs = std::filesystem;

std::string model_dir() {
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/vrun/models/whisper-tiny.en" : "";
}

std::string clip(const std::string& name) { return std::string(VRUN_TEST_DATA) + "/audio/" + name; }

// A fresh folder for one test.
std::string fresh(const std::string& tag) {
  const std::string dir = fs::path(::testing::TempDir() + "/vrun_job_" + tag).lexically_normal().string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void put(const std::string& from, const std::string& to) {
  fs::create_directories(fs::path(to).parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

std::vector<nlohmann::json> read_summary(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::set<std::string> keys(const nlohmann::json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

// Every file under `dir` (relative, '/'-separated).
std::set<std::string> files_under(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).generic_string());
  return out;
}

class CliTranscribeJob : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(model_dir())) GTEST_SKIP() << "Whisper tiny.en not cached (scripts/fetch-models.sh whisper-tiny)";
  }
  std::string base() const { return "transcribe -m " + model_dir() + " --backend cpu -t 2 --no-timestamps "; }
};

// A folder with d1/x.wav, d2/x.wav, d2/sub/y.wav and a file that is not audio: the transcripts mirror the
// tree, the bad file is recorded as failed and skipped, the others still run, the exit status is 1.
TEST_F(CliTranscribeJob, FolderMirrorsTreeAndRecordsBadFile) {
  const std::string dir = fresh("folder");
  put(clip("speech_0880.wav"), dir + "/in/d1/x.wav");
  put(clip("speech_0930.wav"), dir + "/in/d2/x.wav");
  put(clip("synth.wav"), dir + "/in/d2/sub/y.wav");
  std::ofstream(dir + "/in/d1/bad.wav") << "this is not audio\n";
  std::ofstream(dir + "/in/d1/notes.txt") << "not an audio extension\n";
  const CliRun r = run_vrun(base() + "-o txt,srt --output-dir " + dir + "/out --summary " + dir + "/summary.jsonl " + dir + "/in", "job_folder");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "1 of 4 files failed")) << r.err;
  const std::set<std::string> want = {"d1/x.txt", "d1/x.srt", "d2/x.txt", "d2/x.srt", "d2/sub/y.txt", "d2/sub/y.srt"};
  EXPECT_EQ(files_under(dir + "/out"), want);
  EXPECT_TRUE(contains(slurp(dir + "/out/d1/x.txt"), "old")) << slurp(dir + "/out/d1/x.txt");
  EXPECT_TRUE(contains(slurp(dir + "/out/d2/x.txt"), "amiable")) << slurp(dir + "/out/d2/x.txt");
  const auto lines = read_summary(dir + "/summary.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& j : lines) by_id[j["id"]] = j;
  const std::set<std::string> ok_keys = {"input", "id", "outputs", "duration_s", "seconds", "rtfx", "status"};
  for (const char* id : {"d1/x", "d2/x", "d2/sub/y"}) {
    const auto& j = by_id[id];
    EXPECT_EQ(keys(j), ok_keys) << j.dump();
    EXPECT_EQ(j["status"], "ok");
    EXPECT_EQ(j["outputs"].size(), 2u);
    EXPECT_GT(j["duration_s"].get<double>(), 1.0);
    EXPECT_NEAR(j["rtfx"].get<double>(), j["duration_s"].get<double>() / j["seconds"].get<double>(), 1e-6);
  }
  EXPECT_EQ(by_id["d2/x"]["input"], dir + "/in/d2/x.wav");
  EXPECT_EQ(by_id["d2/x"]["outputs"][0], dir + "/out/d2/x.txt");
  const auto& bad = by_id["d1/bad"];
  EXPECT_EQ(bad["status"], "failed");
  EXPECT_EQ(bad["input"], dir + "/in/d1/bad.wav");
  EXPECT_TRUE(contains(bad["error"].get<std::string>(), "bad.wav")) << bad.dump();
  EXPECT_TRUE(bad["outputs"].empty());
}

// Plain files in two folders keep their folders below the one they share; a list mixes plain lines
// (relative to the list's folder), comments, blank lines and JSONL entries with and without an id.
TEST_F(CliTranscribeJob, PlainFilesAndListsNameTheirOutputs) {
  const std::string dir = fresh("list");
  put(clip("speech_0880.wav"), dir + "/a/x.wav");
  put(clip("speech_0930.wav"), dir + "/b/x.wav");
  put(clip("synth.wav"), dir + "/c/z.wav");
  CliRun r = run_vrun(base() + "-o txt --output-dir " + dir + "/out1 " + dir + "/a/x.wav " + dir + "/b/x.wav", "job_plain");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(files_under(dir + "/out1"), (std::set<std::string>{"a/x.txt", "b/x.txt"}));

  fs::create_directories(dir + "/lists");
  std::ofstream(dir + "/lists/job.txt") << "# the archive\n\n../a/x.wav\n"
                                        << "{\"path\": \"../b/x.wav\", \"id\": \"talks/first\", \"speaker\": \"ignored\"}\n"
                                        << "{\"path\": \"" << dir << "/c/z.wav\"}\n";
  r = run_vrun(base() + "-o txt --output-dir " + dir + "/out2 --summary " + dir + "/s.jsonl --input-list " + dir + "/lists/job.txt",
               "job_list");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(files_under(dir + "/out2"), (std::set<std::string>{"a/x.txt", "c/z.txt", "talks/first.txt"}));
  EXPECT_EQ(slurp(dir + "/out2/talks/first.txt"), slurp(dir + "/out1/b/x.txt"));
  const auto lines = read_summary(dir + "/s.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["input"], dir + "/a/x.wav");
  EXPECT_EQ(lines[1]["id"], "talks/first");

  // A single file writes its stem alone, as before.
  r = run_vrun(base() + "-o txt --output-dir " + dir + "/out3 " + dir + "/c/z.wav", "job_single");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(files_under(dir + "/out3"), (std::set<std::string>{"z.txt"}));
}

// Runs vrun in the background through the shell; returns its process id.
pid_t spawn_vrun(const std::string& args, const std::string& log) {
  const std::string cmd = "exec " + vrun_binary() + " " + args + " > " + log + ".out 2> " + log + ".err < /dev/null";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

size_t line_count(const std::string& path) {
  std::ifstream f(path);
  size_t n = 0;
  std::string line;
  while (std::getline(f, line)) ++n;
  return n;
}

// SIGINT after two files: the files running finish, the exit status is 130, and --resume does the rest:
// every input ends with exactly one "ok" record, the ones done before are skipped (their transcripts not
// written again) and no temporary file is left.
TEST_F(CliTranscribeJob, InterruptedRunResumesWithoutRedoingOrLosing) {
  const std::string dir = fresh("resume");
  const int n = 8;
  for (int k = 0; k < n; ++k) put(clip(k % 2 ? "synth.wav" : "speech_0880.wav"), dir + "/in/f" + std::to_string(k) + ".wav");
  const std::string args = base() + "-o txt,json --output-dir " + dir + "/out --summary " + dir + "/s.jsonl " + dir + "/in";
  const pid_t pid = spawn_vrun(args, dir + "/first");
  ASSERT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (line_count(dir + "/s.jsonl") < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(dir + "/first.err");
  const auto first = read_summary(dir + "/s.jsonl");
  ASSERT_GE(first.size(), 2u);
  ASSERT_LT(first.size(), static_cast<size_t>(n)) << "the run finished before the signal";
  std::map<std::string, struct stat> before;
  for (const auto& j : first) {
    EXPECT_EQ(j["status"], "ok") << j.dump();
    for (const auto& out : j["outputs"]) stat(out.get<std::string>().c_str(), &before[out.get<std::string>()]);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));

  const CliRun r = run_vrun(args + " --resume", "job_resume");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto all = read_summary(dir + "/s.jsonl");
  std::map<std::string, int> ok, skipped;
  for (const auto& j : all) {
    if (j["status"] == "ok") ++ok[j["input"]];
    if (j["status"] == "skipped") {
      ++skipped[j["input"]];
      EXPECT_EQ(j["reason"], "outputs exist");
    }
  }
  EXPECT_EQ(ok.size(), static_cast<size_t>(n));
  for (const auto& [input, count] : ok) EXPECT_EQ(count, 1) << input;
  EXPECT_EQ(skipped.size(), first.size());
  for (const auto& j : first) EXPECT_EQ(skipped[j["input"]], 1) << j.dump();
  for (const auto& [path, st] : before) {
    struct stat now {};
    ASSERT_EQ(stat(path.c_str(), &now), 0) << path;
    EXPECT_EQ(now.st_mtim.tv_sec, st.st_mtim.tv_sec) << path << " was written again";
    EXPECT_EQ(now.st_mtim.tv_nsec, st.st_mtim.tv_nsec) << path << " was written again";
  }
  const auto files = files_under(dir + "/out");
  EXPECT_EQ(files.size(), static_cast<size_t>(2 * n));
  for (const auto& f : files) EXPECT_FALSE(contains(f, ".tmp")) << f;
}

// --shard 0/3, 1/3, 2/3 of one job: disjoint, and together every input exactly once.
TEST_F(CliTranscribeJob, ShardsCoverTheInputOnce) {
  const std::string dir = fresh("shard");
  const int n = 5;
  for (int k = 0; k < n; ++k) put(clip("synth.wav"), dir + "/in/s" + std::to_string(k) + ".wav");
  std::map<std::string, int> seen;
  for (int s = 0; s < 3; ++s) {
    const std::string shard = std::to_string(s) + "/3";
    const std::string summary = dir + "/s" + std::to_string(s) + ".jsonl";
    const CliRun r = run_vrun(base() + "--shard " + shard + " -o txt --output-dir " + dir + "/out --summary " + summary + " " + dir + "/in",
                              "job_shard" + std::to_string(s));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto lines = read_summary(summary);
    EXPECT_EQ(lines.size(), s < 2 ? 2u : 1u) << shard;  // 5 inputs: 2, 2, 1
    for (const auto& j : lines) {
      EXPECT_EQ(j["status"], "ok");
      ++seen[j["input"]];
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  for (const auto& [input, count] : seen) EXPECT_EQ(count, 1) << input;
  EXPECT_EQ(files_under(dir + "/out").size(), static_cast<size_t>(n));
}

// in/a.wav, in/b.wav, in/c.wav (a synthetic signal: no words) and in/d/e.wav.
void put_four_clips(const std::string& dir) {
  put(clip("speech_0880.wav"), dir + "/in/a.wav");
  put(clip("speech_0930.wav"), dir + "/in/b.wav");
  put(clip("synth.wav"), dir + "/in/c.wav");
  put(clip("speech_0930.wav"), dir + "/in/d/e.wav");
}

// Two workers (two models, one queue, longest file first) write the same text as one worker, file by file.
TEST_F(CliTranscribeJob, TwoWorkersWriteWhatOneWrites) {
  const std::string dir = fresh("workers");
  put_four_clips(dir);
  const std::string common = "transcribe -m " + model_dir() + " --backend cpu -o txt,json ";
  // No -t: one worker has every core, two workers half each.
  CliRun one = run_vrun(common + "--output-dir " + dir + "/one " + dir + "/in", "job_one");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  CliRun two = run_vrun(common + "--workers 2 --output-dir " + dir + "/two " + dir + "/in", "job_two");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  size_t loads = 0;
  for (size_t at = two.err.find("vrun: loaded"); at != std::string::npos; at = two.err.find("vrun: loaded", at + 1)) ++loads;
  EXPECT_EQ(loads, 2u) << two.err;
  const auto files = files_under(dir + "/one");
  EXPECT_EQ(files, files_under(dir + "/two"));
  EXPECT_EQ(files.size(), 8u);
  for (const auto& f : files) {
    if (!contains(f, ".txt")) continue;
    if (f != "c.txt") {  // c.wav is a synthetic signal: no words
      EXPECT_FALSE(slurp(dir + "/one/" + f).empty()) << f;
    }
    EXPECT_EQ(slurp(dir + "/one/" + f), slurp(dir + "/two/" + f)) << f;
  }
  // Each file's segments are printed together, after its "# path" line, in both runs.
  for (const char* name : {"/in/a.wav", "/in/b.wav", "/in/c.wav", "/in/d/e.wav"})
    EXPECT_TRUE(contains(two.out, "# " + dir + name)) << two.out;
}

// Whether this CPU's BLAS sums a row alike whatever rows share its call (`vrun info` says when not:
// blas_rows_independent).
bool blas_rows_independent() {
  static const bool independent = !contains(run_vrun("info", "blas_info").out, "depend on the rows beside it");
  return independent;
}

// Two JSON documents alike: every value equal, or, where exact is false, numbers that are not
// integers within 1e-4 (probabilities summed in another order).
void expect_json_alike(const nlohmann::json& a, const nlohmann::json& b, bool exact, const std::string& at) {
  if (!exact && a.is_number_float() && b.is_number_float()) {
    EXPECT_NEAR(a.get<double>(), b.get<double>(), 1e-4) << at;
    return;
  }
  ASSERT_EQ(a.type(), b.type()) << at;
  if (a.is_object() || a.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << at;
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string key = a.is_object() ? it.key() : std::to_string(std::distance(a.begin(), it));
      const nlohmann::json& other = a.is_object() ? b.at(it.key()) : b.at(static_cast<size_t>(std::distance(a.begin(), it)));
      expect_json_alike(*it, other, exact, at + "/" + key);
    }
    return;
  }
  EXPECT_EQ(a, b) << at;
}

// --batch-size 3: the files' windows encoded and decoded together (Whisper's streams) write every
// file's transcripts byte for byte as one file at a time does (where the CPU's BLAS sums a row
// alike whatever shares its call; elsewhere the same text, tokens and times, and probabilities
// to 1e-4); a bad file in the batch fails alone.
TEST_F(CliTranscribeJob, BatchSizeWritesWhatOneAtATimeWrites) {
  const std::string dir = fresh("batch");
  put_four_clips(dir);
  {
    std::ofstream bad(dir + "/in/d/f.wav");
    bad << "not audio";
  }
  const std::string common = "transcribe -m " + model_dir() + " --backend cpu -t 2 -o json,srt --word-timestamps ";
  CliRun one = run_vrun(common + "--output-dir " + dir + "/one " + dir + "/in", "batch_one");
  EXPECT_EQ(one.exit_code, 1) << one.err;  // the bad file
  CliRun three = run_vrun(common + "--batch-size 3 --output-dir " + dir + "/three " + dir + "/in", "batch_three");
  EXPECT_EQ(three.exit_code, 1) << three.err;
  EXPECT_TRUE(contains(three.err, "files in")) << three.err;  // a group went through transcribe_many
  EXPECT_TRUE(contains(three.err, "f.wav")) << three.err;
  const auto files = files_under(dir + "/one");
  EXPECT_EQ(files, files_under(dir + "/three"));
  EXPECT_EQ(files.size(), 8u);
  for (const auto& f : files) {
    if (blas_rows_independent() || f.size() < 5 || f.substr(f.size() - 5) != ".json") {
      EXPECT_EQ(slurp(dir + "/one/" + f), slurp(dir + "/three/" + f)) << f;
      continue;
    }
    expect_json_alike(nlohmann::json::parse(slurp(dir + "/one/" + f)), nlohmann::json::parse(slurp(dir + "/three/" + f)), false, f);
  }
}

}  // namespace
}  // namespace vrun::testing
