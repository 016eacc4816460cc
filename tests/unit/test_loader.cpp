// Loader: packing layout, masking statistics (15%, 80/10/10), specials never chosen, whole-word
// masking, determinism from (seed, epoch, index), O(1) resume, worker-count invariance, eval set
// independent of batch size, document packing with padding, bad options.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/error.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "data/sentencepiece_tokenizer.h"
#include "data_test_text.h"
#include "test_util.h"

using namespace roformer::data;
using roformer::Error;
namespace rt = roformer::test;

using roformer::test::error_of;

namespace {

// The corpora here are prepared with roformer's SentencePiece tokenizers: special ids 0-4.
const SpecialTokens kSpecial = SpecialTokens::sentencepiece();
constexpr int64_t kFirstOrdinary = 5;

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const auto c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// The unmasked tokens: labels where something is predicted, inputs elsewhere.  (B, T)
torch::Tensor originals(const Batch& b) { return torch::where(b.labels.ne(-100), b.labels, b.input_ids); }

void expect_same(const Batch& a, const Batch& b, const std::string& what) {
  EXPECT_TRUE(torch::equal(a.input_ids, b.input_ids)) << what;
  EXPECT_TRUE(torch::equal(a.labels, b.labels)) << what;
  EXPECT_TRUE(torch::equal(a.pred_positions, b.pred_positions)) << what;
  EXPECT_TRUE(torch::equal(a.pred_labels, b.pred_labels)) << what;
  EXPECT_EQ(a.attention_mask.defined(), b.attention_mask.defined()) << what;
  if (a.attention_mask.defined() && b.attention_mask.defined()) {
    EXPECT_TRUE(torch::equal(a.attention_mask, b.attention_mask)) << what;
  }
  EXPECT_EQ(a.num_tokens, b.num_tokens) << what;
}

// Checks the invariants every batch must satisfy.
void check_batch(const Batch& b, int64_t vocab) {
  const int64_t B = b.input_ids.size(0), T = b.input_ids.size(1);
  ASSERT_EQ(b.input_ids.scalar_type(), torch::kInt64);
  ASSERT_EQ(b.labels.sizes(), b.input_ids.sizes());
  const auto ids = to_vector(b.input_ids), labels = to_vector(b.labels);
  const auto pos = to_vector(b.pred_positions), plabels = to_vector(b.pred_labels);
  ASSERT_EQ(pos.size(), plabels.size());
  std::set<int64_t> predicted(pos.begin(), pos.end());
  for (size_t k = 0; k < pos.size(); ++k) {
    if (k) {
      EXPECT_LT(pos[k - 1], pos[k]) << "pred_positions must ascend";
    }
    EXPECT_EQ(labels[pos[k]], plabels[k]);
    EXPECT_GE(plabels[k], kFirstOrdinary) << "a special token was chosen";
    EXPECT_LT(plabels[k], vocab);
  }
  for (int64_t k = 0; k < B * T; ++k) {
    if (!predicted.count(k)) {
      EXPECT_EQ(labels[k], -100);
    } else {
      // Replacements are [MASK] or ordinary tokens: a special id in the input is never a random pick.
      EXPECT_TRUE(ids[k] == kSpecial.mask || ids[k] >= kFirstOrdinary) << ids[k];
    }
  }
  for (int64_t r = 0; r < B; ++r) EXPECT_EQ(ids[r * T], kSpecial.cls);
}

class LoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new rt::TempDir();
    rt::write_file(dir_->str("a.txt"), rt::synthetic_text(30, 4, 1));
    TokenizerTrainOptions t;
    t.inputs = {dir_->str("a.txt")};
    t.out_dir = dir_->str("tok");
    t.vocab_size = 300;
    PrepareOptions p;
    p.tokenizer_model = train_tokenizer(t);
    p.inputs = {dir_->str("a.txt")};
    p.out_dir = dir_->str("prep");
    p.progress = false;
    prepare_corpus(p);
    corpus_ = new std::shared_ptr<const PreparedCorpus>(PreparedCorpus::open(p.out_dir));
  }
  static void TearDownTestSuite() {
    delete corpus_;
    delete dir_;
  }
  static LoaderOptions options(int64_t B = 4, int64_t T = 64) {
    LoaderOptions o;
    o.batch_size = B;
    o.max_seq_len = T;
    o.seed = 17;
    o.num_workers = 2;
    o.prefetch = 3;
    return o;
  }
  static const std::shared_ptr<const PreparedCorpus>& corpus() { return *corpus_; }
  static rt::TempDir* dir_;
  static std::shared_ptr<const PreparedCorpus>* corpus_;
};
rt::TempDir* LoaderTest::dir_ = nullptr;
std::shared_ptr<const PreparedCorpus>* LoaderTest::corpus_ = nullptr;

}  // namespace

