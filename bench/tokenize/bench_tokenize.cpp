// Encoding speed on one core: vrun's tokenizer and Hugging Face `tokenizers` (single thread, same
// vocabulary, same text split into the same lines, in the same run), with the ratio and a check
// that the ids are identical.
//
//   bench_tokenize --tokenizer tokenizer.json --text bench.txt [--python VENV/bin/python] [--runs 3]
//                  [--also model.gguf]
// bench/tokenize/run.sh makes the text and the Python environment.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "apps/common/tokenizer/loaders.h"

namespace {

using vrun::tok::TokenId;
using vrun::tok::Tokenizer;

struct Timing {
  size_t tokens = 0;
  double seconds = 0;
  std::vector<TokenId> ids;
};

// Lines keep their newline; both sides encode the same units.
std::vector<std::string_view> split_lines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    nl = nl == std::string::npos ? text.size() : nl + 1;
    lines.push_back(std::string_view(text).substr(pos, nl - pos));
    pos = nl;
  }
  return lines;
}

Timing time_encode(const Tokenizer& tok, const std::string& text, int runs) {
  Timing best;
  const auto lines = split_lines(text);
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<TokenId> ids;
    ids.reserve(text.size() / 2);
    for (std::string_view line : lines) {
      const auto part = tok.encode(line, vrun::tok::EncodeOptions{});
      ids.insert(ids.end(), part.begin(), part.end());
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r == 0 || dt < best.seconds) {
      best.seconds = dt;
      best.tokens = ids.size();
      best.ids = std::move(ids);
    }
  }
  return best;
}

int usage() {
  std::fprintf(stderr, "usage: bench_tokenize --tokenizer FILE --text FILE [--python PY] [--runs N] [--also MODEL] [--dump IDS]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, text_path, python, also, dump;
  int runs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--tokenizer") tokenizer_path = v;
    else if (k == "--text") text_path = v;
    else if (k == "--python") python = v;
    else if (k == "--runs") runs = std::max(1, std::atoi(v.c_str()));
    else if (k == "--also") also = v;
    else if (k == "--dump") dump = v;
    else return usage();
  }
  if (tokenizer_path.empty() || text_path.empty()) return usage();
  auto text = vrun::tok::read_file_bytes(text_path);
  auto tok = vrun::tok::load_tokenizer_file(tokenizer_path);
  if (!text.is_ok() || !tok.is_ok()) {
    std::fprintf(stderr, "%s\n", (!text.is_ok() ? text.status() : tok.status()).to_string().c_str());
    return 1;
  }
  std::printf("text: %s (%.2f MB)\n", text_path.c_str(), text->size() / 1e6);
  // A first pass warms the word cache the way a long-running process would have it.
  const Timing ours = time_encode(**tok, *text, runs);
  const double ours_rate = ours.tokens / ours.seconds;
  std::printf("vrun       %-28s %9zu tokens  %7.3f s  %6.2f M tokens/s  %6.1f MB/s\n", "(tokenizer.json, 1 thread)",
              ours.tokens, ours.seconds, ours_rate / 1e6, text->size() / ours.seconds / 1e6);
  if (!dump.empty()) {
    std::ofstream out(dump);
    for (TokenId id : ours.ids) out << id << "\n";
  }
  if (!also.empty()) {
    auto other = vrun::tok::load_tokenizer_file(also);
    if (other.is_ok()) {
      const Timing t = time_encode(**other, *text, runs);
      std::printf("vrun       %-28s %9zu tokens  %7.3f s  %6.2f M tokens/s\n", also.substr(also.find_last_of('/') + 1).c_str(),
                  t.tokens, t.seconds, t.tokens / t.seconds / 1e6);
    } else {
      std::fprintf(stderr, "%s\n", other.status().to_string().c_str());
    }
  }
  if (python.empty()) return 0;
  const std::string ids_path = "/tmp/vrun-bench-hf-ids.txt";
  const std::string cmd = python + " " + VRUN_BENCH_DIR + "/hf_tokenize.py '" + tokenizer_path + "' '" + text_path + "' " +
                          ids_path + " " + std::to_string(runs);
  FILE* p = popen(cmd.c_str(), "r");
  size_t hf_tokens = 0;
  double hf_seconds = 0;
  if (p == nullptr || std::fscanf(p, "%zu %lf", &hf_tokens, &hf_seconds) != 2) {
    std::fprintf(stderr, "peer failed: %s\n", cmd.c_str());
    if (p) pclose(p);
    return 1;
  }
  pclose(p);
  const double hf_rate = hf_tokens / hf_seconds;
  std::printf("tokenizers %-28s %9zu tokens  %7.3f s  %6.2f M tokens/s\n", "(Hugging Face, 1 thread)", hf_tokens, hf_seconds,
              hf_rate / 1e6);
  std::ifstream in(ids_path);
  std::vector<TokenId> hf_ids;
  TokenId id;
  while (in >> id) hf_ids.push_back(id);
  std::printf("ratio vrun/tokenizers: %.2fx   ids identical: %s\n", ours_rate / hf_rate, hf_ids == ours.ids ? "yes" : "NO");
  return hf_ids == ours.ids ? 0 : 1;
}
