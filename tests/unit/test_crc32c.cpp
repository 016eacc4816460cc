// core/crc32c: the CRC-32C of TFRecord framing, against the test vectors of RFC 3720 (appendix
// B.4) and the classic check value of "123456789".
#include <gtest/gtest.h>

#include <string>

#include "core/crc32c.h"

using roformer::core::crc32c;

TEST(Crc32c, MatchesTheRfc3720Vectors) {
  std::string zeros(32, '\0'), ones(32, '\xff'), up, down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
}

TEST(Crc32c, MatchesTheCheckValueAndTheEmptyInput) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_NE(crc32c("123456789"), crc32c("123456788")) << "one bit apart";
}

TEST(Crc32c, ContinuesAnEarlierResult) {
  const std::string text = "The jury said the election was over.";
  for (size_t cut : {size_t{0}, size_t{1}, size_t{17}, text.size()})
    EXPECT_EQ(crc32c(text.substr(cut), crc32c(text.substr(0, cut))), crc32c(text)) << "cut at " << cut;
}
