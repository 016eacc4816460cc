// safetensors reader/writer (src/core/safetensors.h): round trip, 8-byte alignment, interchange with
// Python's `safetensors` package, and errors on corrupt files.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "test_util.h"

namespace {

using roformer::core::load_safetensors;
using roformer::core::save_safetensors;
using roformer::test::TempDir;

std::vector<std::pair<std::string, torch::Tensor>> sample_tensors() {
  torch::manual_seed(0);
  return {
      {"f32", torch::randn({3, 5})},
      {"f16", torch::randn({7}).to(torch::kFloat16)},
      {"bf16", torch::randn({2, 2, 3}).to(torch::kBFloat16)},
      {"i64", torch::arange(-4, 6, torch::kLong)},
      {"i32", torch::tensor({1, -2, 3}, torch::kInt)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(3.5f)},
      {"empty", torch::zeros({0, 4})},
      {"transposed", torch::arange(12, torch::kFloat).view({3, 4}).t()},  // non-contiguous input
  };
}

std::string expect_error(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const roformer::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no roformer::Error for " << path;
  return "";
}

TEST(Safetensors, RoundTripKeepsValuesDtypesShapesAndMetadata) {
  TempDir dir;
  const auto path = dir.str("a.safetensors");
  auto tensors = sample_tensors();
  save_safetensors(path, tensors, {{"format", "pt"}, {"note", "hello \"world\""}});
  std::map<std::string, std::string> meta;
  auto loaded = load_safetensors(path, &meta);
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(loaded.count(name));
    EXPECT_EQ(loaded[name].scalar_type(), t.scalar_type());
    EXPECT_EQ(loaded[name].sizes(), t.sizes());
    EXPECT_TRUE(torch::equal(loaded[name], t));
  }
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("note"), "hello \"world\"");
}

TEST(Safetensors, DataSectionStartsEightByteAligned) {
  TempDir dir;
  for (int n = 1; n <= 9; ++n) {  // names of varying length shift the header size
    const auto path = dir.str("b" + std::to_string(n) + ".safetensors");
    save_safetensors(path, {{std::string(n, 'x'), torch::ones({n})}});
    const auto bytes = roformer::test::read_file(path);
    uint64_t header_len = 0;
    for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    EXPECT_EQ((8 + header_len) % 8, 0u);
    EXPECT_EQ(bytes.size(), 8 + header_len + n * 4);
  }
}

TEST(Safetensors, RejectsDuplicateNames) {
  TempDir dir;
  EXPECT_THROW(save_safetensors(dir.str("d.safetensors"), {{"a", torch::ones(1)}, {"a", torch::ones(1)}}),
               roformer::Error);
}

TEST(Safetensors, PythonSafetensorsReadsOurFilesAndWeReadTheirs) {
  const auto py = roformer::test::python();
  if (py.empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON)";
  TempDir dir;
  const auto ours = dir.str("ours.safetensors"), theirs = dir.str("theirs.safetensors");
  save_safetensors(ours, sample_tensors(), {{"origin", "c++"}});
  const auto script = dir.str("check.py");
  roformer::test::write_file(script, R"(import sys, torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
with safe_open(sys.argv[1], "pt") as f:
    assert f.metadata() == {"origin": "c++"}, f.metadata()
assert t["f32"].shape == (3, 5) and t["f16"].dtype == torch.float16 and t["bf16"].dtype == torch.bfloat16
assert torch.equal(t["i64"], torch.arange(-4, 6)) and t["i32"].tolist() == [1, -2, 3]
assert t["bool"].tolist() == [True, False, True] and t["scalar"].item() == 3.5 and t["empty"].shape == (0, 4)
assert torch.equal(t["transposed"], torch.arange(12.).view(3, 4).t())
save_file({"x": torch.arange(6, dtype=torch.float32).view(2, 3), "y": torch.tensor([7], dtype=torch.int64)},
          sys.argv[2], metadata={"origin": "python"})
print("PY-OK")
)");
  auto r = roformer::test::run_command(py + " " + script + " " + ours + " " + theirs);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PY-OK"), std::string::npos) << r.output;
  std::map<std::string, std::string> meta;
  auto t = load_safetensors(theirs, &meta);
  EXPECT_TRUE(torch::equal(t.at("x"), torch::arange(6, torch::kFloat).view({2, 3})));
  EXPECT_EQ(t.at("y").item<int64_t>(), 7);
  EXPECT_EQ(meta.at("origin"), "python");
}

// Writes an 8-byte length + header text + data bytes.
void write_raw(const std::string& path, const std::string& header, const std::string& data, int64_t len_override = -1) {
  std::string bytes(8, '\0');
  const uint64_t n = len_override >= 0 ? static_cast<uint64_t>(len_override) : header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  roformer::test::write_file(path, bytes + header + data);
}

TEST(Safetensors, CorruptFilesGiveErrorsNamingFileAndProblem) {
  TempDir dir;
  const std::string data(8, '\0');
  struct Case {
    std::string name, header, data;
    int64_t len_override;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"short", "", "", -2, "shorter than the 8-byte header length"},
      {"biglen", "{}", "", 1000, "header length 1000 exceeds the file size"},
      {"badjson", "{not json", "", -1, "header is not valid JSON"},
      {"notobject", "[1,2]", "", -1, "header is not a JSON object"},
      {"dtype", R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", data, -1, "unknown dtype F99"},
      {"offsets", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data, -1, "outside the data section"},
      {"size", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data, -1, "holds 8 bytes but dtype and shape need 12"},
      {"shape", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data, -1, "negative dimension"},
      {"fields", R"({"a":{"dtype":"F32"}})", data, -1, "needs dtype, shape and data_offsets"},
      {"meta", R"({"__metadata__":{"k":1}})", "", -1, "__metadata__ value for 'k' is not a string"},
      // A shape whose element count wraps around 2^64 (to the byte count it claims) or exceeds the data.
      {"wrap", R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", data, -1,
       "holds more elements than the data section has bytes"},
      {"huge", R"({"a":{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,8]}})", data, -1,
       "holds more elements than the data section has bytes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = dir.str(c.name + ".safetensors");
    if (c.len_override == -2)
      roformer::test::write_file(path, "abc");
    else
      write_raw(path, c.header, c.data, c.len_override);
    const auto msg = expect_error(path);
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
  const auto missing = expect_error(dir.str("missing.safetensors"));
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;

  // A real file cut short: the last tensor's offsets run past the end.
  const auto path = dir.str("truncated.safetensors");
  save_safetensors(path, {{"a", torch::ones({16})}});
  auto bytes = roformer::test::read_file(path);
  roformer::test::write_file(path, bytes.substr(0, bytes.size() - 4));
  EXPECT_NE(expect_error(path).find("truncated file?"), std::string::npos);
}

}  // namespace
