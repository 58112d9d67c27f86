// Tensor descriptions and strided views. Strides and offsets count elements (block-quantised
// tensors are always dense, so they never need element strides).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/base/dtype.h"

namespace vrun {

constexpr int kMaxRank = 8;

struct Shape {
  int rank = 0;
  std::array<int64_t, kMaxRank> dims{};

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  static Shape of(const std::vector<int64_t>& d);

  int64_t operator[](int i) const { return dims[i]; }
  int64_t& operator[](int i) { return dims[i]; }
  int64_t numel() const;
  std::vector<int64_t> vec() const { return {dims.begin(), dims.begin() + rank}; }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[2, 3, 4]"
};

struct Strides {
  std::array<int64_t, kMaxRank> s{};
  int64_t operator[](int i) const { return s[i]; }
  int64_t& operator[](int i) { return s[i]; }
};

Strides contiguous_strides(const Shape& shape);
// Whether elements laid out with these strides are packed row-major (dimensions of 1 ignored).
bool is_contiguous(const Shape& shape, const Strides& strides);

// A description without storage: what shape inference works on.
struct TensorDesc {
  DType dtype = DType::f32;
  Shape shape;
};

// A strided view over host memory. data points at element 0 of the view (offset applied).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  Strides strides;

  static TensorView dense(void* data, DType dtype, const Shape& shape);
  bool present() const { return data != nullptr; }
  int rank() const { return shape.rank; }
  int64_t numel() const { return shape.numel(); }
  bool is_contiguous() const;
  // Bytes a dense tensor of this shape and dtype takes.
  int64_t dense_bytes() const { return dtype_bytes(dtype, numel()); }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  // Element address for plain dtypes.
  void* at(const int64_t* index) const;
};

// Broadcast shape of a and b (numpy rules); false if incompatible.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);
// Strides that read `in` as if broadcast to `target` (0 for broadcast dims).
Strides broadcast_strides(const Shape& in, const Strides& in_strides, const Shape& target);
// Normalises a possibly negative axis; -1 when out of range.
inline int normalize_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return (axis < 0 || axis >= rank) ? -1 : static_cast<int>(axis);
}

}  // namespace vrun
