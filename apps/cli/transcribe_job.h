// `vrun transcribe` as a job over many files: the inputs (files, folders searched for audio, lists of
// paths or JSONL entries), the output name of each, --shard, --resume, the --summary JSONL and the
// progress line over the whole job. The transcription itself stays in cmd_transcribe.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::cli::job {

// Audio a folder is searched for: the extensions preprocess/audio_loader reads (libsndfile), any case.
bool is_audio_file_name(const std::filesystem::path& p);
const char* audio_extensions_text();

struct Input {
  std::string path;        // as given, as found under a folder, or a list's line resolved against the list's folder
  std::string id;          // output stem under --output-dir ('/'-separated, no extension)
  std::string origin;      // what named it, for messages: the argument, or "LIST:LINE"
  double duration_s = -1;  // from the header (queue order, progress); negative when unknown
  uintmax_t bytes = 0;
};

// The seconds of audio a file is expected to hold: its header's, else its size as 16-kHz 16-bit mono.
inline double estimate_s(const Input& in) { return in.duration_s >= 0 ? in.duration_s : static_cast<double>(in.bytes) / 32000.0; }

// Files and folders (and "-") from the command line, and --input-list.
struct Sources {
  std::vector<std::string> args;
  std::string input_list;
};

// Expands folders and the list and names every input's output (docs/archive.md, "Output names"):
// under a folder argument, the path relative to that folder; a JSONL entry with an id, the id; plain
// files and list lines, the path relative to the longest folder they share. Errors name the list
// file and line, a folder without audio, an id that is absolute or climbs out, and two inputs that
// would write the same output.
Result<std::vector<Input>> expand(const Sources& sources);

struct Shard {
  int index = 0, count = 1;
};
// "I/N" with 0 <= I < N.
Result<Shard> parse_shard(const std::string& text);
// The inputs sorted by path, then every count-th from index: the shards of one job cover it once.
std::vector<Input> take_shard(std::vector<Input> inputs, Shard shard);

// Where `in`'s transcripts go: DIR/ID.FORMAT for each format.
std::vector<std::string> output_paths(const Input& in, const std::string& dir, const std::vector<std::string>& formats);

// One line of the summary (docs/archive.md, "Summary").
struct Record {
  std::string input, id;
  std::vector<std::string> outputs;
  double duration_s = 0, seconds = 0;
  std::string status;  // ok, failed, skipped
  std::string error;   // failed
  std::string reason;  // skipped
  int worker = -1;     // which worker did it (the order of --devices / --workers); -1: the only one
};
std::string record_json(const Record& r);

// The inputs an earlier run's summary records as done ("status": "ok"); a missing file has none.
// A line that is not a summary record is an error naming the file and line.
Result<std::set<std::string>> done_in_summary(const std::string& path);

// --summary FILE: one JSON line per input as it finishes, flushed, shared by the workers.
class Summary {
 public:
  ~Summary();
  // append: keep the lines already there (--resume); otherwise the file starts empty.
  Status open(const std::string& path, bool append);
  void write(const Record& r);

 private:
  std::mutex mu_;
  std::FILE* f_ = nullptr;
};

// The progress line over the whole job on stderr: files done of all, audio hours, RTFx, ETA; at
// most once a second (and once at the end). On a terminal one line rewritten in place.
class Progress {
 public:
  Progress(bool enabled, bool tty, size_t files, double estimated_audio_s);
  // A file is finished (ok or failed): its estimate leaves the remainder, its real length is done.
  void file_done(double estimate_s, double audio_s, bool failed);
  // Whether the line is on the terminal now (a segment printed on stdout must clear it first).
  bool clear_line();
  void final_line();

 private:
  void print(bool force);
  bool enabled_, tty_, shown_ = false;
  size_t files_, done_ = 0, failed_ = 0;
  double remaining_estimate_s_, audio_done_s_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace vrun::cli::job
