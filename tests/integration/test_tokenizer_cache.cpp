// The tokenizer cache (data/tokenizer_cache.h): a second run directory trained from the same files
// and tokenizer settings copies the tokenizer the first one trained, and says so; another setting or
// a changed input file trains anew; ROFORMER_TOKENIZER_CACHE=off keeps nothing. (CTest runs every
// other test with the cache off, so that tests keep nothing in the home folder.)
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/file.h"
#include "test_util.h"

using namespace roformer::test;
namespace fs = std::filesystem;

namespace {

std::string config(const TempDir& tmp) {
  return "model:\n  hidden_size: 32\n  num_layers: 1\n  num_heads: 2\n  intermediate_size: 64\n"
         "  max_position_embeddings: 32\n"
         "tokenizer:\n  vocab_size: 120\n"
         "data:\n  train_files: [" + tmp.str("train.txt") + "]\n  max_seq_len: 32\n"
         "schedule:\n  warmup_steps: 0\n  type: linear\n"
         "train:\n  steps: 1\n  batch_size: 4\n  precision: fp32\n  device: cpu\n"
         "checkpoint:\n  every: 0\nlogging:\n  every: 1\n  progress: plain\neval:\n  every: 0\n";
}

}  // namespace

TEST(TokenizerCache, ASecondRunFromTheSameFilesAndSettingsReusesTheTokenizer) {
  TempDir tmp;
  write_file(tmp.str("train.txt"), synthetic_corpus(60, 4, 11));
  write_file(tmp.str("run.yaml"), config(tmp));
  const std::string cache = "ROFORMER_TOKENIZER_CACHE=" + tmp.str("cache") + " ";
  auto train = [&](const std::string& env, const std::string& run, const std::string& extra = "") {
    return run_command(env + roformer_bin() + " train -c " + tmp.str("run.yaml") + " --run-dir " + tmp.str(run) +
                       extra + " 2>&1");
  };
  const std::string reused = "from the tokenizer cache";

  auto first = train(cache, "a");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find(reused), std::string::npos) << first.output;
  ASSERT_TRUE(fs::is_directory(tmp.str("cache")));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(tmp.str("cache"))) entries += e.path().filename().string()[0] != '.';
  EXPECT_EQ(entries, 1);

  auto second = train(cache, "b");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find(reused), std::string::npos) << second.output;
  EXPECT_NE(read_file(tmp.str("b/train.log")).find(reused), std::string::npos);
  EXPECT_EQ(read_file(tmp.str("b/tokenizer/tokenizer.model")), read_file(tmp.str("a/tokenizer/tokenizer.model")));
  EXPECT_EQ(read_file(tmp.str("b/tokenizer/training.json")), read_file(tmp.str("a/tokenizer/training.json")));

  // Another setting, or the input file changed: trained anew (and kept as another entry).
  auto other = train(cache, "c", " --set tokenizer.vocab_size=110");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_EQ(other.output.find(reused), std::string::npos) << other.output;
  write_file(tmp.str("train.txt"), synthetic_corpus(60, 4, 12));
  auto changed = train(cache, "d");
  ASSERT_EQ(changed.exit_code, 0) << changed.output;
  EXPECT_EQ(changed.output.find(reused), std::string::npos) << changed.output;

  // A damaged entry is not used: the run trains its own and says why.
  for (const auto& e : fs::directory_iterator(tmp.str("cache")))
    if (e.is_directory()) write_file((e.path() / "tokenizer.model").string(), "junk");
  auto damaged = train(cache, "e");
  ASSERT_EQ(damaged.exit_code, 0) << damaged.output;
  EXPECT_EQ(damaged.output.find(reused), std::string::npos) << damaged.output;
  EXPECT_NE(damaged.output.find("cannot be used"), std::string::npos) << damaged.output;
  auto after = train(cache, "e2");  // the damaged entry was replaced by the one just trained
  ASSERT_EQ(after.exit_code, 0) << after.output;
  EXPECT_NE(after.output.find(reused), std::string::npos) << after.output;

  // The default place is the home folder's cache; off keeps nothing there.
  const std::string home = "env -u ROFORMER_TOKENIZER_CACHE -u XDG_CACHE_HOME HOME=" + tmp.str("home") + " ";
  auto by_default = train(home, "f");
  ASSERT_EQ(by_default.exit_code, 0) << by_default.output;
  EXPECT_TRUE(fs::is_directory(tmp.str("home/.cache/roformer/tokenizers"))) << by_default.output;
  roformer::core::remove_tree(tmp.str("home"));
  auto off = train(home + "ROFORMER_TOKENIZER_CACHE=off ", "g");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_FALSE(fs::exists(tmp.str("home"))) << off.output;
}
