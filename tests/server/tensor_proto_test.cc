// The TensorProto <-> Tensor codec (server/tensor_proto.h): round trips for every dtype, the
// splat rule, tensor_content, and every way a request tensor can be wrong or hostile.
#include "runtime/saved_model/tensor_proto.h"
#include "server/model_info.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tensorflow_serving/apis/get_model_metadata.pb.h"

namespace lockstep {
namespace {

using tensorflow::TensorProto;

TensorProto MakeProto(tensorflow::DataType dtype, std::initializer_list<int64_t> dims) {
  TensorProto p;
  p.set_dtype(dtype);
  for (int64_t d : dims) p.mutable_tensor_shape()->add_dim()->set_size(d);
  return p;
}

void ExpectRoundTrip(const Tensor& t) {
  TensorProto p;
  ASSERT_TRUE(TensorToProto(t, &p).ok());
  EXPECT_TRUE(p.tensor_content().empty());
  auto back = TensorFromProto(p);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->BitwiseEqual(t)) << t.DebugString() << " vs " << back->DebugString();
  // And through the wire bytes, as a client would see them.
  TensorProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(p.SerializeAsString()));
  auto again = TensorFromProto(parsed);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->BitwiseEqual(t));
}

void ExpectInvalid(const TensorProto& p, const std::string& fragment,
                   int64_t max_bytes = kMaxRequestTensorBytes) {
  auto t = TensorFromProto(p, max_bytes);
  ASSERT_FALSE(t.ok()) << "decoded " << t->DebugString();
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().ToString();
  EXPECT_NE(t.status().message().find(fragment), std::string::npos)
      << "'" << t.status().message() << "' lacks '" << fragment << "'";
}

TEST(TensorProtoTest, RoundTripsFloat) {
  const float inf = std::numeric_limits<float>::infinity();
  ExpectRoundTrip(Tensor::FromVector<float>(
      Shape{2, 3}, {1.5f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::denorm_min()}));
  ExpectRoundTrip(Tensor::Scalar<float>(3.25f));
  ExpectRoundTrip(Tensor(DType::kFloat32, Shape{0, 4}));
}

TEST(TensorProtoTest, RoundTripsFloat64AsDtDouble) {
  const Tensor t = Tensor::FromVector<double>(Shape{3}, {0.1, -1e300, std::numeric_limits<double>::denorm_min()});
  ExpectRoundTrip(t);
  TensorProto p;
  ASSERT_TRUE(TensorToProto(t, &p).ok());
  EXPECT_EQ(p.dtype(), tensorflow::DT_DOUBLE);
  ASSERT_EQ(p.double_val_size(), 3);
  EXPECT_EQ(p.double_val(0), 0.1);
}

TEST(TensorProtoTest, RoundTripsBfloat16) {
  Tensor t = Tensor::FromVector<bfloat16>(
      Shape{4}, {bfloat16::FromBits(0x3f80), bfloat16::FromBits(0x8000), bfloat16::FromBits(0xffc1),
                 bfloat16::FromBits(0x7f80)});
  TensorProto p;
  ASSERT_TRUE(TensorToProto(t, &p).ok());
  EXPECT_EQ(p.dtype(), tensorflow::DT_BFLOAT16);
  ASSERT_EQ(p.half_val_size(), 4);
  EXPECT_EQ(p.half_val(0), 0x3f80);
  EXPECT_EQ(p.half_val(2), 0xffc1);  // the pattern, zero-extended: never negative
  ExpectRoundTrip(t);
}

TEST(TensorProtoTest, RoundTripsIntegersBoolsAndStrings) {
  ExpectRoundTrip(Tensor::FromVector<int32_t>(
      Shape{3}, {std::numeric_limits<int32_t>::min(), 0, std::numeric_limits<int32_t>::max()}));
  ExpectRoundTrip(Tensor::FromVector<int64_t>(
      Shape{1, 3}, {std::numeric_limits<int64_t>::min(), -1, std::numeric_limits<int64_t>::max()}));
  ExpectRoundTrip(Tensor::FromVector<bool>(Shape{2, 2}, {true, false, false, true}));
  ExpectRoundTrip(Tensor::FromVector<std::string>(
      Shape{3}, {"", std::string("a\0b\xff", 4), std::string(1000, 'x')}));
  ExpectRoundTrip(Tensor::Scalar<std::string>("hello"));
}

