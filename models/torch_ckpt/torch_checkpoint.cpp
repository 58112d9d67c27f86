#include "models/torch_ckpt/torch_checkpoint.h"

#include <cstring>

#include "models/common/checkpoint_file.h"
#include "models/torch_ckpt/pickle.h"

namespace vrun::torch_ckpt {

int64_t CkptTensor::numel() const { return models::shape_numel(shape); }

namespace {

struct StorageType {
  const char* name;
  DType dtype;
  int elem_bytes;
};

// ShortStorage has no vrun dtype; a checkpoint that needs one is refused when it is used.
const StorageType kStorages[] = {{"FloatStorage", DType::f32, 4}, {"HalfStorage", DType::f16, 2},
                                 {"BFloat16Storage", DType::bf16, 2}, {"DoubleStorage", DType::f64, 8},
                                 {"LongStorage", DType::i64, 8},   {"IntStorage", DType::i32, 4},
                                 {"CharStorage", DType::i8, 1},    {"ByteStorage", DType::u8, 1},
                                 {"BoolStorage", DType::bool_, 1}};

struct Holder {
  std::shared_ptr<const void> archive;
  std::vector<std::shared_ptr<std::string>> inflated;
};

}  // namespace

Result<Checkpoint> read_torch_checkpoint(std::span<const uint8_t> bytes, std::shared_ptr<const void> keep,
                                         const std::string& source) {
  if (bytes.size() >= 2 && bytes[0] == 0x80)
    return err(ErrorCode::kUnsupported, source, ": a legacy (pre-1.6, non-zip) PyTorch checkpoint; re-save it with torch.save");
  auto holder = std::make_shared<Holder>();
  holder->archive = std::move(keep);
  VRUN_ASSIGN_OR_RETURN(auto entries, read_zip(bytes, source, &holder->inflated));
  std::map<std::string, std::span<const uint8_t>> by_name;
  std::string prefix;
  for (const auto& e : entries) {
    by_name[e.name] = e.data;
    const std::string tail = "data.pkl";
    if (prefix.empty() && e.name.size() >= tail.size() && e.name.compare(e.name.size() - tail.size(), tail.size(), tail) == 0 &&
        (e.name.size() == tail.size() || e.name[e.name.size() - tail.size() - 1] == '/'))
      prefix = e.name.substr(0, e.name.size() - tail.size());
  }
  if (!by_name.count(prefix + "data.pkl")) return err(ErrorCode::kInvalidArgument, source, ": no data.pkl in the zip archive (not a PyTorch checkpoint)");
  if (auto bo = by_name.find(prefix + "byteorder"); bo != by_name.end()) {
    const std::string order(reinterpret_cast<const char*>(bo->second.data()), bo->second.size());
    if (order != "little") return err(ErrorCode::kUnsupported, source, ": byte order '", order, "' (little-endian checkpoints are read)");
  }
  VRUN_ASSIGN_OR_RETURN(PyRef root, read_pickle(by_name[prefix + "data.pkl"], source + ":" + prefix + "data.pkl"));
  if (root->kind == PyObj::Kind::kDict) {
    for (const auto& [k, v] : root->dict)
      if (k->kind == PyObj::Kind::kStr && k->s == "state_dict" && v->kind == PyObj::Kind::kDict) {
        root = v;
        break;
      }
  }
  if (root->kind != PyObj::Kind::kDict)
    return err(ErrorCode::kInvalidArgument, source, ": the checkpoint holds a ", py_kind_name(root->kind), ", not a state dict");
  Checkpoint ck;
  for (const auto& [k, v] : root->dict) {
    if (k->kind != PyObj::Kind::kStr) return err(ErrorCode::kInvalidArgument, source, ": a state-dict key is a ", py_kind_name(k->kind));
    if (v->kind != PyObj::Kind::kTensor) continue;  // e.g. extra non-tensor state
    const TensorRef& t = v->tensor;
    const std::string& name = k->s;
    const StorageType* st = nullptr;
    for (const auto& s : kStorages)
      if (t.storage.type == s.name) st = &s;
    if (!st) return err(ErrorCode::kUnsupported, source, ": tensor '", name, "' has storage type ", t.storage.type);
    auto it = by_name.find(prefix + "data/" + t.storage.key);
    if (it == by_name.end()) return err(ErrorCode::kInvalidArgument, source, ": tensor '", name, "' needs storage data/", t.storage.key, ", which is missing");
    const auto data = it->second;
    const uint64_t avail = data.size() / static_cast<uint64_t>(st->elem_bytes);
    if (t.storage.numel < 0 || static_cast<uint64_t>(t.storage.numel) > avail)
      return err(ErrorCode::kInvalidArgument, source, ": tensor '", name, "': storage data/", t.storage.key, " has ", data.size(),
                 " bytes, ", t.storage.numel, " elements of ", st->elem_bytes, " bytes are declared");
    CkptTensor out;
    out.dtype = st->dtype;
    out.shape = t.size;
    int64_t numel = 1, last = t.offset;
    bool contiguous = true;
    int64_t expect = 1;
    for (size_t i = t.size.size(); i-- > 0;) {
      if (t.size[i] < 0 || t.stride[i] < 0 || t.stride[i] > (int64_t{1} << 40) || (t.size[i] > 0 && numel > (int64_t{1} << 48) / t.size[i]))
        return err(ErrorCode::kInvalidArgument, source, ": tensor '", name, "' has size/stride ", t.size[i], "/", t.stride[i]);
      numel *= t.size[i];
      if (t.size[i] > 1) {
        if (t.stride[i] != expect) contiguous = false;
        int64_t span = 0;
        if (__builtin_mul_overflow(t.size[i] - 1, t.stride[i], &span) || __builtin_add_overflow(last, span, &last))
          return err(ErrorCode::kInvalidArgument, source, ": tensor '", name, "' has sizes and strides past any storage");
      }
      expect *= t.size[i];
    }
    if (t.offset < 0 || t.offset > t.storage.numel || (numel > 0 && last >= t.storage.numel))
      return err(ErrorCode::kInvalidArgument, source, ": tensor '", name, "' reads element ", last, " of a ", t.storage.numel,
                 "-element storage");
    const uint8_t* base = data.data() + t.offset * st->elem_bytes;
    if (contiguous) {
      out.data = base;
      out.keep = holder;
    } else {  // a strided view: gather it
      auto dense = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(numel * st->elem_bytes));
      std::vector<int64_t> idx(t.size.size(), 0);
      for (int64_t n = 0; n < numel; ++n) {
        int64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride[d];
        std::memcpy(dense->data() + n * st->elem_bytes, base + off * st->elem_bytes, static_cast<size_t>(st->elem_bytes));
        for (size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < t.size[d]) break;
          idx[d] = 0;
        }
      }
      out.data = dense->data();
      out.keep = dense;
    }
    ck.order.push_back(name);
    ck.tensors[name] = std::move(out);
  }
  if (ck.tensors.empty()) return err(ErrorCode::kInvalidArgument, source, ": the checkpoint holds no tensors");
  return ck;
}

}  // namespace vrun::torch_ckpt
