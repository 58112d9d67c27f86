// Text, words and segments from decoded tokens, as NeMo's decoding computes them for subword
// (SentencePiece) models: the hypothesis text is the decoded ids with the one space before a
// punctuation mark of the vocabulary removed; token offsets are [frame, frame + duration) for TDT
// (punctuation moved to the end of the previous token) and the run of frames for CTC; words are
// built by get_words_offsets' rules and segments split after words ending in . ? ! as
// get_segment_offsets does. Offsets become seconds at window_stride x subsampling per frame.
// Word and segment texts carry one leading space (the transcript types' convention), so that
// joining segments gives the text; without it they are NeMo's word and segment strings.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "apps/common/transcript/transcript.h"
#include "models/parakeet/vocabulary.h"

namespace vrun::parakeet {

struct EmittedToken {
  int32_t id = 0;
  int64_t start = 0, end = 0;  // encoder frames, [start, end)
};

class TranscriptBuilder {
 public:
  // Seconds of frame f: f * window_stride * subsampling (in that order, as NeMo multiplies).
  TranscriptBuilder(const Vocabulary& vocab, double window_stride, int64_t subsampling);

  // The punctuation marks of the vocabulary (NeMo's extract_punctuation_from_vocab).
  const std::set<std::string>& punctuation() const { return punctuation_; }
  // NeMo's hypothesis text.
  std::string text(const std::vector<EmittedToken>& tokens) const;
  // TDT token offsets: punctuation takes the previous token's end as start and end.
  void refine_tdt(std::vector<EmittedToken>& tokens) const;
  // CTC token offsets from the first frame of each token's run (tokens[i].start), as NeMo's CTC
  // decoding makes them: token i spans from token i-1's first frame (the first token: one frame
  // before its own, at least 0) to its own first frame; punctuation then ends where it starts.
  void ctc_offsets(std::vector<EmittedToken>& tokens) const;
  std::vector<transcript::Word> words(const std::vector<EmittedToken>& tokens, std::vector<std::vector<int32_t>>* word_tokens) const;
  std::vector<transcript::Segment> segments(const std::vector<EmittedToken>& tokens, bool with_words) const;

 private:
  std::string token_text(int32_t id) const;
  const Vocabulary& vocab_;
  double seconds(int64_t frame) const { return static_cast<double>(frame) * window_stride_ * static_cast<double>(subsampling_); }
  double window_stride_;
  int64_t subsampling_;
  std::set<std::string> punctuation_;
};

}  // namespace vrun::parakeet
