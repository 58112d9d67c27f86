#include "apps/cli/transcribe_job.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

namespace vrun::cli::job {

namespace fs = std::filesystem;

namespace {

const char* const kAudioExtensions[] = {".wav", ".wave", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aif", ".aiff", ".au", ".caf", ".w64"};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.' && name != "." && name != "..";
}

// The output stem of `p` relative to `base` (both absolute and normal): its folders and its stem.
std::string stem_under(const fs::path& p, const fs::path& base) {
  const fs::path rel = p.parent_path().lexically_relative(base);
  const fs::path stem = p.stem();
  return (rel.empty() || rel == "." ? stem : rel / stem).generic_string();
}

fs::path absolute_normal(const fs::path& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal();
}

// The longest folder every path lies in (absolute, normal).
fs::path common_folder(const std::vector<fs::path>& paths) {
  fs::path common = paths.front().parent_path();
  for (const auto& p : paths) {
    const fs::path dir = p.parent_path();
    fs::path shared;
    auto a = common.begin(), b = dir.begin();
    for (; a != common.end() && b != dir.end() && *a == *b; ++a, ++b) shared /= *a;
    common = shared;
  }
  return common;
}

// An id from a list names a place under --output-dir: relative, and never above it.
Status check_id(const std::string& id, const std::string& where) {
  const fs::path p(id);
  if (id.empty()) return err(ErrorCode::kInvalidArgument, where, ": \"id\" is empty");
  if (p.is_absolute() || id[0] == '/') return err(ErrorCode::kInvalidArgument, where, ": \"id\" ", id, " must be a relative path");
  for (const auto& part : p)
    if (part == "..") return err(ErrorCode::kInvalidArgument, where, ": \"id\" ", id, " must not contain '..'");
  if (id.back() == '/') return err(ErrorCode::kInvalidArgument, where, ": \"id\" ", id, " names a folder, not a file stem");
  return Status::ok();
}

struct Pending {
  Input in;
  bool plain = true;  // named later, relative to the plain inputs' common folder
};

Status expand_folder(const std::string& arg, std::vector<Pending>* out) {
  std::vector<fs::path> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(arg, ec), end;
  if (ec) return err(ErrorCode::kIo, arg, ": cannot read the folder (", ec.message(), ")");
  for (; it != end; it.increment(ec)) {
    if (ec) return err(ErrorCode::kIo, arg, ": cannot read the folder (", ec.message(), ")");
    if (hidden(it->path())) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec) && is_audio_file_name(it->path())) found.push_back(it->path());
  }
  if (found.empty()) return err(ErrorCode::kInvalidArgument, arg, ": a folder with no audio files (", audio_extensions_text(), ")");
  std::sort(found.begin(), found.end());
  const fs::path base = absolute_normal(arg);
  for (const auto& p : found) {
    Pending e;
    e.in.path = p.string();
    e.in.origin = p.string();
    e.in.id = stem_under(absolute_normal(p), base);
    e.plain = false;
    out->push_back(std::move(e));
  }
  return Status::ok();
}

// One line of a JSONL list: {"path": ..., "id": ...}, id optional, other keys ignored.
Status parse_json_line(const std::string& line, const fs::path& folder, const std::string& where, Pending* e) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return err(ErrorCode::kInvalidArgument, where, ": not a JSON object");
  const auto path = j.find("path");
  if (path == j.end() || !path->is_string() || path->get<std::string>().empty())
    return err(ErrorCode::kInvalidArgument, where, ": needs \"path\", a non-empty string");
  e->in.path = (folder / path->get<std::string>()).lexically_normal().string();
  const auto id = j.find("id");
  if (id != j.end() && !id->is_null()) {
    if (id->is_string()) e->in.id = id->get<std::string>();
    else if (id->is_number_integer()) e->in.id = std::to_string(id->get<int64_t>());
    else return err(ErrorCode::kInvalidArgument, where, ": \"id\" must be a string");
    VRUN_RETURN_IF_ERROR(check_id(e->in.id, where));
    e->plain = false;
  }
  return Status::ok();
}

