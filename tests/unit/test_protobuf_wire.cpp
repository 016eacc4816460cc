// core/protobuf_wire: varints and field encodings against the examples of the protobuf encoding
// guide (https://protobuf.dev/programming-guides/encoding/) and the edges of 64-bit values.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "core/protobuf_wire.h"
#include "test_util.h"

using roformer::core::append_varint;
using roformer::core::ProtoWriter;
using roformer::test::to_hex;

namespace {

std::string varint(uint64_t v) {
  std::string out;
  append_varint(out, v);
  return to_hex(out);
}

}  // namespace

TEST(ProtobufWire, VarintsUseSevenBitsPerByteLowGroupFirst) {
  EXPECT_EQ(varint(0), "00");
  EXPECT_EQ(varint(1), "01");
  EXPECT_EQ(varint(127), "7f");
  EXPECT_EQ(varint(128), "8001");
  EXPECT_EQ(varint(150), "9601");  // the guide's example
  EXPECT_EQ(varint(300), "ac02");
  EXPECT_EQ(varint(16383), "ff7f");
  EXPECT_EQ(varint(16384), "808001");
  EXPECT_EQ(varint(uint64_t{1} << 32), "8080808010");
  EXPECT_EQ(varint(uint64_t{1} << 63), "80808080808080808001");
  EXPECT_EQ(varint(std::numeric_limits<uint64_t>::max()), "ffffffffffffffffff01");
}

TEST(ProtobufWire, NegativeInt64TakesTenBytes) {
  EXPECT_EQ(to_hex(ProtoWriter().add_int64(1, -1).bytes()), "08ffffffffffffffffff01");
  EXPECT_EQ(to_hex(ProtoWriter().add_int64(2, 5).bytes()), "1005");
}

TEST(ProtobufWire, FieldsMatchTheGuidesExamples) {
  // message Test1 { int32 a = 1; }  a = 150
  EXPECT_EQ(to_hex(ProtoWriter().add_varint(1, 150).bytes()), "089601");
  // message Test2 { string b = 2; }  b = "testing"
  EXPECT_EQ(to_hex(ProtoWriter().add_bytes(2, "testing").bytes()), "120774657374696e67");
  // message Test3 { Test1 c = 3; }  c.a = 150
  EXPECT_EQ(to_hex(ProtoWriter().add_message(3, ProtoWriter().add_varint(1, 150)).bytes()), "1a03089601");
}

TEST(ProtobufWire, FixedWidthValuesAreLittleEndian) {
  EXPECT_EQ(to_hex(ProtoWriter().add_double(1, 1.0).bytes()), "09000000000000f03f");
  EXPECT_EQ(to_hex(ProtoWriter().add_double(1, -2.5).bytes()), "0900000000000004c0");
  EXPECT_EQ(to_hex(ProtoWriter().add_float(2, 1.0f).bytes()), "150000803f");
  EXPECT_EQ(to_hex(ProtoWriter().add_float(2, 0.0f).bytes()), "1500000000") << "written when asked, even zero";
}

TEST(ProtobufWire, KeysOfLargeFieldNumbersAreVarints) {
  EXPECT_EQ(to_hex(ProtoWriter().add_bool(4, true).bytes()), "2001");
  EXPECT_EQ(to_hex(ProtoWriter().add_bool(15, false).bytes()), "7800");
  EXPECT_EQ(to_hex(ProtoWriter().add_varint(16, 1).bytes()), "800101");  // (16 << 3) | 0 = 128
  EXPECT_EQ(to_hex(ProtoWriter().add_bytes(1, "").bytes()), "0a00");
}

TEST(ProtobufWire, LongBytesCarryAVarintLength) {
  const std::string long_value(200, 'x');
  const std::string encoded = ProtoWriter().add_bytes(1, long_value).bytes();
  EXPECT_EQ(to_hex(encoded.substr(0, 3)), "0ac801");  // key, then 200 as two varint bytes
  EXPECT_EQ(encoded.size(), 3u + 200u);
  EXPECT_EQ(encoded.substr(3), long_value);
}
