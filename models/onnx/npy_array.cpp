#include "models/onnx/npy_array.h"

#include "models/common/files.h"
#include "runtime/base/npy_file.h"

#include <cstring>
#include <sstream>

namespace vrun::onnx {

namespace {

// The value of 'key' in the header dict, up to the next ',' (or the matching ')' for shape).
std::string field(const std::string& h, const std::string& key) {
  const size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t c = h.find(':', k);
  if (c == std::string::npos) return "";
  ++c;
  while (c < h.size() && h[c] == ' ') ++c;
  if (c < h.size() && h[c] == '(') {
    const size_t e = h.find(')', c);
    return e == std::string::npos ? "" : h.substr(c + 1, e - c - 1);
  }
  const size_t e = h.find_first_of(",}", c);
  return h.substr(c, e == std::string::npos ? std::string::npos : e - c);
}

const char* descr_of(DType d) {
  switch (d) {
    case DType::f32:
      return "<f4";
    case DType::i64:
      return "<i8";
    case DType::i32:
      return "<i4";
    case DType::bool_:
      return "|b1";
    default:
      return nullptr;
  }
}

}  // namespace

TensorView NpyTensor::view() {
  Shape s;
  s.rank = static_cast<int>(shape.size());
  for (int i = 0; i < s.rank; ++i) s[i] = shape[static_cast<size_t>(i)];
  return TensorView::dense(bytes.data(), dtype, s);
}

Result<NpyTensor> read_npy_tensor(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(const std::string b, models::read_file(path));
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    return err(ErrorCode::kInvalidArgument, path, ": not a .npy file (bad magic)");
  const int major = static_cast<uint8_t>(b[6]);
  size_t hlen = 0, at = 0;
  if (major == 1) {
    hlen = static_cast<uint8_t>(b[8]) | (static_cast<size_t>(static_cast<uint8_t>(b[9])) << 8);
    at = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return err(ErrorCode::kInvalidArgument, path, ": truncated header");
    uint32_t l = 0;
    std::memcpy(&l, b.data() + 8, 4);
    hlen = l;
    at = 12;
  } else {
    return err(ErrorCode::kUnsupported, path, ": .npy version ", major);
  }
  if (hlen > b.size() - at) return err(ErrorCode::kInvalidArgument, path, ": header runs past the end");
  const std::string h = b.substr(at, hlen);
  at += hlen;
  const std::string descr = field(h, "descr"), fortran = field(h, "fortran_order"), shape = field(h, "shape");
  if (fortran.find("False") == std::string::npos)
    return err(ErrorCode::kUnsupported, path, ": Fortran-order arrays are not supported (save with C order)");
  NpyTensor t;
  std::stringstream sh(shape);
  std::string part;
  int64_t numel = 1;
  while (std::getline(sh, part, ',')) {
    if (part.find_first_not_of(' ') == std::string::npos) continue;
    int64_t d = -1;
    try {
      d = std::stoll(part);
    } catch (const std::exception&) {
    }
    if (d < 0 || (d > 0 && numel > (int64_t{1} << 34) / d))
      return err(ErrorCode::kInvalidArgument, path, ": bad shape (", shape, ")");
    t.shape.push_back(d);
    numel *= d;
  }
  if (t.shape.size() > static_cast<size_t>(kMaxRank))
    return err(ErrorCode::kUnsupported, path, ": rank ", t.shape.size(), " (at most ", kMaxRank, ")");
  size_t esize = 0;
  bool from_f64 = false;
  if (descr.find("<f4") != std::string::npos)
    t.dtype = DType::f32, esize = 4;
  else if (descr.find("<f8") != std::string::npos)
    t.dtype = DType::f32, esize = 8, from_f64 = true;
  else if (descr.find("<i8") != std::string::npos)
    t.dtype = DType::i64, esize = 8;
  else if (descr.find("<i4") != std::string::npos)
    t.dtype = DType::i32, esize = 4;
  else if (descr.find("b1") != std::string::npos)
    t.dtype = DType::bool_, esize = 1;
  else
    return err(ErrorCode::kUnsupported, path, ": dtype ", descr, " (float32, float64, int32, int64 or bool)");
  const size_t need = static_cast<size_t>(numel) * esize;
  if (b.size() - at != need)
    return err(ErrorCode::kInvalidArgument, path, ": holds ", b.size() - at, " data bytes, shape needs ",
               need);
  if (from_f64) {
    t.bytes.resize(static_cast<size_t>(numel) * 4);
    for (int64_t i = 0; i < numel; ++i) {
      double d;
      std::memcpy(&d, b.data() + at + static_cast<size_t>(i) * 8, 8);
      const float f = static_cast<float>(d);
      std::memcpy(t.bytes.data() + static_cast<size_t>(i) * 4, &f, 4);
    }
  } else {
    t.bytes.assign(b.begin() + static_cast<std::ptrdiff_t>(at), b.end());
  }
  return t;
}

Status write_npy_tensor(const std::string& path, const TensorView& v) {
  const char* descr = descr_of(v.dtype);
  if (!descr)
    return err(ErrorCode::kUnsupported, path, ": cannot write dtype ", dtype_name(v.dtype), " as .npy");
  std::vector<uint8_t> dense(static_cast<size_t>(v.dense_bytes()));
  const size_t es = dtype_elem_size(v.dtype);
  // Gather element by element (outputs are small, and this handles any strides).
  const int r = v.rank();
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t off = 0;
    for (int d = 0; d < r; ++d) off += idx[static_cast<size_t>(d)] * v.strides[d];
    std::memcpy(dense.data() + static_cast<size_t>(i) * es,
                static_cast<const uint8_t*>(v.data) + off * static_cast<int64_t>(es), es);
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < v.shape[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  const std::vector<int64_t> shape(v.shape.dims.begin(), v.shape.dims.begin() + r);
  return write_npy_file(path, descr, shape, dense.data(), dense.size());
}

}  // namespace vrun::onnx