TEST_F(LoaderTest, FullPackingLayout) {
  // The eval set is unshuffled, so row i is sequence i: [CLS] stream[i*(T-2), (i+1)*(T-2)) [SEP],
  // the stream being every document followed by [SEP].
  const int64_t T = 32;
  std::vector<int64_t> stream;
  for (int64_t d = 0; d < corpus()->num_documents(); ++d) {
    for (const int32_t id : corpus()->document(d)) stream.push_back(id);
    stream.push_back(kSpecial.sep);
  }
  const auto batches = make_eval_batches(corpus(), options(4, T), 10, 4, 5);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].input_ids.size(0), 2);
  int64_t row = 0;
  for (const auto& b : batches) {
    check_batch(b, corpus()->vocab_size());
    EXPECT_FALSE(b.attention_mask.defined()) << "full packing has no padding";
    EXPECT_EQ(b.num_tokens, b.input_ids.numel());
    const auto orig = to_vector(originals(b));
    for (int64_t r = 0; r < b.input_ids.size(0); ++r, ++row) {
      std::vector<int64_t> expected = {kSpecial.cls};
      expected.insert(expected.end(), stream.begin() + row * (T - 2), stream.begin() + (row + 1) * (T - 2));
      expected.push_back(kSpecial.sep);
      EXPECT_EQ(std::vector<int64_t>(orig.begin() + r * T, orig.begin() + (r + 1) * T), expected) << "sequence " << row;
    }
  }
  MlmLoader loader(corpus(), options(4, T));
  EXPECT_EQ(loader.sequences_per_epoch(), static_cast<int64_t>(stream.size()) / (T - 2));
}

TEST_F(LoaderTest, MaskingStatistics) {
  MlmLoader loader(corpus(), options(8, 64));
  int64_t maskable = 0, predicted = 0, as_mask = 0, random = 0, kept = 0;
  for (int i = 0; i < 150; ++i) {
    const Batch b = loader.next();
    check_batch(b, corpus()->vocab_size());
    const auto ids = to_vector(b.input_ids), orig = to_vector(originals(b)), labels = to_vector(b.labels);
    const int64_t T = b.input_ids.size(1);
    for (int64_t r = 0; r < b.input_ids.size(0); ++r) {
      int64_t row_maskable = 0, row_predicted = 0;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t k = r * T + t;
        row_maskable += orig[k] >= kFirstOrdinary;
        if (labels[k] == -100) continue;
        ++row_predicted;
        if (ids[k] == kSpecial.mask) {
          ++as_mask;
        } else if (ids[k] == orig[k]) {
          ++kept;
        } else {
          ++random;
        }
      }
      // exact_count: round(0.15 * maskable) in every row.
      EXPECT_EQ(row_predicted, std::llround(0.15 * row_maskable));
      maskable += row_maskable;
      predicted += row_predicted;
    }
  }
  const double n = static_cast<double>(predicted);
  EXPECT_NEAR(predicted / static_cast<double>(maskable), 0.15, 0.005);
  EXPECT_NEAR(as_mask / n, 0.8, 0.02);
  EXPECT_NEAR(random / n, 0.1, 0.015);  // a random pick equal to the original counts as kept (~0.3%)
  EXPECT_NEAR(kept / n, 0.1, 0.015);
}