TEST(TensorProtoTest, RoundTripsHalfAndTheNarrowIntegers) {
  const Tensor half = Tensor::FromVector<float16>(
      Shape{3}, {float16::FromBits(0x3c00), float16::FromBits(0x8001), float16::FromBits(0xfc00)});
  TensorProto p;
  ASSERT_TRUE(TensorToProto(half, &p).ok());
  EXPECT_EQ(p.dtype(), tensorflow::DT_HALF);
  ASSERT_EQ(p.half_val_size(), 3);
  EXPECT_EQ(p.half_val(2), 0xfc00);
  ExpectRoundTrip(half);
  ExpectRoundTrip(Tensor::FromVector<uint8_t>(Shape{3}, {0, 128, 255}));
  ExpectRoundTrip(Tensor::FromVector<int8_t>(Shape{3}, {-128, 0, 127}));
  ExpectRoundTrip(Tensor::FromVector<uint16_t>(Shape{2}, {0, 65535}));
  ExpectRoundTrip(Tensor::FromVector<int16_t>(Shape{2}, {-32768, 32767}));
  ExpectRoundTrip(Tensor::FromVector<uint32_t>(Shape{2}, {0, 4294967295u}));
  ExpectRoundTrip(Tensor::FromVector<uint64_t>(Shape{2}, {0, std::numeric_limits<uint64_t>::max()}));
  // TensorFlow's own encoding: uint8 in int_val, uint64 in uint64_val.
  TensorProto bytes = MakeProto(tensorflow::DT_UINT8, {2});
  bytes.add_int_val(7);
  bytes.add_int_val(200);
  auto decoded = TensorFromProto(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->data<uint8_t>()[1], 200);
  TensorProto wide;
  ASSERT_TRUE(TensorToProto(Tensor::FromVector<uint64_t>(Shape{1}, {1ull << 63}), &wide).ok());
  ASSERT_EQ(wide.uint64_val_size(), 1);
  EXPECT_EQ(wide.uint64_val(0), 1ull << 63);
}