Status expand_list(const std::string& list, std::vector<Pending>* out) {
  std::ifstream f(list);
  if (!f) return err(ErrorCode::kNotFound, "--input-list ", list, ": cannot be read");
  const fs::path folder = fs::path(list).parent_path();
  std::string line;
  size_t n = 0, before = out->size();
  while (std::getline(f, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t last = line.find_last_not_of(" \t");
    line = line.substr(first, last - first + 1);
    const std::string where = list + ":" + std::to_string(n);
    Pending e;
    e.in.origin = where;
    if (line[0] == '{') {
      VRUN_RETURN_IF_ERROR(parse_json_line(line, folder, where, &e));
    } else {
      e.in.path = (folder / line).lexically_normal().string();
    }
    out->push_back(std::move(e));
  }
  if (f.bad()) return err(ErrorCode::kIo, "--input-list ", list, ": read failed");
  if (out->size() == before) return err(ErrorCode::kInvalidArgument, "--input-list ", list, ": lists no audio");
  return Status::ok();
}

}  // namespace

bool is_audio_file_name(const fs::path& p) {
  const std::string ext = lower(p.extension().string());
  return std::any_of(std::begin(kAudioExtensions), std::end(kAudioExtensions), [&](const char* e) { return ext == e; });
}

const char* audio_extensions_text() { return "wav, flac, ogg, opus, mp3, aiff, au, caf, w64"; }

Result<std::vector<Input>> expand(const Sources& sources) {
  std::vector<Pending> all;
  for (const auto& arg : sources.args) {
    std::error_code ec;
    if (arg != "-" && fs::is_directory(arg, ec)) {
      VRUN_RETURN_IF_ERROR(expand_folder(arg, &all));
      continue;
    }
    Pending e;
    e.in.path = e.in.origin = arg;
    all.push_back(std::move(e));
  }
  if (!sources.input_list.empty()) VRUN_RETURN_IF_ERROR(expand_list(sources.input_list, &all));
  std::vector<fs::path> plain;
  for (const auto& e : all)
    if (e.plain && e.in.path != "-") plain.push_back(absolute_normal(e.in.path));
  const fs::path base = plain.empty() ? fs::path() : common_folder(plain);
  std::vector<Input> inputs;
  std::map<std::string, std::string> by_id;
  for (auto& e : all) {
    if (e.plain) e.in.id = e.in.path == "-" ? "stdin" : stem_under(absolute_normal(e.in.path), base);
    auto [it, fresh] = by_id.emplace(e.in.id, e.in.origin);
    if (!fresh)
      return err(ErrorCode::kInvalidArgument, it->second, " and ", e.in.origin, " would both write ", e.in.id,
                 ".* under --output-dir (give one a JSONL \"id\", or transcribe them in separate runs)");
    std::error_code ec;
    if (e.in.path != "-") e.in.bytes = fs::file_size(e.in.path, ec);
    if (ec) e.in.bytes = 0;
    inputs.push_back(std::move(e.in));
  }
  return inputs;
}

