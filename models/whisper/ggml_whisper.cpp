#include "models/whisper/ggml_whisper.h"

#include <cstring>
#include <fstream>
#include <map>

#include "models/gguf/ggml_dequant.h"
#include "models/whisper/whisper_import.h"
#include "runtime/base/mapped_file.h"

namespace vrun::whisper {

namespace {

constexpr uint32_t kMagic = 0x67676d6c;

struct GgmlType {
  int32_t id;
  const char* name;
  int64_t block_elems, block_bytes;
  std::optional<DType> kept;  // the dtype vrun runs it as; nullopt: converted to q8_0
};

const GgmlType* ggml_type(int32_t id) {
  static const GgmlType types[] = {
      {0, "f32", 1, 4, DType::f32},   {1, "f16", 1, 2, DType::f16},     {2, "q4_0", 32, 18, DType::q4_0},
      {3, "q4_1", 32, 20, DType::q4_1}, {6, "q5_0", 32, 22, std::nullopt}, {7, "q5_1", 32, 24, std::nullopt},
      {8, "q8_0", 32, 34, DType::q8_0}, {30, "bf16", 1, 2, DType::bf16},
  };
  for (const GgmlType& t : types)
    if (t.id == id) return &t;
  return nullptr;
}

class Reader {
 public:
  Reader(const uint8_t* d, size_t n, std::string path) : d_(d), n_(n), path_(std::move(path)) {}
  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ == n_; }
  Result<int32_t> i32(const char* what) {
    if (n_ - pos_ < 4) return truncated(what, 4);
    int32_t v;
    std::memcpy(&v, d_ + pos_, 4);
    pos_ += 4;
    return v;
  }
  Result<const uint8_t*> bytes(uint64_t count, const std::string& what) {
    if (count > n_ - pos_) return truncated(what, count);
    const uint8_t* p = d_ + pos_;
    pos_ += static_cast<size_t>(count);
    return p;
  }

 private:
  Status truncated(const std::string& what, uint64_t need) const {
    return err(ErrorCode::kInvalidProgram, path_, ": truncated at byte ", pos_, ": ", what, " needs ", need, " bytes, ",
               n_ - pos_, " left");
  }
  const uint8_t* d_;
  size_t n_, pos_ = 0;
  std::string path_;
};

struct GgmlTensor {
  const GgmlType* type = nullptr;
  std::vector<int64_t> shape;  // torch order (outermost first)
  const uint8_t* data = nullptr;
};

}  // namespace

bool is_ggml_whisper_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint32_t magic = 0;
  if (!in.read(reinterpret_cast<char*>(&magic), 4)) return false;
  return magic == kMagic;
}