TEST(TensorProtoTest, ToProtoWritesTypedFieldsAndShape) {
  TensorProto p;
  ASSERT_TRUE(TensorToProto(Tensor::FromVector<float>(Shape{2, 1}, {1, 2}), &p).ok());
  EXPECT_EQ(p.dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(p.tensor_shape().dim_size(), 2);
  EXPECT_EQ(p.tensor_shape().dim(0).size(), 2);
  EXPECT_EQ(p.tensor_shape().dim(1).size(), 1);
  EXPECT_FALSE(p.tensor_shape().unknown_rank());
  EXPECT_EQ(p.float_val_size(), 2);

  ASSERT_TRUE(TensorToProto(Tensor::FromVector<int32_t>(Shape{2}, {7, 8}), &p).ok());  // clears what was there
  EXPECT_EQ(p.dtype(), tensorflow::DT_INT32);
  EXPECT_EQ(p.float_val_size(), 0);
  EXPECT_EQ(p.int_val_size(), 2);
  EXPECT_EQ(p.tensor_shape().dim_size(), 1);

  ASSERT_TRUE(TensorToProto(Tensor::FromVector<int64_t>(Shape{1}, {5}), &p).ok());
  EXPECT_EQ(p.int64_val_size(), 1);
  ASSERT_TRUE(TensorToProto(Tensor::FromVector<bool>(Shape{1}, {true}), &p).ok());
  EXPECT_EQ(p.bool_val_size(), 1);
  ASSERT_TRUE(TensorToProto(Tensor::Scalar<std::string>("s"), &p).ok());
  EXPECT_EQ(p.string_val_size(), 1);
  EXPECT_EQ(p.tensor_shape().dim_size(), 0);
}

TEST(TensorProtoTest, ToProtoOverwritesEveryFieldOfWhatWasThere) {
  // Encoding in place keeps the proto's allocations but none of its values: every field set
  // beforehand (descriptor-driven, so that a field added to the proto is covered) is gone.
  TensorProto filled;
  const google::protobuf::Descriptor* d = TensorProto::descriptor();
  const google::protobuf::Reflection* r = TensorProto::GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    using FD = google::protobuf::FieldDescriptor;
    if (f->is_repeated()) {
      switch (f->cpp_type()) {
        case FD::CPPTYPE_FLOAT: r->AddFloat(&filled, f, 1); break;
        case FD::CPPTYPE_DOUBLE: r->AddDouble(&filled, f, 1); break;
        case FD::CPPTYPE_INT32: r->AddInt32(&filled, f, 1); break;
        case FD::CPPTYPE_INT64: r->AddInt64(&filled, f, 1); break;
        case FD::CPPTYPE_UINT32: r->AddUInt32(&filled, f, 1); break;
        case FD::CPPTYPE_UINT64: r->AddUInt64(&filled, f, 1); break;
        case FD::CPPTYPE_BOOL: r->AddBool(&filled, f, true); break;
        case FD::CPPTYPE_STRING: r->AddString(&filled, f, "x"); break;
        case FD::CPPTYPE_MESSAGE: r->AddMessage(&filled, f); break;
        default: FAIL() << "field " << f->name() << " is not filled by this test";
      }
    } else if (f->cpp_type() == FD::CPPTYPE_MESSAGE) {
      filled.mutable_tensor_shape()->set_unknown_rank(true);
      filled.mutable_tensor_shape()->add_dim()->set_size(9);
    } else if (f->cpp_type() == FD::CPPTYPE_STRING) {
      r->SetString(&filled, f, "xyz");
    } else if (f->cpp_type() == FD::CPPTYPE_ENUM) {
      r->SetEnumValue(&filled, f, tensorflow::DT_INT8);
    } else {
      ASSERT_EQ(f->cpp_type(), FD::CPPTYPE_INT32) << f->name();
      r->SetInt32(&filled, f, 7);
    }
  }
  for (const Tensor& t : {Tensor::FromVector<float>(Shape{2, 1}, {1, 2}), Tensor::Scalar<std::string>("s"),
                          Tensor::FromVector<bool>(Shape{1}, {true})}) {
    TensorProto reused = filled;
    TensorProto fresh;
    ASSERT_TRUE(TensorToProto(t, &reused).ok());
    ASSERT_TRUE(TensorToProto(t, &fresh).ok());
    EXPECT_EQ(reused.SerializeAsString(), fresh.SerializeAsString()) << reused.DebugString();
  }
}

TEST(TensorProtoTest, DecodesIntoATensorsOwnStorageWhenTheShapeRepeats) {
  TensorProto p = MakeProto(tensorflow::DT_FLOAT, {3});
  for (float v : {1.0f, 2.0f, 3.0f}) p.add_float_val(v);
  Tensor t;
  ASSERT_TRUE(TensorFromProto(p, kMaxRequestTensorBytes, &t).ok());
  const void* storage = t.raw_data();
  p.set_float_val(1, 5.0f);
  ASSERT_TRUE(TensorFromProto(p, kMaxRequestTensorBytes, &t).ok());
  EXPECT_EQ(t.raw_data(), storage);
  EXPECT_EQ(t.data<float>()[1], 5.0f);
  // A tensor someone else shares is not written: the decode takes new storage.
  const Tensor shared = t;
  ASSERT_TRUE(TensorFromProto(p, kMaxRequestTensorBytes, &t).ok());
  EXPECT_NE(t.raw_data(), storage);
  // Another shape, another dtype: new storage with the new values.
  TensorProto ints = MakeProto(tensorflow::DT_INT32, {2});
  ints.add_int_val(4);
  ints.add_int_val(6);
  ASSERT_TRUE(TensorFromProto(ints, kMaxRequestTensorBytes, &t).ok());
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_EQ(t.data<int32_t>()[1], 6);
}

