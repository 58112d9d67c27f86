// Chat templates: the Jinja source a model carries (GGUF tokenizer.chat_template or the
// tokenizer_config.json beside tokenizer.json) read from tokenizer_config.json, the format detected
// from it and a conversation rendered and encoded. Parts: tokenizer_config.json, then messages as
// "role\tcontent" lines.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/common/tokenizer/chat_template.h"
#include "apps/common/tokenizer/loaders.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

const vrun::tok::Tokenizer& tokenizer() {
  static std::unique_ptr<vrun::tok::Tokenizer> t = [] {
    auto bytes = vrun::tok::read_file_bytes(VRUN_TEST_DATA "/llama/tiny_qwen2/tokenizer.json");
    if (!bytes.is_ok()) __builtin_trap();
    auto r = vrun::tok::load_hf_tokenizer_json(*bytes, "tokenizer.json");
    if (!r.is_ok()) __builtin_trap();
    return std::move(*r);
  }();
  return *t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  const auto parts = fuzz::write_parts(data, size, {"tokenizer_config.json"});
  const auto jinja = tok::read_chat_template(fuzz::scratch().dir() + "/tokenizer.json");
  std::vector<tok::ChatMessage> messages;
  if (parts.size() > 1) {
    std::string_view rest = parts[1];
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      const size_t tab = line.find('\t');
      if (tab == std::string_view::npos) messages.push_back({"user", std::string(line)});
      else messages.push_back({std::string(line.substr(0, tab)), std::string(line.substr(tab + 1))});
    }
  }
  const tok::ChatFormat format =
      tok::detect_chat_format(jinja ? std::optional<std::string_view>(*jinja) : std::nullopt, tokenizer());
  (void)tok::chat_format_name(format.kind);
  for (bool gen : {false, true}) {
    const std::string prompt = tok::render_chat(format, messages, gen);
    tok::EncodeOptions o;
    o.allow_special = true;
    auto ids = tokenizer().encode(prompt, o);
    (void)tokenizer().decode(ids);
  }
  if (parts.size() > 2) {
    auto named = tok::parse_chat_format(parts[2]);
    fuzz::require_message(named);
  }
  return 0;
}
