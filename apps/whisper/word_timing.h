// Word timestamps from cross-attention, as openai-whisper's timing.py defines them and
// CTranslate2's align() / faster-whisper's add_word_timestamps() compute them: the alignment
// heads' attention over the window's frames, standardised along the tokens, median-filtered in
// time, averaged over heads; dynamic time warping of the text tokens against the frames; words
// split at spaces (or at complete characters) with punctuation merged into its neighbours.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace vrun::whisper {

struct WordTiming {
  std::string word;
  std::vector<int32_t> tokens;
  double start = 0, end = 0, probability = 0;
};

// scores: [heads, seq, ctx] raw (scaled, before softmax) cross-attention scores. Softmax over the
// first `frames` columns, standardisation of every column over the seq rows, a median filter of
// `width` along time, the mean over heads; returns rows [row_begin, row_begin + rows) as a
// [rows, frames] matrix.
std::vector<float> alignment_matrix(const std::vector<float>& scores, int64_t heads, int64_t seq, int64_t ctx,
                                    int64_t frames, int64_t row_begin, int64_t rows, int width = 7);

// Minimum-cost path through -x ([n, m]) from (0, 0) to (n - 1, m - 1): (row, column) pairs.
std::vector<std::pair<int64_t, int64_t>> negative_dtw(const std::vector<float>& x, int64_t n, int64_t m);

// Splits tokens (text tokens then the end token) into words. bytes_of(id) gives a token's
// bytes (a special token's text). Languages written without spaces split at every complete
// character; the others at spaces and punctuation.
void split_to_word_tokens(const std::vector<int32_t>& tokens, int32_t eot, bool split_on_spaces,
                          const std::function<std::string(int32_t)>& bytes_of, std::vector<std::string>& words,
                          std::vector<std::vector<int32_t>>& word_tokens);

// Words of one window: text tokens, the DTW path over [text + 1, frames] and each text token's
// probability; times in seconds from the window's start (50 frames a second).
std::vector<WordTiming> words_from_alignment(const std::vector<std::string>& words,
                                             const std::vector<std::vector<int32_t>>& word_tokens,
                                             const std::vector<std::pair<int64_t, int64_t>>& path,
                                             const std::vector<double>& token_probs);

// Punctuation joins the following (prepended) or the preceding (appended) word; the merged-away
// entries keep an empty word and no tokens.
void merge_punctuations(std::vector<WordTiming>& words, const std::string& prepended, const std::string& appended);

// Words at sentence ends no longer than twice the median word duration (capped at 0.7 s), as
// faster-whisper does before merging punctuation. Returns (median, max) durations.
std::pair<double, double> clamp_sentence_end_words(std::vector<WordTiming>& words);

}  // namespace vrun::whisper