TEST(TensorProtoTest, ToProtoRefusesMoreElementsThanARepeatedFieldHolds) {
  // A view over one byte: the element count is checked before any element is read.
  static const uint8_t dummy = 0;
  Tensor huge = Tensor::View(DType::kBool, Shape{int64_t{1} << 31}, &dummy, nullptr);
  TensorProto p;
  Status s = TensorToProto(huge, &p);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(p.bool_val_size(), 0);
}

TEST(TensorProtoTest, SplatsASingleValue) {
  TensorProto p = MakeProto(tensorflow::DT_FLOAT, {2, 3});
  p.add_float_val(7.5f);
  auto t = TensorFromProto(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->BitwiseEqual(Tensor::FromVector<float>(Shape{2, 3}, std::vector<float>(6, 7.5f))));

  TensorProto h = MakeProto(tensorflow::DT_BFLOAT16, {3});
  h.add_half_val(0x4000);
  auto th = TensorFromProto(h);
  ASSERT_TRUE(th.ok());
  EXPECT_TRUE(th->BitwiseEqual(Tensor::FromVector<bfloat16>(Shape{3}, std::vector<bfloat16>(3, bfloat16::FromBits(0x4000)))));

  TensorProto i = MakeProto(tensorflow::DT_INT32, {4});
  i.add_int_val(-3);
  EXPECT_TRUE(TensorFromProto(i)->BitwiseEqual(Tensor::FromVector<int32_t>(Shape{4}, {-3, -3, -3, -3})));

  TensorProto l = MakeProto(tensorflow::DT_INT64, {2});
  l.add_int64_val(1ll << 40);
  EXPECT_TRUE(TensorFromProto(l)->BitwiseEqual(Tensor::FromVector<int64_t>(Shape{2}, {1ll << 40, 1ll << 40})));

  TensorProto b = MakeProto(tensorflow::DT_BOOL, {2, 2});
  b.add_bool_val(true);
  EXPECT_TRUE(TensorFromProto(b)->BitwiseEqual(Tensor::FromVector<bool>(Shape{2, 2}, {true, true, true, true})));

  TensorProto s = MakeProto(tensorflow::DT_STRING, {3});
  s.add_string_val("ab");
  EXPECT_TRUE(TensorFromProto(s)->BitwiseEqual(Tensor::FromVector<std::string>(Shape{3}, {"ab", "ab", "ab"})));
}

TEST(TensorProtoTest, EmptyTensorsNeedNoValues) {
  for (auto dtype : {tensorflow::DT_FLOAT, tensorflow::DT_STRING, tensorflow::DT_BOOL}) {
    auto t = TensorFromProto(MakeProto(dtype, {0, 5}));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->num_elements(), 0);
    EXPECT_EQ(t->shape(), (Shape{0, 5}));
  }
}

TEST(TensorProtoTest, DecodesTensorContent) {
  const std::vector<float> f = {1.0f, -2.5f, 3e38f, 0.0f};
  TensorProto p = MakeProto(tensorflow::DT_FLOAT, {2, 2});
  p.set_tensor_content(std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4));
  p.add_float_val(99.0f);  // ignored: tensor_content wins, as in TensorFlow
  auto t = TensorFromProto(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->BitwiseEqual(Tensor::FromVector<float>(Shape{2, 2}, f)));

  TensorProto h = MakeProto(tensorflow::DT_BFLOAT16, {2});
  h.set_tensor_content(std::string("\x80\x3f\x00\xc0", 4));  // 1.0, -2.0 little-endian
  EXPECT_TRUE(TensorFromProto(h)->BitwiseEqual(
      Tensor::FromVector<bfloat16>(Shape{2}, {bfloat16::FromBits(0x3f80), bfloat16::FromBits(0xc000)})));

  TensorProto i = MakeProto(tensorflow::DT_INT32, {2});
  i.set_tensor_content(std::string("\x01\x00\x00\x00\xff\xff\xff\xff", 8));
  EXPECT_TRUE(TensorFromProto(i)->BitwiseEqual(Tensor::FromVector<int32_t>(Shape{2}, {1, -1})));

  TensorProto l = MakeProto(tensorflow::DT_INT64, {1});
  l.set_tensor_content(std::string("\x02\x00\x00\x00\x00\x00\x00\x80", 8));
  EXPECT_TRUE(TensorFromProto(l)->BitwiseEqual(
      Tensor::FromVector<int64_t>(Shape{1}, {std::numeric_limits<int64_t>::min() + 2})));

  // Any non-zero byte is true.
  TensorProto b = MakeProto(tensorflow::DT_BOOL, {3});
  b.set_tensor_content(std::string("\x00\x01\x02", 3));
  EXPECT_TRUE(TensorFromProto(b)->BitwiseEqual(Tensor::FromVector<bool>(Shape{3}, {false, true, true})));
}