Result<Shard> parse_shard(const std::string& text) {
  Shard s;
  const size_t slash = text.find('/');
  const auto number = [](const std::string& t, int* v) {
    if (t.empty() || t.size() > 9 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
    *v = std::stoi(t);
    return true;
  };
  if (slash == std::string::npos || !number(text.substr(0, slash), &s.index) || !number(text.substr(slash + 1), &s.count) ||
      s.count < 1 || s.index >= s.count)
    return err(ErrorCode::kInvalidArgument, "--shard must be I/N with 0 <= I < N (e.g. 0/4), got '", text, "'");
  return s;
}

std::vector<Input> take_shard(std::vector<Input> inputs, Shard shard) {
  std::stable_sort(inputs.begin(), inputs.end(), [](const Input& a, const Input& b) { return a.path < b.path; });
  std::vector<Input> mine;
  for (size_t k = static_cast<size_t>(shard.index); k < inputs.size(); k += static_cast<size_t>(shard.count))
    mine.push_back(std::move(inputs[k]));
  return mine;
}

std::vector<std::string> output_paths(const Input& in, const std::string& dir, const std::vector<std::string>& formats) {
  std::vector<std::string> out;
  for (const auto& f : formats) out.push_back((fs::path(dir) / (in.id + "." + f)).string());
  return out;
}

std::string record_json(const Record& r) {
  nlohmann::ordered_json j;
  j["input"] = r.input;
  j["id"] = r.id;
  j["outputs"] = r.outputs;
  j["duration_s"] = r.duration_s;
  j["seconds"] = r.seconds;
  j["rtfx"] = r.seconds > 0 ? r.duration_s / r.seconds : 0.0;
  j["status"] = r.status;
  if (r.status == "failed") j["error"] = r.error;
  if (r.status == "skipped") j["reason"] = r.reason;
  if (r.worker >= 0) j["worker"] = r.worker;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::set<std::string>> done_in_summary(const std::string& path) {
  std::set<std::string> done;
  std::ifstream f(path);
  if (!f) return done;
  std::string line;
  size_t n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    // The last line of a run killed mid-write may be cut short: it records nothing.
    if (j.is_discarded() && f.peek() == std::char_traits<char>::eof()) break;
    if (j.is_discarded() || !j.is_object() || !j.contains("input") || !j["input"].is_string() || !j.contains("status"))
      return err(ErrorCode::kInvalidArgument, "--summary ", path, ":", n, ": not a summary record");
    if (j["status"] == "ok") done.insert(j["input"].get<std::string>());
  }
  return done;
}

Summary::~Summary() {
  if (f_) std::fclose(f_);
}

Status Summary::open(const std::string& path, bool append) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  f_ = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (!f_) return err(ErrorCode::kIo, "--summary ", path, ": cannot be written");
  return Status::ok();
}

void Summary::write(const Record& r) {
  if (!f_) return;
  const std::string line = record_json(r) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), f_);
  std::fflush(f_);
}

Progress::Progress(bool enabled, bool tty, size_t files, double estimated_audio_s)
    : enabled_(enabled), tty_(tty), files_(files), remaining_estimate_s_(estimated_audio_s),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

void Progress::file_done(double estimate_s, double audio_s, bool failed) {
  ++done_;
  failed_ += failed ? 1 : 0;
  remaining_estimate_s_ = std::max(0.0, remaining_estimate_s_ - std::max(0.0, estimate_s));
  audio_done_s_ += audio_s;
  print(done_ == files_);
}

bool Progress::clear_line() {
  if (!shown_ || !tty_) return false;
  std::fputs("\r\033[K", stderr);
  shown_ = false;
  return true;
}

void Progress::final_line() {
  if (shown_ && tty_) std::fputc('\n', stderr);
  shown_ = false;
}

// Hours, minutes and seconds: h:mm:ss.
std::string hms(double seconds) {
  const long s = static_cast<long>(std::max(0.0, seconds) + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return text;
}

void Progress::print(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_ < std::chrono::seconds(1)) return;
  last_ = now;
  const double wall = std::chrono::duration<double>(now - start_).count();
  const double rtfx = wall > 0 ? audio_done_s_ / wall : 0.0;
  const std::string eta = rtfx > 0 ? hms(remaining_estimate_s_ / rtfx) : "?";
  char failed[32] = "";
  if (failed_) std::snprintf(failed, sizeof failed, " (%zu failed)", failed_);
  std::fprintf(stderr, "%svrun: %zu/%zu files%s, audio %s of ~%s, RTFx %.1f, ETA %s%s", tty_ ? "\r\033[K" : "", done_, files_, failed,
               hms(audio_done_s_).c_str(), hms(audio_done_s_ + remaining_estimate_s_).c_str(), rtfx, eta.c_str(), tty_ ? "" : "\n");
  std::fflush(stderr);
  shown_ = tty_;
}

}  // namespace vrun::cli::job