TEST_F(LoaderTest, BernoulliAndCustomRates) {
  LoaderOptions o = options(8, 64);
  o.masking.exact_count = false;
  o.masking.mask_prob = 0.3;
  o.masking.mask_token_rate = 0.5;
  o.masking.random_token_rate = 0.5;
  MlmLoader loader(corpus(), o);
  int64_t maskable = 0, predicted = 0, as_mask = 0, kept = 0;
  std::set<int64_t> row_counts;
  for (int i = 0; i < 100; ++i) {
    const Batch b = loader.next();
    check_batch(b, corpus()->vocab_size());
    const auto ids = to_vector(b.input_ids), orig = to_vector(originals(b)), labels = to_vector(b.labels);
    for (int64_t r = 0; r < 8; ++r) {
      int64_t rp = 0;
      for (int64_t t = 0; t < 64; ++t) {
        const int64_t k = r * 64 + t;
        maskable += orig[k] >= kFirstOrdinary;
        if (labels[k] == -100) continue;
        ++rp;
        as_mask += ids[k] == kSpecial.mask;
        kept += ids[k] == orig[k];
      }
      predicted += rp;
      row_counts.insert(rp);
    }
  }
  EXPECT_NEAR(predicted / static_cast<double>(maskable), 0.3, 0.01);
  EXPECT_GT(row_counts.size(), 5u) << "Bernoulli masking varies the count per row";
  EXPECT_NEAR(as_mask / static_cast<double>(predicted), 0.5, 0.02);
  EXPECT_LT(kept / static_cast<double>(predicted), 0.01);  // no "unchanged" share configured
}

TEST_F(LoaderTest, WholeWordMaskingCoversWholeWords) {
  LoaderOptions o = options(8, 64);
  o.masking.whole_word = true;
  MlmLoader loader(corpus(), o);
  int64_t continuations_predicted = 0, predicted = 0, maskable = 0;
  for (int i = 0; i < 40; ++i) {
    const Batch b = loader.next();
    check_batch(b, corpus()->vocab_size());
    const auto orig = to_vector(originals(b)), labels = to_vector(b.labels);
    for (int64_t r = 0; r < 8; ++r) {
      for (int64_t t = 1; t < 64; ++t) {
        const int64_t k = r * 64 + t;
        if (orig[k] < kFirstOrdinary) continue;
        ++maskable;
        const bool p = labels[k] != -100;
        predicted += p;
        // A continuation piece shares its word's fate; so does the piece before it.
        const bool continuation = !corpus()->is_word_start(orig[k]) && orig[k - 1] >= kFirstOrdinary;
        if (continuation) {
          EXPECT_EQ(p, labels[k - 1] != -100) << "word split at row " << r << " position " << t;
          continuations_predicted += p;
        }
      }
    }
  }
  EXPECT_GT(continuations_predicted, 50) << "the corpus must have multi-piece words for this test to mean anything";
  EXPECT_NEAR(predicted / static_cast<double>(maskable), 0.15, 0.03);
}