TEST(TensorProtoTest, Bfloat16HalfValKeepsLow16Bits) {
  TensorProto p = MakeProto(tensorflow::DT_BFLOAT16, {2});
  p.add_half_val(0x13f80);
  p.add_half_val(-1);  // a sign-extended 0xffff
  auto t = TensorFromProto(p);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->data<bfloat16>()[0].bits, 0x3f80);
  EXPECT_EQ(t->data<bfloat16>()[1].bits, 0xffff);
}

TEST(TensorProtoTest, RejectsValueCountMismatch) {
  TensorProto p = MakeProto(tensorflow::DT_FLOAT, {2, 2});
  for (float v : {1.0f, 2.0f, 3.0f}) p.add_float_val(v);
  ExpectInvalid(p, "DT_FLOAT tensor of shape [2,2] needs 4 values (or 1, repeated) in float_val, got 3");
  p.add_float_val(4.0f);
  p.add_float_val(5.0f);
  ExpectInvalid(p, "got 5");
  // No values at all for a non-empty shape (TensorFlow would zero-fill).
  ExpectInvalid(MakeProto(tensorflow::DT_INT32, {3}), "needs 3 values (or 1, repeated) in int_val, got 0");
  // Values in another dtype's field do not count.
  TensorProto wrong = MakeProto(tensorflow::DT_INT64, {2});
  wrong.add_int_val(1);
  wrong.add_int_val(2);
  ExpectInvalid(wrong, "in int64_val, got 0");
  TensorProto s = MakeProto(tensorflow::DT_STRING, {3});
  s.add_string_val("a");
  s.add_string_val("b");
  ExpectInvalid(s, "DT_STRING tensor of shape [3] needs 3 values (or 1, repeated) in string_val, got 2");
  TensorProto b = MakeProto(tensorflow::DT_BOOL, {});
  b.add_bool_val(true);
  b.add_bool_val(false);
  ExpectInvalid(b, "needs 1 values (or 1, repeated) in bool_val, got 2");
  // One value for zero elements is a mismatch too: it cannot be a splat.
  TensorProto z = MakeProto(tensorflow::DT_BFLOAT16, {0});
  z.add_half_val(1);
  ExpectInvalid(z, "in half_val, got 1");
}

TEST(TensorProtoTest, RejectsBadTensorContent) {
  TensorProto p = MakeProto(tensorflow::DT_FLOAT, {3});
  p.set_tensor_content(std::string(11, '\0'));
  ExpectInvalid(p, "needs 12 bytes of tensor_content (3 x 4), got 11");
  TensorProto h = MakeProto(tensorflow::DT_BFLOAT16, {2});
  h.set_tensor_content(std::string(8, '\0'));
  ExpectInvalid(h, "needs 4 bytes of tensor_content (2 x 2), got 8");
  TensorProto s = MakeProto(tensorflow::DT_STRING, {1});
  s.set_tensor_content("abc");
  ExpectInvalid(s, "tensor_content is not supported for DT_STRING");
}

