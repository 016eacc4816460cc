// The figures a run reports, as typed records: a TrainRecord per logging step, an EvalRecord per
// evaluation (of a run, or of `roformer eval`), and the RunSummary at its end. Each field is named
// once, here, with its metrics.jsonl key and its TensorBoard tag; metrics.jsonl, TensorBoard, the
// console, inspect, the model card and the trainer state read and write records through these lists
// (torchtitan's metrics processor sends one record to every logger: metrics/sink.h). Free of LibTorch.
//
// The keys are an interface (resume reads metrics.jsonl back, users plot it, dashboards are built on
// the tags): a field is added, never renamed. Records written by older versions lack the newer
// fields (std::optional here, or read as 0).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace roformer::core {
class JsonReader;
}

namespace roformer::metrics {

// A field's metrics.jsonl key, TensorBoard tag (nullptr: not a TensorBoard scalar) and, for a tag,
// the description TensorBoard shows beside its chart (what the figure is and how it is measured).
struct Field {
  const char* key;
  const char* tag;
  const char* description = nullptr;
};

// One logging step of training. "Batch" figures are those of the logging step itself (one batch of
// the global batch); the means are over the steps of the logging window whose values were read
// back (every step on the CPU; on CUDA the synced ones: window_steps says how many).
struct TrainRecord {
  static constexpr const char* kType = "train";
  int64_t step = 0;                     // optimizer steps done
  double loss = 0;                      // batch MLM loss (nats)
  double loss_avg = 0;                  // mean loss over the window
  double accuracy = 0;                  // batch MLM accuracy
  std::optional<double> accuracy_avg;   // mean accuracy over the window (absent before 0.1.0's issue 41)
  double lr = 0;
  double grad_norm = 0;                 // the logging step's, before clipping
  double tokens_per_s = 0;              // non-padding input tokens of all ranks, over the window
  double ms_per_step = 0;               // mean wall time of the window's steps
  int64_t tokens_seen = 0;
  double data_wait_s = 0;               // the logging step's wait for its batch
  std::optional<double> mfu;            // CUDA with a known peak (model/flops.h)
  std::optional<double> loss_scale;     // fp16's dynamic loss scale
  int64_t seq_len = 0;                  // tokens per sequence of the logging step (0 in older records)
  std::optional<int64_t> phase;         // its length phase, 1-based (runs with train.phases only)

  // For the console, not recorded: the window's size and the time left.
  int64_t window_steps = 0;
  double eta_s = 0;

  // f(Field, member) for every recorded field, in the TensorBoard tags' order.
  template <class R, class F>
  static void visit(R& r, F&& f) {
    f(Field{"step", nullptr}, r.step);
    f(Field{"loss", "train/loss",
            "MLM cross-entropy (nats) of the logging step's batch, at its predicted positions under the training masking rate (masking.mask_prob)"}, r.loss);
    f(Field{"loss_avg", "train/loss_avg",
            "Mean of train/loss over the steps since the previous logging step"}, r.loss_avg);
    f(Field{"accuracy", "train/accuracy",
            "Top-1 accuracy at the logging step's predicted positions under the training masking rate (masking.mask_prob, 40% in the shipped configs): not comparable with eval/accuracy, measured at 15%"}, r.accuracy);
    f(Field{"accuracy_avg", "train/accuracy_avg",
            "Mean of train/accuracy over the steps since the previous logging step"}, r.accuracy_avg);
    f(Field{"lr", "train/lr",
            "Learning rate of the step (optimizer.lr under the schedule section's warmup and decay)"}, r.lr);
    f(Field{"grad_norm", "train/grad_norm",
            "Global L2 norm of the gradients of the logging step, before clipping (optimizer.grad_clip)"}, r.grad_norm);
    f(Field{"tokens_per_s", "train/tokens_per_s",
            "Input tokens (padding excluded) of all ranks per second of training steps since the previous logging step, data loading included"}, r.tokens_per_s);
    f(Field{"ms_per_step", nullptr}, r.ms_per_step);
    f(Field{"tokens_seen", nullptr}, r.tokens_seen);
    f(Field{"data_wait_s", nullptr}, r.data_wait_s);
    f(Field{"mfu", "train/mfu",
            "Model FLOPs utilization: the matmul FLOPs of the steps per second over the device's dense bf16 peak"}, r.mfu);
    f(Field{"loss_scale", "train/loss_scale",
            "fp16's dynamic loss scale (halved at an overflow, doubled after a run of clean steps)"}, r.loss_scale);
    f(Field{"seq_len", nullptr}, r.seq_len);
    f(Field{"phase", "train/phase",
            "Length phase of the step (train.phases), counted from 1"}, r.phase);
  }
};

// Masked-token evaluation over a fixed set of sequences (eval/evaluate.h).
struct EvalRecord {
  static constexpr const char* kType = "eval";
  int64_t step = 0;           // the checkpoint's or the run's step
  double loss = 0;            // mean cross entropy over the predicted positions (nats)
  double accuracy = 0;        // top-1
  double perplexity = 0;      // exp(loss)
  double top5_accuracy = 0;
  int64_t n_predicted = 0;
  int64_t n_sequences = 0;
  int64_t n_tokens = 0;       // non-padding input tokens
  double seconds = 0;