TEST_F(LoaderTest, SameSeedEpochIndexGivesSameBatchAnotherEpochAnotherMask) {
  MlmLoader a(corpus(), options()), b(corpus(), options());
  for (int i = 0; i < 5; ++i) expect_same(a.next(), b.next(), "batch " + std::to_string(i));
  LoaderOptions other = options();
  other.seed = 18;
  MlmLoader c(corpus(), other), d(corpus(), options());
  EXPECT_FALSE(torch::equal(c.next().input_ids, d.next().input_ids)) << "another seed, another order/mask";

  // One batch = a whole epoch, so epochs 0 and 1 hold the same sequences (in other orders): match
  // rows by their unmasked tokens and compare masks.
  const int64_t n = MlmLoader(corpus(), options(1, 64)).sequences_per_epoch();
  MlmLoader whole(corpus(), options(n, 64));
  const Batch e0 = whole.next(), e1 = whole.next();
  EXPECT_EQ(whole.state().epoch, 2);
  std::map<std::vector<int64_t>, std::vector<int64_t>> mask_of;
  const auto o0 = to_vector(originals(e0)), l0 = to_vector(e0.labels), o1 = to_vector(originals(e1)), l1 = to_vector(e1.labels);
  for (int64_t r = 0; r < n; ++r)
    mask_of[std::vector<int64_t>(o0.begin() + r * 64, o0.begin() + (r + 1) * 64)] = std::vector<int64_t>(l0.begin() + r * 64, l0.begin() + (r + 1) * 64);
  int64_t same_mask = 0, same_place = 0;
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<int64_t> row(o1.begin() + r * 64, o1.begin() + (r + 1) * 64);
    ASSERT_TRUE(mask_of.count(row)) << "epoch 1 must hold the sequences of epoch 0";
    same_mask += mask_of[row] == std::vector<int64_t>(l1.begin() + r * 64, l1.begin() + (r + 1) * 64);
    same_place += row == std::vector<int64_t>(o0.begin() + r * 64, o0.begin() + (r + 1) * 64);
  }
  EXPECT_EQ(same_mask, 0) << "a fresh mask every epoch";
  EXPECT_LT(same_place, n / 2) << "shuffled per epoch";
}

TEST_F(LoaderTest, RestoreYieldsWhatAnUninterruptedLoaderYields) {
  const LoaderOptions o = options(5, 48);
  MlmLoader straight(corpus(), o);
  const int64_t per_epoch = straight.sequences_per_epoch();
  const int64_t total = 2 * per_epoch / 5 + 3;  // crosses two epoch boundaries
  std::vector<Batch> expected;
  std::vector<LoaderState> states;
  for (int64_t i = 0; i < total; ++i) {
    expected.push_back(straight.next());
    states.push_back(straight.state());
  }
  EXPECT_EQ(states.back().epoch, 2);
  EXPECT_EQ(states[0].position, 5);
  for (const int64_t cut : {int64_t{0}, int64_t{3}, total / 2, total - 3}) {
    MlmLoader resumed(corpus(), o);
    resumed.next();  // a resumed loader may have served other batches before restore
    resumed.restore(states[cut]);
    for (int64_t i = cut + 1; i < total; ++i) expect_same(resumed.next(), expected[i], "resumed after " + std::to_string(cut));
  }
  MlmLoader bad(corpus(), o);
  const std::string msg = error_of([&] { bad.restore({0, per_epoch}); });
  EXPECT_NE(msg.find("does not fit this corpus"), std::string::npos) << msg;
}

TEST_F(LoaderTest, WorkerCountDoesNotChangeBatches) {
  LoaderOptions o = options(3, 40);
  o.num_workers = 0;
  MlmLoader sync(corpus(), o);
  o.num_workers = 1;
  MlmLoader one(corpus(), o);
  o.num_workers = 4;
  o.prefetch = 2;
  MlmLoader four(corpus(), o);
  for (int i = 0; i < 12; ++i) {
    const Batch s = sync.next();
    expect_same(one.next(), s, "1 worker, batch " + std::to_string(i));
    expect_same(four.next(), s, "4 workers, batch " + std::to_string(i));
  }
  EXPECT_EQ(sync.state().position, four.state().position);
}