TEST(TensorProtoTest, RejectsUnsupportedDtypes) {
  for (auto dtype : {tensorflow::DT_QINT8, tensorflow::DT_COMPLEX64,
                     tensorflow::DT_RESOURCE, tensorflow::DT_VARIANT, tensorflow::DT_FLOAT_REF,
                     tensorflow::DT_INVALID}) {
    TensorProto p = MakeProto(dtype, {1});
    p.add_float_val(1);
    ExpectInvalid(p, "dtype " + tensorflow::DataType_Name(dtype) + " is not supported");
  }
  // A number outside the enum (proto3 keeps it).
  TensorProto p = MakeProto(static_cast<tensorflow::DataType>(77), {1});
  ExpectInvalid(p, "dtype DataType(77) is not supported");
}

TEST(TensorProtoTest, RejectsUnknownOrBadShapes) {
  TensorProto p = MakeProto(tensorflow::DT_FLOAT, {});
  p.mutable_tensor_shape()->set_unknown_rank(true);
  p.add_float_val(1);
  ExpectInvalid(p, "unknown rank");
  TensorProto u = MakeProto(tensorflow::DT_FLOAT, {-1, 2});
  u.add_float_val(1);
  ExpectInvalid(u, "tensor_shape [-1,2] has dimension 0 of -1");
  ExpectInvalid(MakeProto(tensorflow::DT_FLOAT, {2, -7}), "dimension 1 of -7");
  ExpectInvalid(MakeProto(tensorflow::DT_FLOAT, {1, 1, 1, 1, 1, 1, 1, 1, 1}), "rank 9");
}

TEST(TensorProtoTest, RejectsHostileProtos) {
  // 2^80 elements: rejected by the shape bounds before any count is multiplied out.
  TensorProto huge = MakeProto(tensorflow::DT_FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  huge.add_float_val(1);
  ExpectInvalid(huge, "elements");
  // A zero must not hide an overflowing product.
  ExpectInvalid(MakeProto(tensorflow::DT_FLOAT, {0, int64_t{1} << 62, 4}), "elements");
  // Within the element bound (2^40) but a 4 TiB splat: stopped by the byte cap.
  TensorProto splat = MakeProto(tensorflow::DT_FLOAT, {int64_t{1} << 20, int64_t{1} << 20});
  splat.add_float_val(1);
  ExpectInvalid(splat, "limit of 1073741824 bytes");
  // A string splat is charged for every copy of its payload.
  TensorProto strings = MakeProto(tensorflow::DT_STRING, {1 << 12});
  strings.add_string_val(std::string(1 << 20, 'x'));
  ExpectInvalid(strings, "limit", int64_t{1} << 30);
  // A big shape with a few values: a count mismatch, found before allocating.
  TensorProto few = MakeProto(tensorflow::DT_INT64, {int64_t{1} << 30, 4});
  few.add_int64_val(1);
  few.add_int64_val(2);
  ExpectInvalid(few, "needs 4294967296 values");
  // A big shape with short tensor_content.
  TensorProto content = MakeProto(tensorflow::DT_INT32, {int64_t{1} << 39});
  content.set_tensor_content("abcd");
  ExpectInvalid(content, "got 4");
}

TEST(TensorProtoTest, HonoursTheByteCap) {
  TensorProto p = MakeProto(tensorflow::DT_FLOAT, {4});
  for (int i = 0; i < 4; ++i) p.add_float_val(static_cast<float>(i));
  ExpectInvalid(p, "limit of 15 bytes", 15);
  EXPECT_TRUE(TensorFromProto(p, 16).ok());
  TensorProto s = MakeProto(tensorflow::DT_STRING, {2});
  s.add_string_val(std::string(100, 'a'));
  s.add_string_val(std::string(100, 'b'));
  const int64_t need = 2 * static_cast<int64_t>(sizeof(std::string)) + 200;
  ExpectInvalid(s, "limit", need - 1);
  EXPECT_TRUE(TensorFromProto(s, need).ok());
}

TEST(TensorProtoTest, MapsDataTypes) {
  for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kInt32, DType::kInt64, DType::kBool, DType::kString,
                  DType::kFloat16, DType::kUInt8, DType::kInt8, DType::kUInt16, DType::kInt16, DType::kUInt32,
                  DType::kUInt64}) {
    auto back = DataTypeToDType(DTypeToDataType(d));
    ASSERT_TRUE(back.ok()) << DTypeName(d);
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(DTypeToDataType(DType::kFloat32), tensorflow::DT_FLOAT);
  EXPECT_EQ(DTypeToDataType(DType::kBFloat16), tensorflow::DT_BFLOAT16);
  EXPECT_EQ(DTypeToDataType(DType::kInt32), tensorflow::DT_INT32);
  EXPECT_EQ(DTypeToDataType(DType::kInt64), tensorflow::DT_INT64);
  EXPECT_EQ(DTypeToDataType(DType::kBool), tensorflow::DT_BOOL);
  EXPECT_EQ(DTypeToDataType(DType::kString), tensorflow::DT_STRING);
  EXPECT_EQ(DTypeToDataType(DType::kInvalid), tensorflow::DT_INVALID);
  EXPECT_EQ(DTypeToDataType(DType::kFloat16), tensorflow::DT_HALF);
  EXPECT_EQ(DTypeToDataType(DType::kUInt8), tensorflow::DT_UINT8);
  EXPECT_EQ(DataTypeName(tensorflow::DT_HALF), "DT_HALF");
  EXPECT_EQ(DataTypeName(-3), "DataType(-3)");
}

