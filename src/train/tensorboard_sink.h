// RUN_DIR/events.out.tfevents.* (checkpoint::RunLayout::tensorboard(): TensorBoard names the run by
// its folder): the run as TensorBoard (and W&B's TensorBoard sync) reads it, written by rank 0 next
// to metrics.jsonl and fed the very records written there (docs/training.md, "What you
// see"). The file format is tensorboard/'s; this file decides what goes in it.
//
// One event file per process start. Its head, at the session's first step S (0 for a new run,
// M + 1 for a run resumed from the checkpoint at step M):
//   SessionLog START at S    TensorBoard drops what it read at steps >= S, i.e. what a killed
//                            process wrote after its last checkpoint: the curves read as one run,
//                            no step twice (tests/python/check_tensorboard.py checks it)
//   text "config"            the resolved config of this process (YAML)
//   HParams session start    the model, masking, optimizer and schedule keys and the training shape
// then one event per metrics record (flushed at once: a live TensorBoard follows the run), and the
// HParams session end when training finishes. A resumed run whose directory holds no event file
// yet (a run from before event files, or resumed into a new directory) first writes the restored
// metrics.jsonl records, so its curves start at the first step too.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "checkpoint/run_layout.h"
#include "core/config.h"
#include "metrics/sink.h"
#include "tensorboard/event_file.h"
#include "tensorboard/summary.h"

namespace roformer::train {

class TensorBoardSink : public metrics::MetricsSink {
 public:
  // Writes into run.tensorboard(). resumed_at: the step of the checkpoint the run resumed from;
  // none for a new run. The run's metrics.jsonl, as restored, is replayed only as described above.
  TensorBoardSink(const config::Config& config, const checkpoint::RunLayout& run, std::optional<int64_t> resumed_at);

  // A record as scalars at its step; flushed.
  void write(const metrics::TrainRecord& record) override;
  void write(const metrics::EvalRecord& record) override;
  // Training finished: the HParams session end (success) at the summary's step; flushed and closed.
  void finish(const metrics::RunSummary& summary) override;
  const std::string& path() const { return writer_.path(); }

 private:
  void replay(const std::string& metrics_path, int64_t last_step);
  void write_json(const nlohmann::json& record);
  // The scalars with each tag's description kept the first time this file holds the tag only.
  std::vector<tensorboard::Scalar> described_once(std::vector<tensorboard::Scalar> scalars);

  std::vector<std::string> earlier_files_;  // the directory's event files before this process
  tensorboard::EventFileWriter writer_;
  std::set<std::string> described_;  // tags whose description this file holds
};

// The scalars of a metrics.jsonl record under their tags (metrics/records.h names them: train/loss,
// train/loss_avg, train/accuracy, train/accuracy_avg, train/lr, train/grad_norm, train/tokens_per_s,
// train/mfu, train/loss_scale; eval/loss, eval/accuracy, eval/perplexity, eval/top5), for the fields
// it holds.
std::vector<tensorboard::Scalar> tensorboard_scalars(const nlohmann::json& record);

// The HParams of a run: every key of model, masking, optimizer and schedule, and train.steps,
// train.batch_size, train.grad_accum, train.precision, train.seed, data.max_seq_len, data.packing,
// tokenizer.vocab_size and tokenizer.model_type; numbers as numbers.
std::vector<tensorboard::HParam> tensorboard_hparams(const config::Config& config);

}  // namespace roformer::train
