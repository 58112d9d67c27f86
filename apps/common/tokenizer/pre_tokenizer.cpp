#include "apps/common/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace vrun::tok {

class CompiledRegex {
 public:
  CompiledRegex(pcre2_code* code) : code_(code) {}
  ~CompiledRegex() { pcre2_code_free(code_); }
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;

  // Calls on_piece(start, end, is_match) over text: matches and the gaps between them.
  template <typename F>
  void scan(std::string_view text, F&& on_piece) const {
    // Match data is per thread so one tokenizer can be shared by several threads.
    thread_local MatchData data;
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0, gap_start = 0;
    while (pos < text.size()) {
      // Subjects are already valid UTF-8 (the tokenizer repairs input first), so skip the check.
      const int rc = pcre2_jit_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
      const size_t s = ov[0], e = ov[1];
      if (e == s) {  // an empty match cannot split anything: step one character on
        ++pos;
        while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      if (s > gap_start) on_piece(gap_start, s, false);
      on_piece(s, e, true);
      pos = gap_start = e;
    }
    if (gap_start < text.size()) on_piece(gap_start, text.size(), false);
  }

 private:
  struct MatchData {
    pcre2_match_data* md = pcre2_match_data_create(4, nullptr);
    ~MatchData() { pcre2_match_data_free(md); }
    pcre2_match_data* get() { return md; }
  };
  pcre2_code* code_;
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Result<PreTokenizer> PreTokenizer::create(const std::vector<SplitStep>& steps, const std::string& source) {
  PreTokenizer pre;
  for (const SplitStep& step : steps) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(step.pattern.data()), step.pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return err(ErrorCode::kInvalidArgument, source, ": pre-tokenizer regex '", step.pattern, "' does not compile at offset ",
                 offset, ": ", reinterpret_cast<const char*>(message));
    }
    if (pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) != 0) {
      pcre2_code_free(code);
      return err(ErrorCode::kUnsupported, source, ": PCRE2 JIT is unavailable for regex '", step.pattern, "'");
    }
    pre.steps_.push_back(Step{std::make_unique<CompiledRegex>(code), step.remove_matches});
  }
  return pre;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  if (steps_.empty()) {
    if (!text.empty()) words.push_back(text);
    return;
  }
  // Each step refines the previous step's words; the common case of one step writes straight out.
  thread_local std::vector<std::string_view> current, next;
  current.clear();
  current.push_back(text);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const bool last = i + 1 == steps_.size();
    auto& out = last ? words : next;
    if (!last) next.clear();
    const Step& step = steps_[i];
    for (std::string_view piece : current) {
      step.regex->scan(piece, [&](size_t s, size_t e, bool is_match) {
        if (!(is_match && step.remove_matches)) out.push_back(piece.substr(s, e - s));
      });
    }
    if (!last) std::swap(current, next);
  }
}

}  // namespace vrun::tok