// Data parallelism: W ranks with micro-batch B, concatenated in rank order, serve exactly what one
// process with batch W*B serves, across an epoch boundary, in both packings; state() is the global
// position on every rank, so a restore with another world size continues the same global stream.
TEST_F(LoaderTest, RankShardsConcatenateToTheSingleProcessBatch) {
  for (const std::string packing : {"full", "document"}) {
    for (const int64_t W : {1, 2, 3}) {
      const int64_t B = 2, T = 48;
      LoaderOptions single_o = options(W * B, T);
      single_o.packing = packing;
      MlmLoader single(corpus(), single_o);
      std::vector<std::unique_ptr<MlmLoader>> ranks;
      for (int64_t r = 0; r < W; ++r) {
        LoaderOptions o = options(B, T);
        o.packing = packing;
        o.rank = r;
        o.world_size = W;
        o.num_workers = r % 2;  // synchronous and prefetching ranks must agree
        ranks.push_back(std::make_unique<MlmLoader>(corpus(), o));
      }
      const int64_t steps = single.sequences_per_epoch() / (W * B) + 2;  // into the second epoch
      for (int64_t k = 0; k < steps; ++k) {
        const Batch whole = single.next();
        std::vector<torch::Tensor> ids, labels, masks, pred_labels;
        int64_t num_tokens = 0;
        for (auto& loader : ranks) {
          const Batch part = loader->next();
          ids.push_back(part.input_ids);
          labels.push_back(part.labels);
          pred_labels.push_back(part.pred_labels);
          if (part.attention_mask.defined()) masks.push_back(part.attention_mask);
          num_tokens += part.num_tokens;
        }
        const std::string what = packing + " W=" + std::to_string(W) + " step " + std::to_string(k);
        ASSERT_TRUE(torch::equal(torch::cat(ids), whole.input_ids)) << what;
        ASSERT_TRUE(torch::equal(torch::cat(labels), whole.labels)) << what;
        ASSERT_TRUE(torch::equal(torch::cat(pred_labels), whole.pred_labels)) << what;
        ASSERT_EQ(num_tokens, whole.num_tokens) << what;
        if (whole.attention_mask.defined() && masks.size() == ranks.size()) {
          ASSERT_TRUE(torch::equal(torch::cat(masks), whole.attention_mask)) << what;
        }
        for (auto& loader : ranks) {
          ASSERT_EQ(loader->state().epoch, single.state().epoch) << what;
          ASSERT_EQ(loader->state().position, single.state().position) << what;
        }
      }
    }
  }
  // Resume a 2-rank stream with 3 ranks: the 3 shards continue the single-process stream.
  LoaderOptions o2 = options(2, 48);
  o2.world_size = 2;
  MlmLoader two(corpus(), o2);
  for (int i = 0; i < 5; ++i) two.next();
  MlmLoader single(corpus(), options(6, 48));
  single.restore(two.state());
  const Batch whole = single.next();
  std::vector<torch::Tensor> ids;
  for (int64_t r = 0; r < 3; ++r) {
    LoaderOptions o3 = options(2, 48);
    o3.rank = r;
    o3.world_size = 3;
    MlmLoader three(corpus(), o3);
    three.restore(two.state());
    ids.push_back(three.next().input_ids);
  }
  EXPECT_TRUE(torch::equal(torch::cat(ids), whole.input_ids));
  EXPECT_EQ(shard_sequence_index(100, 3, 1, 4, 2, 3), 100 + (3 * 3 + 2) * 4 + 1);
}

TEST_F(LoaderTest, BadRankOrWorldSize) {
  LoaderOptions o = options();
  o.world_size = 2;
  o.rank = 2;
  EXPECT_NE(error_of([&] { MlmLoader l(corpus(), o); }).find("loader rank 2 is not in [0, world size 2)"),
            std::string::npos);
  o.world_size = 0;
  o.rank = 0;
  EXPECT_NE(error_of([&] { MlmLoader l(corpus(), o); }).find("world size 0"), std::string::npos);
}

