// Sequence packing, dynamic masking and the prefetching loader (see loader.h).
#include "data/loader.h"

#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"

namespace roformer::data {

namespace {

constexpr int64_t kIgnore = -100;
constexpr uint64_t kEvalEpoch = 0x4556414c4556414cULL;  // "EVALEVAL": epoch key of the eval set

using core::mix64;
// Seeded per sequence (no per-token reseeding).
using Rng = core::SplitMix64;

inline uint64_t key_of(uint64_t seed, uint64_t epoch, uint64_t index) {
  return mix64(mix64(mix64(seed ^ core::kGoldenGamma) ^ epoch) ^ index);
}

}  // namespace

int64_t permute_index(int64_t p, int64_t n, uint64_t key) {
  if (n <= 1) return 0;
  // Balanced Feistel network over [0, 2^(2h)) >= n; values >= n are walked again (cycle walking),
  // which keeps it a bijection of [0, n). The domain is below 4n, so few walks are needed.
  int bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  const int half = (bits + 1) / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  uint64_t x = static_cast<uint64_t>(p);
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = mix64(key ^ (round << 56) ^ right) & mask;
      const uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half) | right;
  } while (x >= static_cast<uint64_t>(n));
  return static_cast<int64_t>(x);
}

// Builds rows: token layout from the packing, then masking. All state is const; the scratch
// buffers are per call site (one per worker).
class SequenceBuilder {
 public:
  struct Scratch {
    std::vector<int32_t> maskable;     // positions that may be predicted
    std::vector<int32_t> unit_starts;  // index into maskable where each unit (token or word) starts
    std::vector<int64_t> pred_positions, pred_labels;
  };

