// Status, Shape, Tensor, AttrMap and ThreadPool.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>

#include "runtime/attr.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/thread_pool.h"

namespace lockstep {
namespace {

TEST(Status, CarriesCodeAndMessage) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.ToString(), "OK");
  Status bad = InvalidArgument("x is wrong");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.ToString(), "INVALID_ARGUMENT: x is wrong");
  EXPECT_EQ(bad.WithPrefix("model.pb").message(), "model.pb: x is wrong");
  StatusOr<int> v = 3;
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(*v, 3);
  StatusOr<int> e = NotFound("gone");
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

TEST(Shape, BasicsAndChecks) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s.ToString(), "[2,3,4]");
  EXPECT_EQ(Shape{}.num_elements(), 1);
  EXPECT_EQ((Shape{-1, 3}).num_elements(), -1);
  EXPECT_TRUE((Shape{5, 3}).MatchesPattern(Shape{-1, 3}));
  EXPECT_FALSE((Shape{5, 4}).MatchesPattern(Shape{-1, 3}));
  EXPECT_FALSE((Shape{5}).MatchesPattern(Shape{-1, 3}));
  std::vector<int64_t> too_many(9, 1);
  EXPECT_FALSE(Shape::FromDims(too_many).ok());
  std::vector<int64_t> negative = {2, -5};
  EXPECT_FALSE(Shape::FromDims(negative).ok());
  // Element counts that overflow are refused, not wrapped.
  Shape huge{int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_FALSE(huge.CheckedNumElements().ok());
  // A zero does not excuse the other dimensions: their product must still be holdable.
  EXPECT_FALSE((Shape{0, int64_t{1} << 62}).CheckedNumElements().ok());
  std::vector<int64_t> hidden_overflow = {int64_t{1} << 32, int64_t{1} << 32, 0};
  EXPECT_FALSE(Shape::FromDims(hidden_overflow).ok());
  EXPECT_EQ((Shape{int64_t{1} << 32, int64_t{1} << 32, 0}).num_elements(), 0);
  EXPECT_EQ(*(Shape{0, int64_t{1} << 40}).CheckedNumElements(), 0);
}

TEST(Tensor, OwnedStorageIsAlignedAndZeroed) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t(DType::kFloat32, Shape{n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kTensorAlignment, 0u);
    for (float v : t.data<float>()) EXPECT_EQ(v, 0.0f);
  }
  Tensor empty(DType::kInt64, Shape{0, 5});
  EXPECT_EQ(empty.num_elements(), 0);
}

TEST(Tensor, CopiesShareAndCloneCopies) {
  Tensor a = Tensor::FromVector<float>(Shape{2, 2}, {1, 2, 3, 4});
  Tensor b = a;
  b.mutable_data<float>()[0] = 9;
  EXPECT_EQ(a.data<float>()[0], 9);
  Tensor c = a.Clone();
  c.mutable_data<float>()[0] = 5;
  EXPECT_EQ(a.data<float>()[0], 9);
  EXPECT_TRUE(a.Reshaped(Shape{4}).shape() == Shape{4});
  EXPECT_TRUE(a.BitwiseEqual(b));
  EXPECT_FALSE(a.BitwiseEqual(c));
}

TEST(Tensor, RowsShareTheStorage) {
  Tensor a = Tensor::FromVector<float>(Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor middle = a.Rows(1, 2);
  EXPECT_EQ(middle.shape(), (Shape{2, 2}));
  EXPECT_TRUE(middle.BitwiseEqual(Tensor::FromVector<float>(Shape{2, 2}, {3, 4, 5, 6})));
  middle.mutable_data<float>()[0] = 30;
  EXPECT_EQ(a.data<float>()[2], 30);
  EXPECT_EQ(a.Rows(3, 0).num_elements(), 0);
  {
    Tensor owner = Tensor::FromVector<int32_t>(Shape{4}, {1, 2, 3, 4});
    Tensor tail = owner.Rows(2, 2);
    owner = Tensor();
    EXPECT_EQ(tail.data<int32_t>()[1], 4) << "the rows keep the storage alive";
  }
}

TEST(Tensor, ViewsDoNotCopyAndKeepOwnerAlive) {
  auto storage = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  Tensor v = Tensor::View(DType::kFloat32, Shape{3}, storage->data(), storage);
  EXPECT_TRUE(v.read_only());
  EXPECT_EQ(v.raw_data(), storage->data());
  std::weak_ptr<std::vector<float>> weak = storage;
  storage.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(v.data<float>()[2], 3.0f);
  v = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(Tensor, Strings) {
  Tensor s = Tensor::FromVector<std::string>(Shape{2}, {"a", std::string("\0b", 2)});
  EXPECT_EQ(s.data<std::string>()[1].size(), 2u);
  Tensor c = s.Clone();
  EXPECT_TRUE(c.BitwiseEqual(s));
}

TEST(Attr, TypedAccessNamesTheAttr) {
  AttrMap attrs{{"axis", int64_t{1}}, {"padding", std::string("SAME")}};
  EXPECT_EQ(*attrs.GetInt("axis"), 1);
  EXPECT_EQ(*attrs.GetIntOr("missing", 7), 7);
  auto wrong = attrs.GetInt("padding");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("padding"), std::string::npos);
}

TEST(TensorRef, Parses) {
  auto a = ParseTensorRef("dense/out");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->node, "dense/out");
  EXPECT_EQ(a->index, 0);
  auto b = ParseTensorRef("split:2");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->index, 2);
  EXPECT_FALSE(ParseTensorRef("x:").ok());
  EXPECT_FALSE(ParseTensorRef(":1").ok());
  EXPECT_FALSE(ParseTensorRef("x:-1").ok());
  EXPECT_FALSE(ParseTensorRef("x:1a").ok());
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 5, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 7, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
  }
}

TEST(ThreadPool, ConcurrentAndNestedCallers) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) {
        pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) {
          pool.ParallelFor(e - b, 1, [&](int64_t b2, int64_t e2) { total.fetch_add(e2 - b2); });
        });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 64);
}

TEST(ThreadPool, SizeOneRunsInline) {
  ThreadPool pool(1);
  std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(1000, 1, [&](int64_t, int64_t) { EXPECT_EQ(std::this_thread::get_id(), caller); });
}

}  // namespace
}  // namespace lockstep