TEST(TensorProtoTest, BuildsSignatureDefs) {
  Graph graph;
  Signature sig;
  sig.name = "serving_default";
  sig.method_name = "tensorflow/serving/predict";
  sig.inputs.push_back({"x", "x", DType::kFloat32, Shape{-1, 3}});
  sig.inputs.push_back({"ids", "ids:0", DType::kInt64, Shape{-1}});
  sig.outputs.push_back({"y", "dense/out:0", DType::kBFloat16, Shape{-1, 1}});
  graph.signatures.push_back(sig);
  Signature other;
  other.name = "scalar";
  other.outputs.push_back({"s", "c", DType::kString, Shape{}});
  graph.signatures.push_back(other);

  tensorflow::SignatureDef def = SignatureDefFromSignature(sig);
  EXPECT_EQ(def.method_name(), "tensorflow/serving/predict");
  ASSERT_EQ(def.inputs_size(), 2);
  const tensorflow::TensorInfo& x = def.inputs().at("x");
  EXPECT_EQ(x.name(), "x");
  EXPECT_EQ(x.dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(x.tensor_shape().dim_size(), 2);
  EXPECT_EQ(x.tensor_shape().dim(0).size(), -1);
  EXPECT_EQ(x.tensor_shape().dim(1).size(), 3);
  EXPECT_FALSE(x.tensor_shape().unknown_rank());
  EXPECT_EQ(def.inputs().at("ids").name(), "ids:0");
  EXPECT_EQ(def.inputs().at("ids").dtype(), tensorflow::DT_INT64);
  const tensorflow::TensorInfo& y = def.outputs().at("y");
  EXPECT_EQ(y.name(), "dense/out:0");
  EXPECT_EQ(y.dtype(), tensorflow::DT_BFLOAT16);

  // As GetModelMetadata carries it: packed into an Any under "signature_def".
  tensorflow::serving::SignatureDefMap map = SignatureDefMapFromGraph(graph);
  ASSERT_EQ(map.signature_def_size(), 2);
  EXPECT_EQ(map.signature_def().at("scalar").outputs().at("s").tensor_shape().dim_size(), 0);
  tensorflow::serving::GetModelMetadataResponse response;
  (*response.mutable_metadata())["signature_def"].PackFrom(map);
  EXPECT_EQ(response.metadata().at("signature_def").type_url(),
            "type.googleapis.com/tensorflow.serving.SignatureDefMap");
  tensorflow::serving::SignatureDefMap unpacked;
  ASSERT_TRUE(response.metadata().at("signature_def").UnpackTo(&unpacked));
  EXPECT_EQ(unpacked.signature_def().at("serving_default").outputs().at("y").name(), "dense/out:0");
}

}  // namespace
}  // namespace lockstep