  SequenceBuilder(std::shared_ptr<const PreparedCorpus> corpus, const LoaderOptions& options)
      : corpus_(std::move(corpus)), options_(options) {
    const auto& m = options.masking;
    if (options.batch_size < 1) throw Error("batch_size must be at least 1");
    if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size)
      throw Error("loader rank " + std::to_string(options.rank) + " is not in [0, world size " +
                  std::to_string(options.world_size) + ")");
    if (options.max_seq_len < 3) throw Error(options.max_seq_len_key + " must be at least 3 ([CLS] token [SEP])");
    if (options.packing != "full" && options.packing != "document")
      throw Error("data.packing must be full or document, got " + options.packing);
    if (!(m.mask_prob > 0 && m.mask_prob <= 1)) throw Error("masking.mask_prob must be in (0, 1]");
    if (m.mask_token_rate < 0 || m.random_token_rate < 0 || m.mask_token_rate + m.random_token_rate > 1 + 1e-12)
      throw Error("masking.mask_token_rate + masking.random_token_rate must be within [0, 1]");
    if (corpus_->vocab_size() >= (int64_t{1} << 32)) throw Error("vocabulary too large");
    special_ = corpus_->special_tokens();
    if (const std::string missing = special_.missing_for_mlm(); !missing.empty())
      throw Error("the prepared corpus in " + corpus_->dir() + " was encoded with a tokenizer without a " + missing +
                  " token, which masked-language-model training needs; prepare it with a tokenizer that has them");
    // Random replacements are drawn from the ordinary ids (for SentencePiece's 0-4 specials: 5 + k).
    for (int64_t id = 0; id < corpus_->vocab_size(); ++id)
      if (!corpus_->is_special(id)) ordinary_.push_back(static_cast<int32_t>(id));
    if (ordinary_.empty()) throw Error("the corpus vocabulary has no ordinary tokens");
    content_ = options.max_seq_len - 2;
    full_ = options.packing == "full";
    if (full_) {
      // Stream: every document followed by [SEP].
      num_sequences_ = (corpus_->num_tokens() + corpus_->num_documents()) / content_;
      if (num_sequences_ == 0)
        throw Error("the prepared corpus in " + corpus_->dir() + " has " + std::to_string(corpus_->num_tokens()) +
                    " tokens, fewer than one sequence of " + options.max_seq_len_key + "=" +
                    std::to_string(options.max_seq_len) + "; lower " + options.max_seq_len_key + " or add text");
    } else {
      doc_seq_start_.resize(static_cast<size_t>(corpus_->num_documents()) + 1, 0);
      for (int64_t j = 0; j < corpus_->num_documents(); ++j)
        doc_seq_start_[j + 1] = doc_seq_start_[j] + (corpus_->document_length(j) + content_ - 1) / content_;
      num_sequences_ = doc_seq_start_.back();
      if (num_sequences_ == 0) throw Error("the prepared corpus in " + corpus_->dir() + " has no documents");
    }
    pin_ = options.pin_memory && torch::cuda::is_available();
  }

  int64_t num_sequences() const { return num_sequences_; }
  int64_t seq_len() const { return options_.max_seq_len; }

  // The epoch-e order: position -> sequence index.
  int64_t sequence_at(int64_t epoch, int64_t position) const {
    return permute_index(position, num_sequences_, key_of(static_cast<uint64_t>(options_.seed), static_cast<uint64_t>(epoch), ~0ULL));
  }

  // One batch from (sequence index, mask epoch key) pairs; masks keyed by (seed, epoch key, index).
  Batch build(const std::vector<std::pair<int64_t, uint64_t>>& rows, uint64_t seed, Scratch& scratch) const {
    const int64_t B = static_cast<int64_t>(rows.size()), T = options_.max_seq_len;
    // Page-locked: what the step copies to the device. labels (B, T) stay on the host (the step
    // sends only pred_positions and pred_labels), so they are never pinned.
    auto opts = torch::TensorOptions().dtype(torch::kInt64).pinned_memory(pin_);
    Batch batch;
    batch.input_ids = torch::empty({B, T}, opts);                 // (B, T)
    batch.labels = torch::empty({B, T}, opts.pinned_memory(false));  // (B, T)
    int64_t* ids = batch.input_ids.data_ptr<int64_t>();
    int64_t* labels = batch.labels.data_ptr<int64_t>();
    std::fill(labels, labels + B * T, kIgnore);
    scratch.pred_positions.clear();
    scratch.pred_labels.clear();
    int64_t tokens = 0;
    bool padded = false;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = fill_tokens(rows[b].first, ids + b * T);  // non-padding length
      tokens += len;
      padded |= len < T;
      Rng rng(key_of(seed, rows[b].second, static_cast<uint64_t>(rows[b].first)));
      mask_row(ids + b * T, labels + b * T, len, b * T, rng, scratch);
    }
    batch.num_tokens = tokens;
    if (padded) {
      batch.attention_mask = torch::empty({B, T}, opts);  // (B, T)
      int64_t* am = batch.attention_mask.data_ptr<int64_t>();
      for (int64_t k = 0; k < B * T; ++k) am[k] = ids[k] != special_.pad;
    }
    const int64_t P = static_cast<int64_t>(scratch.pred_positions.size());
    batch.pred_positions = torch::empty({P}, opts);  // (P,)
    batch.pred_labels = torch::empty({P}, opts);     // (P,)
    if (P > 0) {
      std::memcpy(batch.pred_positions.data_ptr<int64_t>(), scratch.pred_positions.data(), P * sizeof(int64_t));
      std::memcpy(batch.pred_labels.data_ptr<int64_t>(), scratch.pred_labels.data(), P * sizeof(int64_t));
    }
    return batch;
  }

 private:
  // Writes sequence s into row (T,) and returns its length before padding.
  int64_t fill_tokens(int64_t s, int64_t* row) const {
    const int64_t T = options_.max_seq_len;
    row[0] = special_.cls;
    if (full_) {
      // Stream offset of document j is offset(j) + j (one [SEP] after each earlier document).
      const int64_t start = s * content_;
      int64_t lo = 0, hi = corpus_->num_documents() - 1;  // last j with offset(j) + j <= start
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (corpus_->document_offset(mid) + mid <= start) lo = mid; else hi = mid - 1;
      }
      int64_t j = lo, within = start - (corpus_->document_offset(j) + j), filled = 0;
      while (filled < content_) {
        const int64_t len = corpus_->document_length(j);
        if (within < len) {
          const int64_t n = std::min(len - within, content_ - filled);
          corpus_->copy_tokens(j, within, n, row + 1 + filled);
          filled += n;
          within += n;
        } else {  // the [SEP] after document j
          row[1 + filled++] = special_.sep;
          ++j;
          within = 0;
        }
      }
      row[T - 1] = special_.sep;
      return T;
    }
    const int64_t j = static_cast<int64_t>(std::upper_bound(doc_seq_start_.begin(), doc_seq_start_.end(), s) - doc_seq_start_.begin()) - 1;
    const int64_t piece = s - doc_seq_start_[j];
    const int64_t offset = piece * content_;
    const int64_t n = std::min(content_, corpus_->document_length(j) - offset);
    corpus_->copy_tokens(j, offset, n, row + 1);
    row[n + 1] = special_.sep;
    std::fill(row + n + 2, row + T, static_cast<int64_t>(special_.pad));
    return n + 2;
  }

  // Chooses the predicted positions of one row and applies 80/10/10 (by default) replacement.
  void mask_row(int64_t* row, int64_t* labels, int64_t len, int64_t flat_base, Rng& rng, Scratch& scratch) const {
    const auto& m = options_.masking;
    auto& maskable = scratch.maskable;
    auto& units = scratch.unit_starts;
    maskable.clear();
    units.clear();
    bool previous_special = true;
    for (int64_t t = 0; t < len; ++t) {
      const int64_t id = row[t];
      if (corpus_->is_special(id)) {  // [CLS] [SEP] [PAD] (and anything special) are never chosen
        previous_special = true;
        continue;
      }
      // A unit is one token, or with whole-word masking a word start and its continuation pieces.
      if (!m.whole_word || previous_special || corpus_->is_word_start(id)) units.push_back(static_cast<int32_t>(maskable.size()));
      maskable.push_back(static_cast<int32_t>(t));
      previous_special = false;
    }
    const int64_t n_units = static_cast<int64_t>(units.size());
    if (n_units == 0) return;
    units.push_back(static_cast<int32_t>(maskable.size()));  // sentinel end
    const double keep_threshold = m.mask_token_rate + m.random_token_rate;
    const uint32_t n_random = static_cast<uint32_t>(ordinary_.size());
    int64_t need = m.exact_count ? std::llround(m.mask_prob * static_cast<double>(n_units)) : 0;
    for (int64_t u = 0; u < n_units; ++u) {
      bool chosen;
      if (m.exact_count) {
        // Selection sampling (Knuth's Algorithm S): exactly `need` units, uniformly, in order.
        chosen = need > 0 && rng.bounded(static_cast<uint32_t>(n_units - u)) < static_cast<uint64_t>(need);
        need -= chosen;
      } else {
        chosen = rng.uniform() < m.mask_prob;
      }
      if (!chosen) continue;
      for (int32_t k = units[u]; k < units[u + 1]; ++k) {
        const int64_t t = maskable[k];
        const int64_t original = row[t];
        labels[t] = original;
        scratch.pred_positions.push_back(flat_base + t);
        scratch.pred_labels.push_back(original);
        const double r = rng.uniform();
        if (r < m.mask_token_rate)
          row[t] = special_.mask;
        else if (r < keep_threshold)
          row[t] = ordinary_[rng.bounded(n_random)];  // ordinary tokens only
      }
    }
  }

  std::shared_ptr<const PreparedCorpus> corpus_;
  LoaderOptions options_;
  SpecialTokens special_;         // the corpus's roles
  std::vector<int32_t> ordinary_;  // the ids that are not special, ascending
  int64_t content_ = 0;  // T - 2
  bool full_ = true;
  bool pin_ = false;
  int64_t num_sequences_ = 0;
  std::vector<int64_t> doc_seq_start_;  // (D + 1,) first sequence of each document (document packing)
};

