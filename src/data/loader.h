// Training sequences with dynamic masking, served as batches by background workers.
//
// Sequences (T = max_seq_len):
//   packing "full" (RoBERTa FULL-SENTENCES): the documents form one stream, each followed by [SEP];
//     sequence s is [CLS] + stream[s*(T-2), (s+1)*(T-2)) + [SEP]. No padding; the tail shorter than
//     T-2 is dropped.
//   packing "document": each document alone, split into pieces of T-2 tokens, [CLS] piece [SEP],
//     padded with [PAD] to T (attention_mask marks the tokens).
// Randomness is counter-based: the order of epoch e is a keyed bijection (a Feistel network over
// [0, N)) of (seed, e), and the mask of sequence i in epoch e comes from an RNG seeded by
// hash(seed, e, i). So a batch depends on (seed, epoch, position) alone: resume is O(1), and the
// number of workers changes nothing but speed.
#pragma once

#include <torch/types.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "data/corpus.h"

namespace roformer::data {

struct LoaderOptions {
  int64_t batch_size = 32;       // B, sequences per batch
  int64_t max_seq_len = 512;     // T, including [CLS] and [SEP]
  std::string max_seq_len_key = "data.max_seq_len";  // the key that set it (a length phase's), for messages
  std::string packing = "full";  // full | document
  int64_t seed = 0;
  int64_t num_workers = 2;       // background builders; 0 builds synchronously in next()
  int64_t prefetch = 4;          // batches built ahead
  bool pin_memory = false;       // page-locked input_ids, attention_mask, pred_* (only when CUDA is available)
  config::MaskingConfig masking;
  // Data parallelism: the global stream is cut into global batches of world_size * batch_size
  // sequences and rank r serves rows [r*B, (r+1)*B) of each, so the ranks' batches concatenated in
  // rank order are exactly the batch a single process with batch_size world_size*B would get.
  int64_t rank = 0;        // this process's rank in [0, world_size)
  int64_t world_size = 1;  // W, data-parallel processes
};

// batch_size is the micro-batch; the rest comes from data.*, masking.* and train.seed. pin_memory is
// false: the caller sets it once the device is chosen and bound (core::select_device).
LoaderOptions loader_options_from_config(const config::Config& config, int64_t batch_size /*micro-batch*/);

// masking.*'s rules (train/run_config.h): the replacement rates within 1. Throws roformer::Error
// naming the keys.
void validate_masking(const config::MaskingConfig& masking);
// That masking predicts something in a sequence of seq_len tokens (with masking.exact_count) and, on
// average, in a micro-batch of batch_size of them; batch_key: the key that set batch_size (a length
// phase's, train/length_phases.h).
void validate_masking_shape(const config::MaskingConfig& masking, int64_t seq_len, int64_t batch_size,
                            const std::string& batch_key);

// The evaluation's options: as above, but masked by the fixed evaluation protocol whatever masking.*
// trains with (eval.mask_prob of the pieces, exactly that many per sequence, 80% [MASK] / 10% random /
// 10% kept), so MLM accuracies compare across training recipes; no background workers.
LoaderOptions eval_loader_options(const config::Config& config, int64_t batch_size);

struct Batch {
  torch::Tensor input_ids;       // (B, T) int64
  torch::Tensor attention_mask;  // (B, T) int64, 1 = token, 0 = padding; undefined when the batch has no padding
  torch::Tensor labels;          // (B, T) int64, -100 where nothing is predicted
  torch::Tensor pred_positions;  // (P,) int64 flat indices into B*T of the predicted positions (ascending)
  torch::Tensor pred_labels;     // (P,) int64 original ids at those positions
  int64_t num_tokens = 0;        // non-padding tokens in the batch
};

// The global stream index (epoch * N + position) of row b of batch k of `rank`, for batches counted
// from global stream index `start` (see LoaderOptions::rank).
int64_t shard_sequence_index(int64_t start, int64_t batch, int64_t row, int64_t batch_size, int64_t rank,
                             int64_t world_size);

struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;  // sequences served within the epoch, over all ranks (the same on every rank)
};

// Builds sequences and masks; shared by the loader and the evaluation set. Thread-safe (const).
class SequenceBuilder;

class MlmLoader {
 public:
  MlmLoader(std::shared_ptr<const PreparedCorpus> corpus, const LoaderOptions& options);
  ~MlmLoader();  // joins workers
  MlmLoader(const MlmLoader&) = delete;
  MlmLoader& operator=(const MlmLoader&) = delete;

  Batch next();                  // blocks; wraps into the next epoch forever
  LoaderState state() const;     // the state after the last batch returned by next()
  void restore(const LoaderState& state);  // the next next() returns what an uninterrupted loader would
  int64_t sequences_per_epoch() const;

 private:
  void start_workers();
  void stop_workers();
  void worker_loop();

  std::shared_ptr<const SequenceBuilder> builder_;
  LoaderOptions options_;
  int64_t start_sequence_ = 0;  // global sequence index (epoch * N + position) of batch 0
  int64_t delivered_ = 0;       // batches returned by next() since start_sequence_

  // Prefetch: workers claim batch numbers in order and park results in ready_; next() takes them
  // in order, so delivery order never depends on which worker finished first.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
  std::map<int64_t, Batch> ready_;
  int64_t claimed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

// Fixed evaluation set: the first max_sequences sequences (unshuffled, deterministic packing) with masks
// from (seed, sequence index) alone, so figures do not depend on batch_size.
std::vector<Batch> make_eval_batches(std::shared_ptr<const PreparedCorpus> corpus, const LoaderOptions& options,
                                     int64_t max_sequences, int64_t batch_size, int64_t seed);

// Position p of [0, n) in the order of the given key: a bijection of [0, n) (exposed for tests).
int64_t permute_index(int64_t p, int64_t n, uint64_t key);

}  // namespace roformer::data
