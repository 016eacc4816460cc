// The run's prepared-data cache (data/prepared_cache.h) over folders, and prepared directories read
// together: a changed, added or removed file in a listed folder or a changed text field prepares
// again, an unchanged one reuses the cache; a corpus prepared in parts (as on several machines)
// reads as the same documents as one prepared whole; parts of different tokenizers and prepared
// directories mixed with text are refused.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "data/prepared_cache.h"
#include "data/sentencepiece_tokenizer.h"
#include "data_test_text.h"
#include "test_util.h"

using namespace roformer::data;
namespace rt = roformer::test;
using rt::error_of;

namespace {

class PreparedCache : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new rt::TempDir();
    rt::write_file(dir_->str("corpus/a.txt"), rt::synthetic_text(20, 3, 1));
    rt::write_file(dir_->str("corpus/b.txt"), rt::synthetic_text(10, 3, 2));
    for (const auto& [name, vocab] : {std::pair<std::string, int64_t>{"tok", 300}, {"tok-other", 280}}) {
      TokenizerTrainOptions t;
      t.inputs = {dir_->str("corpus")};
      t.out_dir = dir_->str(name);
      t.vocab_size = vocab;
      t.progress = false;
      train_tokenizer(t);
    }
  }
  static void TearDownTestSuite() { delete dir_; }
  static Tokenizer tokenizer(const std::string& name = "tok") { return Tokenizer::load(dir_->str(name + "/tokenizer.model")); }
  static PreparedDataRequest request(const std::vector<std::string>& files, const std::string& cache) {
    PreparedDataRequest r;
    r.files = files;
    r.name = "train";
    r.cache_dir = dir_->str(cache);
    r.resuming = true;
    return r;
  }
  static std::string prepare(const std::string& out, const std::vector<std::string>& inputs, const std::string& tok = "tok") {
    PrepareOptions o;
    o.tokenizer_model = dir_->str(tok + "/tokenizer.model");
    o.inputs = inputs;
    o.out_dir = dir_->str(out);
    o.progress = false;
    o.shard_tokens = 1000;
    prepare_corpus(o);
    return o.out_dir;
  }
  static rt::TempDir* dir_;
};
rt::TempDir* PreparedCache::dir_ = nullptr;

rt::fs::file_time_type meta_time(const std::string& cache) { return rt::fs::last_write_time(cache + "/train/meta.json"); }

}  // namespace

TEST_F(PreparedCache, AChangeInAListedFolderPreparesAgain) {
  const Tokenizer tok = tokenizer();
  const std::string folder = dir_->str("run_corpus");
  rt::fs::create_directories(folder);
  rt::write_file(folder + "/a.txt", rt::synthetic_text(20, 3, 1));
  rt::write_file(folder + "/b.jsonl", "{\"text\": \"the city\"}\n{\"body\": \"said the jury\"}\n");
  PreparedDataRequest r = request({folder}, "cache");
  r.text_field = "text";
  EXPECT_NE(error_of([&] { open_prepared_data(r, tok); }).find("b.jsonl:2: no string field \"text\""), std::string::npos);
  rt::write_file(folder + "/b.jsonl", "{\"text\": \"the city\", \"body\": \"the jury\"}\n");
  EXPECT_EQ(open_prepared_data(r, tok)->num_documents(), 21);
  const auto first = meta_time(r.cache_dir);
  EXPECT_EQ(open_prepared_data(r, tok)->num_documents(), 21);  // unchanged: the cache is used
  EXPECT_EQ(meta_time(r.cache_dir), first);

  rt::write_file(folder + "/a.txt", rt::synthetic_text(22, 3, 1));  // a file changed
  EXPECT_EQ(open_prepared_data(r, tok)->num_documents(), 23);
  rt::write_file(folder + "/sub/c.txt", rt::synthetic_text(5, 2, 3));  // a file added, deeper down
  EXPECT_EQ(open_prepared_data(r, tok)->num_documents(), 28);
  rt::fs::remove(folder + "/sub/c.txt");  // and removed
  EXPECT_EQ(open_prepared_data(r, tok)->num_documents(), 23);
  rt::fs::remove(folder + "/a.txt");
  EXPECT_EQ(open_prepared_data(r, tok)->document(0), tok.encode("the city"));
  r.text_field = "body";  // the same file read by another field: prepared again
  EXPECT_EQ(open_prepared_data(r, tok)->document(0), tok.encode("the jury"));
}

