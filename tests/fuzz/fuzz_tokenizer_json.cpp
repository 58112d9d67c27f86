// Hugging Face tokenizer.json: the loader, then encode and decode of text that exercises the
// pre-tokenizer, merges, byte fallback and added tokens.
#include <cstdint>
#include <string_view>

#include "apps/common/tokenizer/loaders.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  auto t = tok::load_hf_tokenizer_json(std::string_view(reinterpret_cast<const char*>(data), size), "tokenizer.json");
  fuzz::require_message(t);
  if (!t.is_ok()) return 0;
  const auto& tk = **t;
  for (std::string_view text : {std::string_view("Hello, world! It's 2024 \xe2\x80\x94 caf\xc3\xa9 \xf0\x9f\x98\x80"),
                                std::string_view("<|endoftext|><s></s>  \t\n\xff\xfe bad utf8")}) {
    tok::EncodeOptions o;
    o.allow_special = true;
    auto ids = tk.encode(text, o);
    (void)tk.decode(ids);
    (void)tk.decode(ids, true);
  }
  for (size_t i = 0; i < tk.vocab_size() && i < 64; ++i) (void)tk.id_to_piece(static_cast<tok::TokenId>(i));
  return 0;
}