void validate_masking(const config::MaskingConfig& k) {
  if (k.mask_token_rate + k.random_token_rate > 1.0 + 1e-12)
    config::invalid(fmt::format("masking.mask_token_rate + masking.random_token_rate = {} must be <= 1",
                                k.mask_token_rate + k.random_token_rate));
}

void validate_masking_shape(const config::MaskingConfig& k, int64_t seq_len, int64_t batch_size,
                            const std::string& batch_key) {
  // A setting that predicts nothing trains on a loss of 0 and reports metrics over no predictions.
  // A sequence has at most max_seq_len - 2 positions to predict ([CLS] and [SEP] never are).
  const double maskable = static_cast<double>(seq_len - 2);
  if (k.exact_count && std::llround(k.mask_prob * maskable) < 1)
    config::invalid(fmt::format("masking.mask_prob {} chooses round({} x {}) = 0 positions of a sequence "
                                "(masking.exact_count): nothing would be predicted; raise masking.mask_prob to at least "
                                "{:.3g}", k.mask_prob, k.mask_prob, seq_len - 2, 0.5 / maskable));
  if (k.mask_prob * maskable * static_cast<double>(batch_size) < 0.5)
    config::invalid(fmt::format("masking.mask_prob {} predicts {:.2g} positions in a micro-batch of {} x {} tokens on "
                                "average: most micro-batches would predict nothing; raise masking.mask_prob (or {})",
                                k.mask_prob, k.mask_prob * maskable * static_cast<double>(batch_size), batch_size,
                                seq_len, batch_key));
}

