// TensorProto: the fields that hold a tensor's dims, type and values (raw bytes or typed repeated
// fields), decoded to doubles and checked against dtype x dims.
#include <cmath>
#include <cstring>

#include "models/onnx/onnx_wire.h"

namespace vrun::onnx::wire {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 31;

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? std::nan("") : INFINITY;
  else
    v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}

// Bytes per element of raw_data; 0 for a type vrun does not read.
size_t element_size(ElemType et) {
  switch (et) {
    case ElemType::kFloat:
    case ElemType::kInt32:
      return 4;
    case ElemType::kInt64:
    case ElemType::kDouble:
      return 8;
    case ElemType::kUint8:
    case ElemType::kInt8:
    case ElemType::kBool:
      return 1;
    case ElemType::kFloat16:
      return 2;
    default:
      return 0;
  }
}

// A little-endian T at p, as a double.
template <typename T>
double load_as_double(const uint8_t* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return static_cast<double>(x);
}

// One element of raw_data (little-endian, as ONNX stores it).
double raw_value(ElemType et, const uint8_t* p) {
  switch (et) {
    case ElemType::kFloat:
      return load_as_double<float>(p);
    case ElemType::kDouble:
      return load_as_double<double>(p);
    case ElemType::kInt32:
      return load_as_double<int32_t>(p);
    case ElemType::kInt64:
      return load_as_double<int64_t>(p);
    case ElemType::kUint8:
    case ElemType::kBool:
      return *p;
    case ElemType::kInt8:
      return static_cast<int8_t>(*p);
    case ElemType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_double(h);
    }
    default:
      return 0;
  }
}

}  // namespace

Status parse_tensor(const uint8_t* d, size_t n, const std::string& what, Tensor* t) {
  Reader r(d, n, what);
  const uint8_t* raw = nullptr;
  size_t raw_n = 0;
  bool has_raw = false, external = false;
  std::vector<int64_t> ints;
  std::vector<double> reals;
  VRUN_RETURN_IF_ERROR(for_each_field(r, [&](int f, int w) -> Status {
    uint64_t location = 0;
    switch (f) {
      case 1:
        return read_ints(r, w, &t->dims);
      case 2:
        return r.varint_field(w, "data_type", &t->elem_type);
      case 4:
        return read_reals<float>(r, w, &reals);
      case 5:
      case 7:
        return read_ints(r, w, &ints);
      case 8:
        return r.str_field(w, "name", &t->name);
      case 9:
        has_raw = true;
        return r.bytes_field(w, "raw_data", &raw, &raw_n);
      case 10:
        return read_reals<double>(r, w, &reals);
      case 13:
        external = true;
        return r.skip(w);
      case 14:
        VRUN_RETURN_IF_ERROR(r.varint_field(w, "data_location", &location));
        if (location == 1) external = true;
        return Status::ok();
      default:
        return r.skip(w);
    }
  }));
  const std::string who = what + " tensor '" + t->name + "'";
  if (external)
    return err(ErrorCode::kUnsupported, who,
               ": its data is stored in an external file; vrun reads self-contained .onnx files only "
               "(save the model with all tensors inside it)");
  int64_t numel = 1;
  for (int64_t dim : t->dims) {
    if (dim < 0) return err(ErrorCode::kInvalidProgram, who, ": negative dim ", dim);
    if (dim > 0 && numel > kMaxElements / dim)
      return err(ErrorCode::kInvalidProgram, who, ": too many elements");
    numel *= dim;
  }
  const auto et = static_cast<ElemType>(t->elem_type);
  const size_t esize = element_size(et);
  if (esize == 0)
    return err(ErrorCode::kUnsupported, who, ": element type ", elem_type_name(t->elem_type),
               " is not supported");
  t->values.clear();
  if (has_raw) {
    if (raw_n != static_cast<size_t>(numel) * esize)
      return err(ErrorCode::kInvalidProgram, who, ": raw_data holds ", raw_n, " bytes, dims need ",
                 static_cast<size_t>(numel) * esize);
    t->values.resize(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i)
      t->values[static_cast<size_t>(i)] = raw_value(et, raw + static_cast<size_t>(i) * esize);
  } else if (!reals.empty()) {
    t->values = std::move(reals);
  } else if (et == ElemType::kFloat16) {
    for (int64_t x : ints) t->values.push_back(half_to_double(static_cast<uint16_t>(x)));
  } else {
    for (int64_t x : ints) t->values.push_back(static_cast<double>(x));
  }
  if (t->values.size() != static_cast<size_t>(numel))
    return err(ErrorCode::kInvalidProgram, who, ": holds ", t->values.size(), " values, dims ask for ",
               numel);
  return Status::ok();
}

}  // namespace vrun::onnx::wire
