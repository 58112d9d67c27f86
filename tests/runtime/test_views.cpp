// View ops against index arithmetic written here: every output element must be the input
// element the op's definition names, read through the computed strides and offset.
#include <gtest/gtest.h>

#include "kernels/ops/views.h"

namespace vrun {
namespace {

// A [2,3,4,5] dense "tensor" whose element value is its linear index.
struct Grid {
  std::vector<float> data;
  TensorView view;
  Grid(const Shape& s) : data(static_cast<size_t>(s.numel())) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
    view = TensorView::dense(data.data(), DType::f32, s);
  }
};

float at(const TensorView& v, std::vector<int64_t> idx) { return *static_cast<float*>(v.at(idx.data())); }

TEST(Views, PermuteSliceSelectSplitExpand) {
  Grid g(Shape{2, 3, 4, 5});
  std::vector<TensorView> out;
  Attrs perm(OpKind::permute);
  perm.set_ints("perm", {2, 0, 3, 1});
  ASSERT_TRUE(compute_view(OpKind::permute, g.view, perm, &out).is_ok());
  EXPECT_EQ(out[0].shape, (Shape{4, 2, 5, 3}));
  EXPECT_EQ(at(out[0], {3, 1, 4, 2}), at(g.view, {1, 2, 3, 4}));

  Attrs sl(OpKind::slice);
  sl.set_i("axis", -1).set_i("start", 1).set_i("end", 100).set_i("step", 2);
  ASSERT_TRUE(compute_view(OpKind::slice, g.view, sl, &out).is_ok());
  EXPECT_EQ(out[0].shape, (Shape{2, 3, 4, 2}));
  EXPECT_EQ(at(out[0], {1, 2, 3, 1}), at(g.view, {1, 2, 3, 3}));

  Attrs sel(OpKind::select);
  sel.set_i("axis", 1).set_i("index", -1);
  ASSERT_TRUE(compute_view(OpKind::select, g.view, sel, &out).is_ok());
  EXPECT_EQ(out[0].shape, (Shape{2, 4, 5}));
  EXPECT_EQ(at(out[0], {1, 3, 2}), at(g.view, {1, 2, 3, 2}));
  sel.set_i("index", 3);
  EXPECT_FALSE(compute_view(OpKind::select, g.view, sel, &out).is_ok());

  Attrs sp(OpKind::split);
  sp.set_i("axis", 3).set_ints("sizes", {2, 3});
  ASSERT_TRUE(compute_view(OpKind::split, g.view, sp, &out).is_ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(at(out[1], {1, 1, 1, 2}), at(g.view, {1, 1, 1, 4}));
  sp.set_ints("sizes", {2, 2});
  EXPECT_FALSE(compute_view(OpKind::split, g.view, sp, &out).is_ok());

  Grid small(Shape{3, 1});
  Attrs ex(OpKind::expand);
  ex.set_ints("shape", {2, 3, 4});
  ASSERT_TRUE(compute_view(OpKind::expand, small.view, ex, &out).is_ok());
  EXPECT_EQ(out[0].strides[0], 0);
  EXPECT_EQ(out[0].strides[2], 0);
  EXPECT_EQ(at(out[0], {1, 2, 3}), 2.f);
  ex.set_ints("shape", {3, 2});
  EXPECT_TRUE(compute_view(OpKind::expand, small.view, ex, &out).is_ok());
  ex.set_ints("shape", {2, 2});
  EXPECT_FALSE(compute_view(OpKind::expand, small.view, ex, &out).is_ok());
}

TEST(Views, ReshapeIsAViewWhenTheLayoutAllowsIt) {
  Grid g(Shape{2, 3, 4, 5});
  std::vector<TensorView> out;
  Attrs r(OpKind::reshape);
  r.set_ints("shape", {0, -1, 5});
  ASSERT_TRUE(compute_view(OpKind::reshape, g.view, r, &out).is_ok());
  EXPECT_EQ(out[0].shape, (Shape{2, 12, 5}));
  EXPECT_EQ(at(out[0], {1, 7, 3}), at(g.view, {1, 1, 3, 3}));
  // Merging dims of a permuted layout needs a copy.
  Attrs perm(OpKind::permute);
  perm.set_ints("perm", {0, 2, 1, 3});
  ASSERT_TRUE(compute_view(OpKind::permute, g.view, perm, &out).is_ok());
  const TensorView p = out[0];
  r.set_ints("shape", {2, 4, 15});
  EXPECT_EQ(compute_view(OpKind::reshape, p, r, &out).code(), ErrorCode::kUnsupported);
  // Splitting a dim of it is still a view.
  r.set_ints("shape", {2, 2, 2, 3, 5});
  ASSERT_TRUE(compute_view(OpKind::reshape, p, r, &out).is_ok());
  EXPECT_EQ(at(out[0], {1, 1, 0, 2, 4}), at(g.view, {1, 2, 2, 4}));
  r.set_ints("shape", {7, -1});
  EXPECT_EQ(compute_view(OpKind::reshape, g.view, r, &out).code(), ErrorCode::kInvalidArgument);
}

TEST(Views, RelShiftMatchesTheTransformerXlDefinition) {
  const int64_t t = 5;
  Grid g(Shape{2, t, 2 * t - 1});
  std::vector<TensorView> out;
  ASSERT_TRUE(compute_view(OpKind::rel_shift, g.view, Attrs(OpKind::rel_shift), &out).is_ok());
  EXPECT_EQ(out[0].shape, (Shape{2, t, t}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) EXPECT_EQ(at(out[0], {b, i, j}), at(g.view, {b, i, j - i + t - 1}));
  Grid bad(Shape{4, 6});
  EXPECT_FALSE(compute_view(OpKind::rel_shift, bad.view, Attrs(OpKind::rel_shift), &out).is_ok());
}

}  // namespace
}  // namespace vrun
