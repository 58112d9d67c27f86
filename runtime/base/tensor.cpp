#include "runtime/base/tensor.h"

#include <sstream>

namespace vrun {

Shape::Shape(std::initializer_list<int64_t> d) {
  rank = static_cast<int>(d.size());
  int i = 0;
  for (int64_t v : d) dims[i++] = v;
}

Shape Shape::of(const std::vector<int64_t>& d) {
  Shape s;
  s.rank = static_cast<int>(d.size());
  for (int i = 0; i < s.rank && i < kMaxRank; ++i) s.dims[i] = d[i];
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << '[';
  for (int i = 0; i < rank; ++i) os << (i ? ", " : "") << dims[i];
  os << ']';
  return os.str();
}

Strides contiguous_strides(const Shape& shape) {
  Strides s;
  int64_t acc = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

TensorView TensorView::dense(void* data, DType dtype, const Shape& shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.shape = shape;
  v.strides = contiguous_strides(shape);
  return v;
}

bool is_contiguous(const Shape& shape, const Strides& strides) {
  int64_t acc = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != acc) return false;
    acc *= shape[i];
  }
  return true;
}

bool TensorView::is_contiguous() const { return vrun::is_contiguous(shape, strides); }

void* TensorView::at(const int64_t* index) const {
  int64_t off = 0;
  for (int i = 0; i < shape.rank; ++i) off += index[i] * strides[i];
  return static_cast<char*>(data) + off * dtype_elem_size(dtype);
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  Shape r;
  r.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int i = 0; i < r.rank; ++i) {
    const int ia = a.rank - r.rank + i, ib = b.rank - r.rank + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    r[i] = da == 1 ? db : da;
  }
  *out = r;
  return true;
}

Strides broadcast_strides(const Shape& in, const Strides& in_strides, const Shape& target) {
  Strides s;
  for (int i = 0; i < target.rank; ++i) {
    const int ii = in.rank - target.rank + i;
    s[i] = (ii < 0 || in[ii] == 1) ? 0 : in_strides[ii];
  }
  return s;
}

}  // namespace vrun