LoaderOptions loader_options_from_config(const config::Config& config, int64_t batch_size) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.max_seq_len = config.data.max_seq_len;
  o.packing = config.data.packing;
  o.seed = config.train.seed;
  o.num_workers = config.data.num_workers;
  o.prefetch = config.data.prefetch;
  o.pin_memory = false;  // set by whoever has chosen the device (pinning before that binds device 0)
  o.masking = config.masking;
  return o;
}

LoaderOptions eval_loader_options(const config::Config& config, int64_t batch_size) {
  LoaderOptions o = loader_options_from_config(config, batch_size);
  o.num_workers = 0;
  o.masking = config::MaskingConfig{};  // 80/10/10, by piece, exact count
  o.masking.mask_prob = config.eval.mask_prob;
  return o;
}

// ---- MlmLoader ----------------------------------------------------------------------------------

namespace {

// The rows of this rank's batch k counted from global sequence g0: (sequence index, epoch) of each.
std::vector<std::pair<int64_t, uint64_t>> batch_rows(const SequenceBuilder& builder, int64_t g0, int64_t k,
                                                     const LoaderOptions& o) {
  const int64_t B = o.batch_size;
  std::vector<std::pair<int64_t, uint64_t>> rows(static_cast<size_t>(B));
  const int64_t n = builder.num_sequences();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t g = shard_sequence_index(g0, k, b, B, o.rank, o.world_size);
    const int64_t epoch = g / n;
    rows[b] = {builder.sequence_at(epoch, g % n), static_cast<uint64_t>(epoch)};
  }
  return rows;
}

}  // namespace

int64_t shard_sequence_index(int64_t start, int64_t batch, int64_t row, int64_t batch_size, int64_t rank,
                             int64_t world_size) {
  // Global batch `batch` covers [start + batch*W*B, start + (batch+1)*W*B); rank r takes its r-th B.
  return start + (batch * world_size + rank) * batch_size + row;
}

