// GGUF: the header, metadata and tensor table (gguf::File), every tensor's bytes through the
// converter the importer uses, the tokenizer's own GGUF metadata reader and the vocabulary built
// from it, and the Llama importer the CLI runs on a .gguf.
#include <cstdint>
#include <string_view>

#include "apps/common/tokenizer/gguf_metadata.h"
#include "apps/common/tokenizer/loaders.h"
#include "models/gguf/ggml_dequant.h"
#include "models/gguf/gguf_file.h"
#include "models/llama/gguf_llama.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  bool needs_more = false;
  auto meta = tok::parse_gguf_metadata(bytes, "fuzz.gguf", &needs_more);
  fuzz::require_message(meta);
  if (meta.is_ok()) {
    auto t = tok::load_ggml_vocabulary(*meta, "fuzz.gguf");
    fuzz::require_message(t);
    if (t.is_ok()) {
      auto ids = (*t)->encode("Hello world, <|im_start|> 123 ok");
      (void)(*t)->decode(ids);
    }
  }

  fuzz::scratch().clear();
  const std::string path = fuzz::scratch().write("model.gguf", bytes);
  auto f = gguf::File::open(path);
  fuzz::require_message(f);
  if (!f.is_ok()) return 0;
  for (const auto& t : (*f)->tensors()) {
    // Every tensor the table accepted lies inside the file: converting it reads all its bytes.
    if (t.numel() > (1 << 16) || t.ne.empty()) continue;
    const int64_t cols = t.ne[0], rows = cols ? t.numel() / cols : 0;
    if (!gguf::ggml_import_dtype(t.type)) continue;
    auto c = gguf::convert_ggml_tensor(t.type, t.data, rows, cols);
    fuzz::require_message(c);
    auto c32 = gguf::convert_ggml_tensor(t.type, t.data, rows, cols, DType::f32);
    fuzz::require_message(c32);
  }
  auto model = llama::import_gguf(path);
  fuzz::require_message(model);
  return 0;
}
