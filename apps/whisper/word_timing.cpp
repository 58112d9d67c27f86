#include "apps/whisper/word_timing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace vrun::whisper {

namespace {

// Python's `needle in haystack` for str (UTF-8 substrings match the same way); "" is in anything.
bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Whether s is complete, valid UTF-8 (what a decode without U+FFFD gives).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 4;
    if (n == 4 || i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n + 1;
  }
  return true;
}

const std::string kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";  // Python's string.punctuation

}  // namespace

std::vector<float> alignment_matrix(const std::vector<float>& scores, int64_t heads, int64_t seq, int64_t ctx,
                                    int64_t frames, int64_t row_begin, int64_t rows, int width) {
  std::vector<float> w(static_cast<size_t>(heads * seq * frames));
  auto at = [&](int64_t h, int64_t i, int64_t j) -> float& { return w[static_cast<size_t>((h * seq + i) * frames + j)]; };
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < seq; ++i) {
      const float* row = scores.data() + (h * seq + i) * ctx;
      const float m = *std::max_element(row, row + frames);
      double s = 0;
      for (int64_t j = 0; j < frames; ++j) s += std::exp(static_cast<double>(row[j]) - m);
      for (int64_t j = 0; j < frames; ++j) at(h, i, j) = static_cast<float>(std::exp(static_cast<double>(row[j]) - m) / s);
    }
  // Standardise every (head, frame) column over the tokens (population std, no epsilon).
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < frames; ++j) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < seq; ++i) mean += at(h, i, j);
      mean /= static_cast<double>(seq);
      for (int64_t i = 0; i < seq; ++i) var += (at(h, i, j) - mean) * (at(h, i, j) - mean);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(seq));
      for (int64_t i = 0; i < seq; ++i) at(h, i, j) = static_cast<float>((at(h, i, j) - mean) * inv);
    }
  // Median filter along time with reflected edges; rows too short for the window pass through.
  const int64_t half = width / 2;
  std::vector<float> out(static_cast<size_t>(rows * frames), 0.0f), window(static_cast<size_t>(width)), row(static_cast<size_t>(frames));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = row_begin + r;
      for (int64_t j = 0; j < frames; ++j) row[static_cast<size_t>(j)] = at(h, i, j);
      for (int64_t j = 0; j < frames; ++j) {
        float v = row[static_cast<size_t>(j)];
        if (frames > half) {
          for (int64_t k = -half; k <= half; ++k) {
            int64_t read = std::abs(j + k);
            if (read >= frames) read = frames - (read - frames) - 2;
            window[static_cast<size_t>(k + half)] = row[static_cast<size_t>(read)];
          }
          std::nth_element(window.begin(), window.begin() + half, window.end());
          v = window[static_cast<size_t>(half)];
        }
        out[static_cast<size_t>(r * frames + j)] += v / static_cast<float>(heads);
      }
    }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> negative_dtw(const std::vector<float>& x, int64_t n, int64_t m) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const auto W = static_cast<size_t>(m + 1);
  std::vector<float> cost(static_cast<size_t>(n + 1) * W, inf);
  std::vector<int8_t> trace(static_cast<size_t>(n + 1) * W, -1);
  cost[0] = 0;
  for (int64_t j = 1; j <= m; ++j)
    for (int64_t i = 1; i <= n; ++i) {
      const size_t ij = static_cast<size_t>(i) * W + static_cast<size_t>(j);
      const float c0 = cost[ij - W - 1], c1 = cost[ij - W], c2 = cost[ij - 1];
      float c;
      int8_t t;
      if (c0 < c1 && c0 < c2) c = c0, t = 0;
      else if (c1 < c0 && c1 < c2) c = c1, t = 1;
      else c = c2, t = 2;
      cost[ij] = -x[static_cast<size_t>((i - 1) * m + (j - 1))] + c;
      trace[ij] = t;
    }
  for (int64_t j = 0; j <= m; ++j) trace[static_cast<size_t>(j)] = 2;
  for (int64_t i = 0; i <= n; ++i) trace[static_cast<size_t>(i) * W] = 1;
  std::vector<std::pair<int64_t, int64_t>> path;
  int64_t i = n, j = m;
  while (i > 0 || j > 0) {
    path.emplace_back(i - 1, j - 1);
    const int8_t t = trace[static_cast<size_t>(i) * W + static_cast<size_t>(j)];
    if (t == 0) --i, --j;
    else if (t == 1) --i;
    else --j;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

void split_to_word_tokens(const std::vector<int32_t>& tokens, int32_t eot, bool split_on_spaces,
                          const std::function<std::string(int32_t)>& bytes_of, std::vector<std::string>& words,
                          std::vector<std::vector<int32_t>>& word_tokens) {
  std::vector<std::string> subwords;
  std::vector<std::vector<int32_t>> subword_tokens;
  std::string pending;
  std::vector<int32_t> current;
  for (int32_t t : tokens) {
    current.push_back(t);
    pending += bytes_of(t);
    if (valid_utf8(pending)) {
      subwords.push_back(pending);
      subword_tokens.push_back(current);
      pending.clear();
      current.clear();
    }
  }
  if (!current.empty()) {  // bytes that never became valid text stay one piece
    subwords.push_back(pending);
    subword_tokens.push_back(current);
  }
  words.clear();
  word_tokens.clear();
  if (!split_on_spaces) {
    words = std::move(subwords);
    word_tokens = std::move(subword_tokens);
    return;
  }
  for (size_t k = 0; k < subwords.size(); ++k) {
    const std::string& sw = subwords[k];
    const bool special = subword_tokens[k][0] >= eot;
    const bool with_space = !sw.empty() && sw[0] == ' ';
    const bool punctuation = contains(kPunctuation, strip(sw));
    if (special || with_space || punctuation || words.empty()) {
      words.push_back(sw);
      word_tokens.push_back(subword_tokens[k]);
    } else {
      words.back() += sw;
      word_tokens.back().insert(word_tokens.back().end(), subword_tokens[k].begin(), subword_tokens[k].end());
    }
  }
}

std::vector<WordTiming> words_from_alignment(const std::vector<std::string>& words,
                                             const std::vector<std::vector<int32_t>>& word_tokens,
                                             const std::vector<std::pair<int64_t, int64_t>>& path,
                                             const std::vector<double>& token_probs) {
  std::vector<WordTiming> out;
  if (word_tokens.size() <= 1 || path.empty()) return out;
  // The time of each token row's first frame on the path (rows advance by at most one).
  std::vector<double> jump_times;
  for (size_t k = 0; k < path.size(); ++k)
    if (k == 0 || path[k].first != path[k - 1].first) jump_times.push_back(static_cast<double>(path[k].second) / 50.0);
  std::vector<size_t> boundaries = {0};
  for (size_t w = 0; w + 1 < word_tokens.size(); ++w) boundaries.push_back(boundaries.back() + word_tokens[w].size());
  for (size_t w = 0; w + 1 < boundaries.size(); ++w) {
    const size_t b = boundaries[w], e = boundaries[w + 1];
    if (e >= jump_times.size() + 1 || b >= jump_times.size()) break;
    WordTiming t;
    t.word = words[w];
    t.tokens = word_tokens[w];
    t.start = jump_times[b];
    t.end = jump_times[std::min(e, jump_times.size() - 1)];
    double p = 0;
    for (size_t k = b; k < e && k < token_probs.size(); ++k) p += token_probs[k];
    t.probability = e > b ? p / static_cast<double>(e - b) : 0.0;
    out.push_back(std::move(t));
  }
  return out;
}

void merge_punctuations(std::vector<WordTiming>& a, const std::string& prepended, const std::string& appended) {
  if (a.size() >= 2) {
    int64_t i = static_cast<int64_t>(a.size()) - 2, j = static_cast<int64_t>(a.size()) - 1;
    while (i >= 0) {
      WordTiming& prev = a[static_cast<size_t>(i)];
      WordTiming& next = a[static_cast<size_t>(j)];
      if (!prev.word.empty() && prev.word[0] == ' ' && contains(prepended, strip(prev.word))) {
        next.word = prev.word + next.word;
        next.tokens.insert(next.tokens.begin(), prev.tokens.begin(), prev.tokens.end());
        prev.word.clear();
        prev.tokens.clear();
      } else {
        j = i;
      }
      --i;
    }
  }
  size_t i = 0, j = 1;
  while (j < a.size()) {
    WordTiming& prev = a[i];
    WordTiming& next = a[j];
    if (!(!prev.word.empty() && prev.word.back() == ' ') && contains(appended, next.word)) {
      prev.word += next.word;
      prev.tokens.insert(prev.tokens.end(), next.tokens.begin(), next.tokens.end());
      next.word.clear();
      next.tokens.clear();
    } else {
      i = j;
    }
    ++j;
  }
}

std::pair<double, double> clamp_sentence_end_words(std::vector<WordTiming>& a) {
  std::vector<double> durations;
  for (const auto& w : a)
    if (w.end - w.start != 0) durations.push_back(w.end - w.start);
  double median = 0;
  if (!durations.empty()) {
    std::sort(durations.begin(), durations.end());
    const size_t n = durations.size();
    median = n % 2 ? durations[n / 2] : 0.5 * (durations[n / 2 - 1] + durations[n / 2]);
  }
  median = std::min(0.7, median);
  const double max_duration = median * 2;
  if (!durations.empty()) {
    const std::string marks = ".\u3002!\uff01?\uff1f";
    for (size_t i = 1; i < a.size(); ++i)
      if (a[i].end - a[i].start > max_duration) {
        if (contains(marks, a[i].word)) a[i].end = a[i].start + max_duration;
        else if (contains(marks, a[i - 1].word)) a[i].start = a[i].end - max_duration;
      }
  }
  return {median, max_duration};
}

}  // namespace vrun::whisper