MlmLoader::MlmLoader(std::shared_ptr<const PreparedCorpus> corpus, const LoaderOptions& options)
    : builder_(std::make_shared<SequenceBuilder>(std::move(corpus), options)), options_(options) {
  start_workers();
}

MlmLoader::~MlmLoader() { stop_workers(); }

int64_t MlmLoader::sequences_per_epoch() const { return builder_->num_sequences(); }

void MlmLoader::start_workers() {
  stop_ = false;
  claimed_ = delivered_;
  ready_.clear();
  error_ = nullptr;
  try {
    for (int64_t w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::system_error& e) {  // the workers started are stopped and joined, then the error
    const size_t started = workers_.size();
    stop_workers();
    throw Error(fmt::format("cannot start {} data-loading threads (the system gave {}: {}); lower data.num_workers",
                            options_.num_workers, started, e.what()));
  }
}

void MlmLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

void MlmLoader::worker_loop() {
  SequenceBuilder::Scratch scratch;
  const int64_t depth = std::max<int64_t>(options_.prefetch, options_.num_workers);
  for (;;) {
    int64_t k, g0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || claimed_ < delivered_ + depth; });
      if (stop_) return;
      k = claimed_++;
      g0 = start_sequence_;
    }
    try {
      Batch batch = builder_->build(batch_rows(*builder_, g0, k, options_), static_cast<uint64_t>(options_.seed), scratch);
      std::lock_guard<std::mutex> lock(mu_);
      ready_.emplace(k, std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

Batch MlmLoader::next() {
  if (options_.num_workers <= 0) {
    thread_local SequenceBuilder::Scratch scratch;
    Batch batch = builder_->build(batch_rows(*builder_, start_sequence_, delivered_, options_),
                                  static_cast<uint64_t>(options_.seed), scratch);
    ++delivered_;
    return batch;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return error_ || ready_.count(delivered_); });
  if (error_) std::rethrow_exception(error_);
  Batch batch = std::move(ready_[delivered_]);
  ready_.erase(delivered_);
  ++delivered_;
  lock.unlock();
  cv_.notify_all();
  return batch;
}

LoaderState MlmLoader::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t g = start_sequence_ + delivered_ * options_.world_size * options_.batch_size;
  return {g / builder_->num_sequences(), g % builder_->num_sequences()};
}

void MlmLoader::restore(const LoaderState& state) {
  if (state.epoch < 0 || state.position < 0 || state.position >= builder_->num_sequences())
    throw Error("loader state (epoch " + std::to_string(state.epoch) + ", position " + std::to_string(state.position) +
                ") does not fit this corpus (" + std::to_string(builder_->num_sequences()) +
                " sequences an epoch): was the checkpoint made with other data or another " + options_.max_seq_len_key +
                "?");
  stop_workers();
  start_sequence_ = state.epoch * builder_->num_sequences() + state.position;
  delivered_ = 0;
  start_workers();
}

std::vector<Batch> make_eval_batches(std::shared_ptr<const PreparedCorpus> corpus, const LoaderOptions& options,
                                     int64_t max_sequences, int64_t batch_size, int64_t seed) {
  if (batch_size < 1) throw Error("eval batch_size must be at least 1");
  LoaderOptions o = options;
  o.batch_size = batch_size;
  const SequenceBuilder builder(std::move(corpus), o);
  const int64_t n = std::min(max_sequences, builder.num_sequences());
  SequenceBuilder::Scratch scratch;
  std::vector<Batch> batches;
  for (int64_t start = 0; start < n; start += batch_size) {
    std::vector<std::pair<int64_t, uint64_t>> rows;
    for (int64_t i = start; i < std::min(n, start + batch_size); ++i) rows.emplace_back(i, kEvalEpoch);
    batches.push_back(builder.build(rows, static_cast<uint64_t>(seed), scratch));
  }
  return batches;
}

}  // namespace roformer::data
