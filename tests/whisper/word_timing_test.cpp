// Word-timing pieces against references written here: DTW recovers a planted monotone path,
// the attention post-processing equals float64 math (softmax, standardisation over tokens,
// reflected median of 7, mean over heads), words split at spaces and punctuation as
// openai-whisper's tokenizer does, punctuation merges as its timing.py does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "apps/whisper/word_timing.h"

namespace vrun::whisper {
namespace {

TEST(WordTiming, DtwFollowsAPlantedPath) {
  const int64_t n = 6, m = 20;
  std::vector<std::pair<int64_t, int64_t>> planted;
  // Row r spans columns [3r, 3r + 3) (the last row to the end): a staircase.
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 3 * r; c < (r + 1 == n ? m : 3 * r + 3); ++c) planted.emplace_back(r, c);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> noise(-1.1f, -0.9f);  // off the path every cell costs
  std::vector<float> x(static_cast<size_t>(n * m));
  for (auto& v : x) v = noise(rng);
  for (auto [r, c] : planted) x[static_cast<size_t>(r * m + c)] = 1.0f;
  EXPECT_EQ(negative_dtw(x, n, m), planted);
}

TEST(WordTiming, AlignmentMatrixEqualsFloat64Math) {
  const int64_t heads = 2, seq = 5, ctx = 12, frames = 10, row_begin = 1, rows = 3;
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> scores(static_cast<size_t>(heads * seq * ctx));
  for (auto& v : scores) v = d(rng);
  const std::vector<float> got = alignment_matrix(scores, heads, seq, ctx, frames, row_begin, rows, 7);
  std::vector<double> want(static_cast<size_t>(rows * frames), 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<std::vector<double>> p(static_cast<size_t>(seq), std::vector<double>(static_cast<size_t>(frames)));
    for (int64_t i = 0; i < seq; ++i) {
      double z = 0;
      for (int64_t j = 0; j < frames; ++j) z += std::exp(static_cast<double>(scores[static_cast<size_t>((h * seq + i) * ctx + j)]));
      for (int64_t j = 0; j < frames; ++j)
        p[static_cast<size_t>(i)][static_cast<size_t>(j)] = std::exp(static_cast<double>(scores[static_cast<size_t>((h * seq + i) * ctx + j)])) / z;
    }
    for (int64_t j = 0; j < frames; ++j) {
      double mean = 0, sq = 0;
      for (int64_t i = 0; i < seq; ++i) mean += p[static_cast<size_t>(i)][static_cast<size_t>(j)] / seq;
      for (int64_t i = 0; i < seq; ++i) sq += std::pow(p[static_cast<size_t>(i)][static_cast<size_t>(j)] - mean, 2) / seq;
      for (int64_t i = 0; i < seq; ++i) p[static_cast<size_t>(i)][static_cast<size_t>(j)] = (p[static_cast<size_t>(i)][static_cast<size_t>(j)] - mean) / std::sqrt(sq);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const auto& row = p[static_cast<size_t>(row_begin + r)];
      for (int64_t j = 0; j < frames; ++j) {
        std::vector<double> win;  // numpy-style reflect padding of 3 on each side
        for (int64_t k = j - 3; k <= j + 3; ++k) win.push_back(row[static_cast<size_t>(k < 0 ? -k : k >= frames ? 2 * frames - 2 - k : k)]);
        std::sort(win.begin(), win.end());
        want[static_cast<size_t>(r * frames + j)] += win[3] / heads;
      }
    }
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(WordTiming, SplitsAtSpacesAndPunctuation) {
  // Token texts: " Hello", ",", " wor", "ld", ".", then a multi-byte character split over two
  // tokens, then the end token.
  const std::vector<std::string> text = {" Hello", ",", " wor", "ld", ".", " \xC3", "\xA9", "<|endoftext|>"};
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < static_cast<int32_t>(text.size()); ++i) tokens.push_back(i);
  std::vector<std::string> words;
  std::vector<std::vector<int32_t>> word_tokens;
  split_to_word_tokens(tokens, 7, true, [&](int32_t id) { return text[static_cast<size_t>(id)]; }, words, word_tokens);
  const std::vector<std::string> want = {" Hello", ",", " world", ".", " \xC3\xA9", "<|endoftext|>"};
  EXPECT_EQ(words, want);
  ASSERT_EQ(word_tokens.size(), 6u);
  EXPECT_EQ(word_tokens[2], (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(word_tokens[4], (std::vector<int32_t>{5, 6}));
}

TEST(WordTiming, MergesPunctuationLikeTimingPy) {
  auto w = [](const char* s, int32_t t) { return WordTiming{s, {t}, 0, 0, 1}; };
  std::vector<WordTiming> a = {w(" \"", 0), w(" Hi", 1), w(",", 2), w(" there", 3), w(".", 4), w("\"", 5)};
  merge_punctuations(a, "\"'\u201c\u00bf([{-", "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001");
  std::vector<std::string> words;
  for (const auto& x : a) words.push_back(x.word);
  EXPECT_EQ(words, (std::vector<std::string>{"", " \" Hi,", "", " there.\"", "", ""}));
  EXPECT_EQ(a[1].tokens, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a[3].tokens, (std::vector<int32_t>{3, 4, 5}));
}

TEST(WordTiming, WordTimesFromJumps) {
  // Path rows 0..2 (two words of one token + the end row), entering rows at columns 0, 4, 9.
  const std::vector<std::pair<int64_t, int64_t>> path = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 4}, {1, 5},
                                                         {1, 6}, {1, 7}, {1, 8}, {2, 9}, {2, 10}};
  const auto words = words_from_alignment({" a", " b", "<|endoftext|>"}, {{10}, {11}, {99}}, path, {0.5, 0.25});
  ASSERT_EQ(words.size(), 2u);
  EXPECT_DOUBLE_EQ(words[0].start, 0.0);
  EXPECT_DOUBLE_EQ(words[0].end, 0.08);
  EXPECT_DOUBLE_EQ(words[1].start, 0.08);
  EXPECT_DOUBLE_EQ(words[1].end, 0.18);
  EXPECT_DOUBLE_EQ(words[1].probability, 0.25);
}

}  // namespace
}  // namespace vrun::whisper