Result<ImportedWhisper> import_ggml_whisper(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  Reader r(file->data(), file->size(), path);
  VRUN_ASSIGN_OR_RETURN(int32_t magic, r.i32("the magic"));
  if (static_cast<uint32_t>(magic) != kMagic)
    return err(ErrorCode::kInvalidProgram, path, ": magic 0x", std::hex, static_cast<uint32_t>(magic), " is not ggml's 0x", kMagic);
  ImportedWhisper m;
  WhisperConfig& c = m.config;
  int64_t* fields[] = {&c.n_vocab, &c.n_audio_ctx, &c.n_audio_state, &c.n_audio_head, &c.n_audio_layer, &c.n_text_ctx,
                       &c.n_text_state, &c.n_text_head, &c.n_text_layer, &c.n_mels};
  const char* names[] = {"n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
                         "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels"};
  for (size_t i = 0; i < 10; ++i) {
    VRUN_ASSIGN_OR_RETURN(int32_t v, r.i32(names[i]));
    if (v <= 0 || v > (1 << 20)) return err(ErrorCode::kInvalidProgram, path, ": hyper-parameter ", names[i], " is ", v);
    *fields[i] = v;
  }
  VRUN_RETURN_IF_ERROR(c.validate().with_context(path));
  VRUN_ASSIGN_OR_RETURN(int32_t ftype, r.i32("ftype"));
  if (ftype < 0) return err(ErrorCode::kInvalidProgram, path, ": ftype ", ftype, " is negative");

  VRUN_ASSIGN_OR_RETURN(int32_t n_mel, r.i32("mel filter rows"));
  VRUN_ASSIGN_OR_RETURN(int32_t n_fft, r.i32("mel filter columns"));
  if (n_mel <= 0 || n_fft <= 0 || n_mel > 1024 || n_fft > 4096)
    return err(ErrorCode::kInvalidProgram, path, ": mel filterbank of ", n_mel, " x ", n_fft, " values");
  if (n_mel != c.n_mels)
    return err(ErrorCode::kInvalidProgram, path, ": mel filterbank has ", n_mel, " rows; n_mels is ", c.n_mels);
  VRUN_RETURN_IF_ERROR(r.bytes(4ull * static_cast<uint64_t>(n_mel) * static_cast<uint64_t>(n_fft), "the mel filterbank").status());

  VRUN_ASSIGN_OR_RETURN(int32_t n_words, r.i32("the vocabulary size"));
  if (n_words < 0 || n_words > c.n_vocab)
    return err(ErrorCode::kInvalidProgram, path, ": vocabulary of ", n_words, " tokens for n_vocab ", c.n_vocab);
  std::vector<std::string> words(static_cast<size_t>(n_words));
  for (int32_t i = 0; i < n_words; ++i) {
    VRUN_ASSIGN_OR_RETURN(int32_t len, r.i32("a token length"));
    if (len < 0 || len > 4096) return err(ErrorCode::kInvalidProgram, path, ": token ", i, " has length ", len);
    VRUN_ASSIGN_OR_RETURN(const uint8_t* p, r.bytes(static_cast<uint64_t>(len), "token " + std::to_string(i)));
    words[static_cast<size_t>(i)].assign(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
  }

  auto tensors = std::make_shared<std::map<std::string, GgmlTensor>>();
  std::map<std::string, int> by_type;
  while (!r.at_end()) {
    const size_t start = r.pos();
    VRUN_ASSIGN_OR_RETURN(int32_t n_dims, r.i32("a tensor header"));
    VRUN_ASSIGN_OR_RETURN(int32_t name_len, r.i32("a tensor header"));
    VRUN_ASSIGN_OR_RETURN(int32_t type_id, r.i32("a tensor header"));
    if (n_dims < 1 || n_dims > 4 || name_len <= 0 || name_len > 512)
      return err(ErrorCode::kInvalidProgram, path, ": tensor header at byte ", start, " has ", n_dims, " dims and a ", name_len,
                 "-byte name");
    std::vector<int64_t> ne;
    int64_t numel = 1;
    for (int32_t i = 0; i < n_dims; ++i) {
      VRUN_ASSIGN_OR_RETURN(int32_t v, r.i32("a tensor size"));
      if (v <= 0 || numel > (int64_t{1} << 40) / v)
        return err(ErrorCode::kInvalidProgram, path, ": tensor at byte ", start, " has size ", v, " in dimension ", i);
      ne.push_back(v);
      numel *= v;
    }
    VRUN_ASSIGN_OR_RETURN(const uint8_t* np, r.bytes(static_cast<uint64_t>(name_len), "a tensor name"));
    const std::string name(reinterpret_cast<const char*>(np), static_cast<size_t>(name_len));
    const GgmlType* t = ggml_type(type_id);
    if (!t)
      return err(ErrorCode::kUnsupported, path, ": tensor '", name, "' has ggml type ", type_id,
                 "; f32, f16, bf16, q4_0, q4_1, q5_0, q5_1 and q8_0 are read");
    if (ne[0] % t->block_elems != 0)
      return err(ErrorCode::kInvalidProgram, path, ": tensor '", name, "' rows of ", ne[0], " values do not fill ", t->name, " blocks");
    const uint64_t nbytes = static_cast<uint64_t>(numel / t->block_elems * t->block_bytes);
    VRUN_ASSIGN_OR_RETURN(const uint8_t* data, r.bytes(nbytes, "tensor '" + name + "'"));
    if (tensors->count(name)) return err(ErrorCode::kInvalidProgram, path, ": tensor '", name, "' appears twice");
    GgmlTensor g{t, std::vector<int64_t>(ne.rbegin(), ne.rend()), data};
    // The PyTorch converter stores conv biases as [n, 1].
    if ((name == "encoder.conv1.bias" || name == "encoder.conv2.bias") && g.shape.size() == 2 && g.shape[1] == 1) g.shape.pop_back();
    (*tensors)[name] = std::move(g);
    ++by_type[t->name];
  }
  if (tensors->empty()) return err(ErrorCode::kInvalidProgram, path, ": no tensors after the vocabulary");
  for (const char* q : {"q5_0", "q5_1"})
    if (by_type.count(q))
      m.notes.push_back(path + ": " + std::to_string(by_type[q]) + " " + q + " tensors converted to q8_0 (vrun has no 5-bit kernels)");

  std::shared_ptr<const void> keep = file;
  TensorLookup lookup = [tensors, keep](const std::string& name) -> std::optional<Weight> {
    auto it = tensors->find(name);
    if (it == tensors->end()) return std::nullopt;
    const GgmlTensor& g = it->second;
    if (g.type->kept) return Weight{*g.type->kept, g.shape, g.data, keep};
    // q5_0 / q5_1: ggml's type codes are GGUF's, so the GGUF importer's conversion serves.
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < g.shape.size(); ++d) rows *= g.shape[d];
    auto conv = gguf::convert_ggml_tensor(static_cast<uint32_t>(g.type->id), g.data, rows, g.shape.back());
    if (!conv.is_ok()) return std::nullopt;
    return Weight{conv->dtype, g.shape, conv->data.get(), conv->data};
  };
  m.weights = fused_weight_source(lookup, WeightNaming::kOpenAI);

  VRUN_ASSIGN_OR_RETURN(m.extras.tokenizer_json, tokenizer_json_from_token_bytes(words, c.n_vocab, path));
  VRUN_ASSIGN_OR_RETURN(SpecialLayout s, special_layout(c.n_vocab));
  std::vector<std::string> base(words.begin(), words.begin() + s.eot);
  m.extras.suppress_tokens = non_speech_tokens(base);
  m.extras.suppress_begin = encode_bytes(base, " ");
  m.extras.suppress_begin.push_back(s.eot);
  std::string which;
  m.extras.alignment_heads = default_alignment_heads(c, &which);
  m.notes.push_back(path + ": tokenizer built from the file's vocabulary; suppressed tokens as openai-whisper derives them; " +
                    "alignment heads: " + which);
  return m;
}

}  // namespace vrun::whisper
