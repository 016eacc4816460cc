// The batches a training run trains and evaluates on, as one component built from its slice of the
// plan (DataSetup): the tokenizer (the checkpoint's when resuming, the --init-from source's,
// tokenizer.model, or one trained for the run), the prepared train/valid corpora, the dynamic-masking
// loader with this rank's share of every global batch, and the fixed evaluation batches. `roformer
// bench` builds one from a config and its own directory (bench/step_bench.cpp: prepared data, no
// run); random batches of the same shape are train/synthetic.h's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/trainer_state.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "train/batch_source.h"
#include "train/plan.h"

namespace roformer::train {

// What the data is made from: the config, the directory its tokenizer and prepared data go to
// (RUN_DIR, or the bench's own), this process's share of every batch, and where the tokenizer comes
// from when not from the config: the checkpoint resumed from, or the --init-from source. Pointers,
// not copies: they must outlive the TrainingData's constructor only.
struct DataSetup {
  const config::Config* cfg = nullptr;
  std::string dir;
  dist::DistEnv env;                                    // a single process unless set
  const checkpoint::CheckpointMeta* resume = nullptr;  // its tokenizer, copied into dir
  const InitSource* init = nullptr;                    // its tokenizer
  static DataSetup of(const Plan& plan);               // a training run's
};

class TrainingData : public BatchSource {
 public:
  // Writes the tokenizer and prepared data into setup.dir (rank 0; main_rank false: finds them
  // there). Throws roformer::Error for missing or unusable inputs, naming the config key.
  TrainingData(const DataSetup& setup, bool pin_memory, bool main_rank);

  // The loader's shape from now on (a length phase's, train/length_phases.h): a new loader over the
  // same prepared corpus, starting at the beginning of its own order (epoch 0, position 0).
  // seq_key: the key that set max_seq_len, named by the loader's messages.
  void reshape(int64_t max_seq_len, int64_t batch_size, const std::string& seq_key);

  data::Batch next() override { return loader_->next(); }
  int64_t vocab_size() const override { return tokenizer_->vocab_size(); }
  // Where the loader is, so a step given up at a stop signal can take its batches again.
  std::optional<data::LoaderState> position() const override { return loader_->state(); }
  void rewind(const data::LoaderState& position) override { loader_->restore(position); }

  const data::Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::vector<data::Batch>& eval_batches() const { return eval_batches_; }
  int64_t sequences_per_epoch() const { return loader_->sequences_per_epoch(); }

  // Its part of a checkpoint's trainer_state.json: the loader's epoch and position within it (of the
  // shape the length phases restored first), the tokenizer's fingerprint.
  void save(checkpoint::TrainerState& state) const;
  void restore(const checkpoint::TrainerState& state);

 private:
  void load_tokenizer(const DataSetup& setup, bool main_rank);
  std::string train_run_tokenizer(const config::Config& cfg, const std::string& run_dir, bool main_rank);
  void say_how_to_reuse(const DataSetup& setup) const;  // the keys that point a new run at this tokenizer and data
  std::shared_ptr<const data::PreparedCorpus> prepare(const DataSetup& setup, const std::vector<std::string>& files,
                                                      const std::string& name);

  std::optional<data::Tokenizer> tokenizer_;  // set by the constructor (Tokenizer has no empty state)
  data::LoaderOptions loader_options_;        // data.* and train.batch_size's (the first length phase's)
  std::shared_ptr<const data::PreparedCorpus> train_corpus_;
  std::unique_ptr<data::MlmLoader> loader_;   // of the shape last given
  std::vector<data::Batch> eval_batches_;
};

}  // namespace roformer::train