TEST_F(LoaderTest, EvalBatchesIndependentOfBatchSize) {
  std::vector<torch::Tensor> ids, labels;
  for (const int64_t bs : {1, 3, 8}) {
    const auto batches = make_eval_batches(corpus(), options(), 20, bs, 99);
    ASSERT_EQ(static_cast<int64_t>(batches.size()), (20 + bs - 1) / bs);
    std::vector<torch::Tensor> i, l;
    for (const auto& b : batches) {
      i.push_back(b.input_ids);
      l.push_back(b.labels);
    }
    ids.push_back(torch::cat(i));
    labels.push_back(torch::cat(l));
  }
  EXPECT_EQ(ids[0].size(0), 20);
  for (int k = 1; k < 3; ++k) {
    EXPECT_TRUE(torch::equal(ids[0], ids[k]));
    EXPECT_TRUE(torch::equal(labels[0], labels[k]));
  }
  // Another eval seed, another mask; max_sequences beyond the corpus is clamped.
  EXPECT_FALSE(torch::equal(make_eval_batches(corpus(), options(), 20, 20, 100)[0].labels, labels[0]));
  const int64_t n = MlmLoader(corpus(), options()).sequences_per_epoch();
  int64_t rows = 0;
  for (const auto& b : make_eval_batches(corpus(), options(), 1 << 20, 64, 1)) rows += b.input_ids.size(0);
  EXPECT_EQ(rows, n);
}

TEST_F(LoaderTest, DocumentPackingPadsAndSetsAttentionMask) {
  LoaderOptions o = options(6, 128);
  o.packing = "document";
  MlmLoader loader(corpus(), o);
  int64_t expected_sequences = 0;
  for (int64_t d = 0; d < corpus()->num_documents(); ++d) expected_sequences += (corpus()->document_length(d) + 125) / 126;
  EXPECT_EQ(loader.sequences_per_epoch(), expected_sequences);
  bool saw_padding = false;
  for (int i = 0; i < 10; ++i) {
    const Batch b = loader.next();
    check_batch(b, corpus()->vocab_size());
    if (!b.attention_mask.defined()) continue;
    saw_padding = true;
    EXPECT_TRUE(torch::equal(b.attention_mask, b.input_ids.ne(kSpecial.pad).to(torch::kInt64)));
    EXPECT_EQ(b.num_tokens, b.attention_mask.sum().item<int64_t>());
    const auto ids = to_vector(b.input_ids), mask = to_vector(b.attention_mask);
    for (int64_t r = 0; r < 6; ++r) {
      // [CLS] tokens [SEP] then only [PAD].
      int64_t len = 0;
      while (len < 128 && mask[r * 128 + len]) ++len;
      EXPECT_EQ(ids[r * 128 + len - 1], kSpecial.sep);
      for (int64_t t = len; t < 128; ++t) EXPECT_EQ(mask[r * 128 + t], 0);
    }
  }
  EXPECT_TRUE(saw_padding);
  // Each document (up to T-2 tokens) is one row of the unshuffled eval set.
  const auto eval = make_eval_batches(corpus(), o, 1, 1, 0);
  const auto doc = corpus()->document(0);
  const auto orig = to_vector(originals(eval[0]));
  const int64_t n = std::min<int64_t>(126, static_cast<int64_t>(doc.size()));
  for (int64_t t = 0; t < n; ++t) EXPECT_EQ(orig[1 + t], doc[t]);
  EXPECT_EQ(orig[n + 1], kSpecial.sep);
}

TEST_F(LoaderTest, PermutationIsABijection) {
  for (const int64_t n : {1, 2, 7, 64, 1000, 4097}) {
    std::vector<int> seen(n, 0);
    for (int64_t p = 0; p < n; ++p) {
      const int64_t q = permute_index(p, n, 12345);
      ASSERT_GE(q, 0);
      ASSERT_LT(q, n);
      ++seen[q];
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), n);
  }
  int64_t fixed = 0;
  for (int64_t p = 0; p < 1000; ++p) fixed += permute_index(p, 1000, 1) == permute_index(p, 1000, 2);
  EXPECT_LT(fixed, 20) << "different keys give different orders";
}