  template <class R, class F>
  static void visit(R& r, F&& f) {
    f(Field{"step", nullptr}, r.step);
    f(Field{"loss", "eval/loss",
            "Mean MLM cross-entropy (nats) on the validation data at eval.mask_prob (15%) with masks of a fixed seed"}, r.loss);
    f(Field{"accuracy", "eval/accuracy",
            "Top-1 MLM accuracy on the validation data at every position chosen for prediction (eval.mask_prob, 15%; fixed seed): the figure to compare runs by"}, r.accuracy);
    f(Field{"perplexity", "eval/perplexity",
            "exp(eval/loss)"}, r.perplexity);
    f(Field{"top5_accuracy", "eval/top5",
            "Share of the validation data's predicted positions whose token is among the model's 5 most likely"}, r.top5_accuracy);
    f(Field{"n_predicted", nullptr}, r.n_predicted);
    f(Field{"n_sequences", nullptr}, r.n_sequences);
    f(Field{"n_tokens", nullptr}, r.n_tokens);
    f(Field{"seconds", nullptr}, r.seconds);
  }
};

// The end of a run that trained to train.steps: what the console prints, what ends TensorBoard's
// HParams session. Figures of this process's session (a resumed run counts from its checkpoint).
struct RunSummary {
  int64_t step = 0;                         // steps done
  int64_t session_steps = 0;                // of them, trained by this process
  double wall_s = 0;                        // this process's training, evaluations and saves included
  double tokens_per_s = 0;                  // this session's tokens over its steps' time
  std::optional<TrainRecord> last_train;    // the last logging step (window means)
  std::optional<EvalRecord> last_eval;      // the last evaluation of this session
  int64_t peak_memory_bytes = 0;
  std::string peak_memory_kind;             // core::PeakMemory::kind
  std::optional<double> mfu;                // over the session (CUDA with a known peak)
  // Runs with train.phases: the session's figures of each phase it trained in.
  struct PhaseFigures {
    int64_t phase = 0;         // 1-based
    int64_t first_step = 0;    // its first and last step trained in this session (1-based)
    int64_t last_step = 0;
    int64_t seq_len = 0;
    int64_t global_batch = 0;  // sequences per optimizer step
    int64_t steps = 0;
    int64_t tokens = 0;
    double seconds = 0;
  };
  std::vector<PhaseFigures> phases;
};

// The record's fields as a JSON object {key: value...}; unset optional fields are left out.
nlohmann::json to_json(const TrainRecord& r);
nlohmann::json to_json(const EvalRecord& r);
// A metrics.jsonl line's object: {"type": kType} and the fields.
nlohmann::json metrics_line(const TrainRecord& r);
nlohmann::json metrics_line(const EvalRecord& r);

// A record read back (metrics.jsonl, a trainer state): absent fields keep their defaults; a field
// of another type is a roformer::Error naming the origin, the key and the reader's advice.
TrainRecord train_record_from(const core::JsonReader& j);
EvalRecord eval_record_from(const core::JsonReader& j);

// The fields of the records of a type ("train" or "eval"); none for another type.
std::vector<Field> fields_of(const std::string& type);

}  // namespace roformer::metrics
