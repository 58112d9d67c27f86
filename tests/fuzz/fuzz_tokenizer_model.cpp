// tokenizer.model files: SentencePiece model protos and tiktoken rank files, told apart by content
// as `vrun tokenize -m tokenizer.model` tells them; the Parakeet vocabulary is read from the same
// SentencePiece bytes.
#include <cstdint>
#include <string_view>

#include "apps/common/tokenizer/loaders.h"
#include "models/parakeet/vocabulary.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto& s = fuzz::scratch();
  s.clear();
  auto t = tok::load_tokenizer_file(s.write("tokenizer.model", bytes));
  fuzz::require_message(t);
  if (t.is_ok()) {
    tok::EncodeOptions o;
    o.allow_special = true;
    auto ids = (*t)->encode("Hello world \xe2\x96\x81 caf\xc3\xa9 <unk> 42", o);
    (void)(*t)->decode(ids);
  }
  auto v = parakeet::vocabulary_from_spm(bytes, "tokenizer.model");
  fuzz::require_message(v);
  return 0;
}
