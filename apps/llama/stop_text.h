// Generated text on its way to the caller: held back while it could still become one of the stop
// strings, never cut inside a UTF-8 character. Shared by LlamaRunner::generate and BatchSession.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace vrun::llama {

class StopText {
 public:
  StopText(const std::vector<std::string>& stop, const std::function<bool(const std::string&)>* on_text)
      : stop_(&stop), on_text_(on_text) {
    for (const auto& s : stop) max_stop_ = std::max(max_stop_, s.size());
  }
  void push(const std::string& text) { pending_ += text; }
  // Emits what can no longer become a stop string (everything when final). False when generation
  // ends here: a stop string was found (*reason "stop", the text before it emitted) or the
  // callback asked to stop (*reason "callback").
  bool flush(bool final, std::string* reason) {
    for (const auto& s : *stop_) {
      const size_t at = pending_.find(s);
      if (!s.empty() && at != std::string::npos) {
        pending_.resize(at);
        if (!pending_.empty() && !(*on_text_)(pending_)) return false;
        pending_.clear();
        *reason = "stop";
        return false;
      }
    }
    const size_t keep = final ? 0 : std::min(pending_.size(), max_stop_ ? max_stop_ - 1 : 0);
    if (pending_.size() > keep) {
      // Never cut inside a UTF-8 character.
      size_t cut = pending_.size() - keep;
      while (cut > 0 && cut < pending_.size() && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) --cut;
      const std::string out = pending_.substr(0, cut);
      pending_.erase(0, cut);
      if (!out.empty() && !(*on_text_)(out)) {
        *reason = "callback";
        return false;
      }
    }
    return true;
  }

 private:
  const std::vector<std::string>* stop_;
  const std::function<bool(const std::string&)>* on_text_;
  std::string pending_;
  size_t max_stop_ = 0;
};

}  // namespace vrun::llama