TEST_F(LoaderTest, PinMemoryOnlyWithCuda) {
  LoaderOptions o = options();
  o.pin_memory = true;
  MlmLoader loader(corpus(), o);
  const Batch b = loader.next();
  EXPECT_EQ(b.input_ids.is_pinned(), torch::cuda::is_available());
  EXPECT_EQ(b.pred_positions.is_pinned(), torch::cuda::is_available());
  EXPECT_EQ(b.pred_labels.is_pinned(), torch::cuda::is_available());
  EXPECT_FALSE(b.labels.is_pinned()) << "labels stay on the host: pinning them wastes page-locked memory";
}

TEST_F(LoaderTest, BadOptions) {
  LoaderOptions o = options();
  o.packing = "bogus";
  EXPECT_NE(error_of([&] { MlmLoader l(corpus(), o); }).find("data.packing must be full or document"), std::string::npos);
  o = options(4, 1 << 20);
  const std::string msg = error_of([&] { MlmLoader l(corpus(), o); });
  EXPECT_NE(msg.find("fewer than one sequence of data.max_seq_len=1048576"), std::string::npos) << msg;
  o = options();
  o.masking.mask_token_rate = 0.9;
  o.masking.random_token_rate = 0.2;
  EXPECT_NE(error_of([&] { MlmLoader l(corpus(), o); }).find("mask_token_rate + masking.random_token_rate"), std::string::npos);
}

TEST(LoaderConfig, OptionsFromConfig) {
  roformer::config::Config c;
  c.data.max_seq_len = 256;
  c.data.packing = "document";
  c.data.num_workers = 3;
  c.train.seed = 7;
  c.train.device = "cuda";  // pinning is the caller's decision, made after the device is bound
  c.masking.whole_word = true;
  const LoaderOptions o = loader_options_from_config(c, 16);
  EXPECT_EQ(o.batch_size, 16);
  EXPECT_EQ(o.max_seq_len, 256);
  EXPECT_EQ(o.packing, "document");
  EXPECT_EQ(o.num_workers, 3);
  EXPECT_EQ(o.seed, 7);
  EXPECT_FALSE(o.pin_memory);
  EXPECT_TRUE(o.masking.whole_word);
}

// Evaluation masks by one protocol (eval.mask_prob, 80/10/10 by piece, exact count) whatever
// masking.* trains with, so accuracies of runs trained with other recipes compare.
TEST_F(LoaderTest, EvalOptionsIgnoreTheTrainingMasking) {
  const int64_t T = 64;
  roformer::config::Config c;
  c.data.max_seq_len = T;
  c.data.num_workers = 2;
  c.masking.mask_prob = 0.4;
  c.masking.mask_token_rate = 1.0;
  c.masking.random_token_rate = 0.0;
  c.masking.exact_count = false;
  const LoaderOptions o = eval_loader_options(c, 4);
  EXPECT_EQ(o.num_workers, 0);
  EXPECT_DOUBLE_EQ(o.masking.mask_prob, 0.15);
  EXPECT_DOUBLE_EQ(o.masking.mask_token_rate, 0.8);
  EXPECT_DOUBLE_EQ(o.masking.random_token_rate, 0.1);
  EXPECT_TRUE(o.masking.exact_count);
  EXPECT_FALSE(o.masking.whole_word);
  roformer::config::Config plain;
  plain.data.max_seq_len = T;
  const auto a = make_eval_batches(corpus(), o, 12, 4, 3);
  const auto b = make_eval_batches(corpus(), eval_loader_options(plain, 4), 12, 4, 3);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) expect_same(a[i], b[i], "eval batch " + std::to_string(i));
  c.eval.mask_prob = 0.3;  // the evaluation's own rate moves it
  EXPECT_GT(make_eval_batches(corpus(), eval_loader_options(c, 4), 12, 4, 3)[0].pred_positions.numel(),
            a[0].pred_positions.numel());
}
