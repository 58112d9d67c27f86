// The protobuf wire format, as far as ModelProto needs it: varints, 32/64-bit fixed values and
// length-delimited fields (strings, bytes, sub-messages, packed repeated numbers). Unknown fields
// are skipped; groups (deprecated wire types 3 and 4) are refused. Internal to models/onnx: the
// model reader (onnx_file.cpp) and its tensor decoder (onnx_tensor.cpp).
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "models/onnx/onnx_file.h"

namespace vrun::onnx::wire {

// A window of the buffer being read; every read is bounds-checked.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, std::string what) : p_(p), end_(p + n), what_(std::move(what)) {}
  bool done() const { return p_ >= end_; }

  Status varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return fail("a varint runs past the end");
      const uint8_t b = *p_++;
      r |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return Status::ok();
      }
    }
    return fail("a varint is longer than 10 bytes");
  }
  Status tag(int* field, int* wire) {
    uint64_t t = 0;
    VRUN_RETURN_IF_ERROR(varint(&t));
    *field = static_cast<int>(t >> 3);
    *wire = static_cast<int>(t & 7);
    if (*field == 0 || t >> 3 > (1u << 29))
      return fail("field number " + std::to_string(t >> 3) + " is invalid");
    return Status::ok();
  }
  Status bytes(const uint8_t** p, size_t* n) {
    uint64_t len = 0;
    VRUN_RETURN_IF_ERROR(varint(&len));
    if (len > static_cast<uint64_t>(end_ - p_))
      return fail("a field of " + std::to_string(len) + " bytes runs past the end (" +
                  std::to_string(end_ - p_) + " left)");
    *p = p_;
    *n = static_cast<size_t>(len);
    p_ += len;
    return Status::ok();
  }
  Status str(std::string* s) {
    const uint8_t* p = nullptr;
    size_t n = 0;
    VRUN_RETURN_IF_ERROR(bytes(&p, &n));
    s->assign(reinterpret_cast<const char*>(p), n);
    return Status::ok();
  }
  // A varint stored as T (an enum or a narrower integer).
  template <typename T>
  Status varint_as(T* out) {
    uint64_t v = 0;
    VRUN_RETURN_IF_ERROR(varint(&v));
    *out = static_cast<T>(v);
    return Status::ok();
  }
  // A length-delimited field read as a message of its own.
  Status message(Reader* sub) {
    const uint8_t* p = nullptr;
    size_t n = 0;
    VRUN_RETURN_IF_ERROR(bytes(&p, &n));
    *sub = Reader(p, n, what_);
    return Status::ok();
  }
  Status fixed32(uint32_t* v) {
    if (end_ - p_ < 4) return fail("a 32-bit field runs past the end");
    std::memcpy(v, p_, 4);
    p_ += 4;
    return Status::ok();
  }
  Status fixed64(uint64_t* v) {
    if (end_ - p_ < 8) return fail("a 64-bit field runs past the end");
    std::memcpy(v, p_, 8);
    p_ += 8;
    return Status::ok();
  }
  Status skip(int wire) {
    uint64_t v = 0;
    uint32_t v32 = 0;
    const uint8_t* p = nullptr;
    size_t n = 0;
    switch (wire) {
      case 0:
        return varint(&v);
      case 1:
        return fixed64(&v);
      case 2:
        return bytes(&p, &n);
      case 5:
        return fixed32(&v32);
      default:
        return fail("wire type " + std::to_string(wire) + " is not supported");
    }
  }
  Status expect(int wire, int want, const char* field) {
    if (wire == want) return Status::ok();
    return fail(std::string("field ") + field + " has wire type " + std::to_string(wire) + ", expected " +
                std::to_string(want));
  }
  // A named field whose wire type must be varint (0) or length-delimited (2), read after that check.
  template <typename T>
  Status varint_field(int wire, const char* field, T* out) {
    VRUN_RETURN_IF_ERROR(expect(wire, 0, field));
    return varint_as(out);
  }
  Status str_field(int wire, const char* field, std::string* s) {
    VRUN_RETURN_IF_ERROR(expect(wire, 2, field));
    return str(s);
  }
  Status bytes_field(int wire, const char* field, const uint8_t** p, size_t* n) {
    VRUN_RETURN_IF_ERROR(expect(wire, 2, field));
    return bytes(p, n);
  }
  Status fail(const std::string& m) const { return err(ErrorCode::kInvalidProgram, what_, ": ", m); }
  const std::string& what() const { return what_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  std::string what_;
};

// Calls on(field, wire) for every field left in r, in order; stops at the first error.
template <typename F>
Status for_each_field(Reader& r, F on) {
  while (!r.done()) {
    int f = 0, w = 0;
    VRUN_RETURN_IF_ERROR(r.tag(&f, &w));
    VRUN_RETURN_IF_ERROR(on(f, w));
  }
  return Status::ok();
}

// A repeated int64 field, packed (wire 2) or one value per tag (wire 0).
inline Status read_ints(Reader& r, int wire, std::vector<int64_t>* out) {
  auto one = [&](Reader& rr) -> Status {
    int64_t v = 0;
    VRUN_RETURN_IF_ERROR(rr.varint_as(&v));
    out->push_back(v);
    return Status::ok();
  };
  if (wire == 0) return one(r);
  VRUN_RETURN_IF_ERROR(r.expect(wire, 2, "ints"));
  Reader sub(nullptr, 0, r.what());
  VRUN_RETURN_IF_ERROR(r.message(&sub));
  while (!sub.done()) VRUN_RETURN_IF_ERROR(one(sub));
  return Status::ok();
}

// A repeated float (fixed32) or double (fixed64) field, packed or not.
template <typename F>
Status read_reals(Reader& r, int wire, std::vector<double>* out) {
  constexpr int kWire = sizeof(F) == 4 ? 5 : 1;
  auto one = [&](Reader& rr) -> Status {
    F f;
    if constexpr (sizeof(F) == 4) {
      uint32_t u = 0;
      VRUN_RETURN_IF_ERROR(rr.fixed32(&u));
      std::memcpy(&f, &u, 4);
    } else {
      uint64_t u = 0;
      VRUN_RETURN_IF_ERROR(rr.fixed64(&u));
      std::memcpy(&f, &u, 8);
    }
    out->push_back(static_cast<double>(f));
    return Status::ok();
  };
  if (wire == kWire) return one(r);
  VRUN_RETURN_IF_ERROR(r.expect(wire, 2, "floats"));
  const uint8_t* p = nullptr;
  size_t n = 0;
  VRUN_RETURN_IF_ERROR(r.bytes(&p, &n));
  if (n % sizeof(F)) return r.fail("a packed float field's size is not a multiple of its element");
  Reader sub(p, n, r.what());
  while (!sub.done()) VRUN_RETURN_IF_ERROR(one(sub));
  return Status::ok();
}

// A TensorProto: its values decoded to doubles, checked against dtype x dims.
Status parse_tensor(const uint8_t* d, size_t n, const std::string& what, Tensor* t);

}  // namespace vrun::onnx::wire