TEST_F(PreparedCache, ATouchedFileIsTheSameDataAndAnEditOfTheSameSizeIsNot) {
  const Tokenizer tok = tokenizer();
  const std::string file = dir_->str("touched.txt");
  rt::write_file(file, "the jury said the city\n");
  PreparedDataRequest r = request({file}, "touch_cache");
  ASSERT_EQ(open_prepared_data(r, tok)->document(0), tok.encode("the jury said the city"));
  const auto first = meta_time(r.cache_dir);
  // The same bytes with a new modification time (touch, a copy, a checkout): the prepared data is
  // used as it is, so a resume stays exact.
  rt::fs::last_write_time(file, rt::fs::last_write_time(file) + std::chrono::hours(1));
  open_prepared_data(r, tok);
  EXPECT_EQ(meta_time(r.cache_dir), first) << "a touched file must not prepare the data again";
  // Other bytes of the same size: prepared again.
  rt::write_file(file, "the city said the jury\n");
  rt::fs::last_write_time(file, rt::fs::last_write_time(file) + std::chrono::hours(2));
  EXPECT_EQ(open_prepared_data(r, tok)->document(0), tok.encode("the city said the jury"));
}

TEST_F(PreparedCache, SignatureWithoutTheTextFieldReadsAsTheDefault) {
  const Tokenizer tok = tokenizer();
  PreparedDataRequest r = request({dir_->str("corpus/a.txt")}, "old_cache");
  open_prepared_data(r, tok);
  const std::string path = r.cache_dir + "/train.sources.json";
  auto signature = nlohmann::json::parse(rt::read_file(path));
  ASSERT_EQ(signature["text_field"], "text");
  signature.erase("text_field");  // as written before the field was recorded
  rt::write_file(path, signature.dump());
  const auto before = meta_time(r.cache_dir);
  open_prepared_data(r, tok);
  EXPECT_EQ(meta_time(r.cache_dir), before) << "an old signature of the default field must not prepare again";
}

// A corpus prepared in two parts (as on two machines) and listed together reads like the whole.
TEST_F(PreparedCache, PreparedPartsReadAsOneCorpus) {
  const Tokenizer tok = tokenizer();
  const std::string whole = prepare("whole", {dir_->str("corpus")});
  const std::string part_a = prepare("part_a", {dir_->str("corpus/a.txt")});
  const std::string part_b = prepare("part_b", {dir_->str("corpus/b.txt")});
  const auto expected = PreparedCorpus::open(whole, tok.fingerprint());
  const auto parts = open_prepared_data(request({part_a, part_b}, "unused"), tok);
  EXPECT_FALSE(rt::fs::exists(dir_->str("unused"))) << "prepared directories are read in place";
  EXPECT_EQ(parts->dir(), part_a + ", " + part_b);
  ASSERT_EQ(parts->num_documents(), 30);
  ASSERT_EQ(parts->num_documents(), expected->num_documents());
  EXPECT_EQ(parts->num_tokens(), expected->num_tokens());
  for (int64_t i = 0; i < expected->num_documents(); ++i) {
    EXPECT_EQ(parts->document(i), expected->document(i)) << i;
    EXPECT_EQ(parts->document_offset(i), expected->document_offset(i)) << i;
    EXPECT_EQ(parts->document_length(i), expected->document_length(i)) << i;
    EXPECT_EQ(parts->document_at(expected->document_offset(i)), i);
  }
  // Several shards per part: tokens are copied across the parts' shard lists.
  EXPECT_TRUE(rt::fs::exists(part_a + "/shard_00001.tok"));
  std::vector<int64_t> got(5), want(5);
  const int64_t last = expected->num_documents() - 1;
  parts->copy_tokens(last, 1, 5, got.data());
  expected->copy_tokens(last, 1, 5, want.data());
  EXPECT_EQ(got, want);
}

TEST_F(PreparedCache, PartsOfOtherTokenizersOrMixedWithTextAreRefused) {
  const Tokenizer tok = tokenizer();
  const std::string part_a = prepare("mix_a", {dir_->str("corpus/a.txt")});
  const std::string other = prepare("mix_other", {dir_->str("corpus/b.txt")}, "tok-other");
  std::string msg = error_of([&] { PreparedCorpus::open(std::vector<std::string>{part_a, other}); });
  EXPECT_NE(msg.find("the prepared corpora " + part_a + " and " + other + " were encoded with different tokenizers"),
            std::string::npos) << msg;
  msg = error_of([&] { open_prepared_data(request({part_a, other}, "mix_cache"), tok); });
  EXPECT_NE(msg.find("data.train_files: the prepared corpus in " + other + " was encoded with tokenizer"),
            std::string::npos) << msg;
  msg = error_of([&] { open_prepared_data(request({part_a, dir_->str("corpus/b.txt")}, "mix_cache"), tok); });
  EXPECT_NE(msg.find("data.train_files mixes prepared directories with text files"), std::string::npos) << msg;
}
