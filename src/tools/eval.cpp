// `roformer eval`: MLM accuracy of a checkpoint on text or prepared data with fixed masks; see eval.h.
#include "tools/eval.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "core/temp_dir_guard.h"
#include "data/corpus.h"
#include "data/input_files.h"
#include "data/tokenizer.h"
#include "data/loader.h"
#include "checkpoint/loader.h"
#include "eval/evaluate.h"
#include "metrics/records.h"
#include "train/length_phases.h"

namespace roformer::tools {
namespace fs = std::filesystem;

SequenceBound sequence_bound(const model::PositionScheme& positions) {
  if (const auto longest = positions.max_length()) return {*longest, true};
  return {};
}

namespace {

// Raw text is encoded with the checkpoint's tokenizer into a temporary prepared directory. The
// tokenizer is the checkpoint's, as loaded (its files written beside the data): the checkpoint
// itself may be pruned meanwhile by a run training into its directory.
class TempPrepared {
 public:
  TempPrepared(const std::vector<std::string>& files, const data::Tokenizer& tokenizer, const std::string& text_field)
      : scratch_("roformer-eval-", "eval's prepared copy of the data") {
    std::string tokenizer_path;
    try {
      tokenizer_path = tokenizer.save((scratch_.path() / "its-tokenizer").string());
    } catch (const Error& e) {  // a full TMPDIR is the cause, not the data
      scratch_.fail(e.what());
    }
    data::PrepareOptions o;
    o.tokenizer_model = tokenizer_path;
    o.inputs = files;
    o.out_dir = dir();
    o.text_field = text_field;
    o.progress = false;
    data::prepare_corpus(o);
  }
  std::string dir() const { return (scratch_.path() / "prepared").string(); }

 private:
  core::ScratchDir scratch_;  // removed on every exit path, Ctrl-C and SIGTERM included
};

// --seq-len: at least [CLS], a token and [SEP], at most the model's sequence_bound.
int64_t checked_seq_len(int64_t seq_len, const model::PositionScheme& positions) {
  if (seq_len < 3) throw Error(fmt::format("--seq-len {} is too short: a sequence holds [CLS], text and [SEP]; give 3 "
                                           "or more", seq_len));
  const SequenceBound bound = sequence_bound(positions);
  if (seq_len <= bound.tokens) return seq_len;
  if (bound.table)
    throw Error(fmt::format("--seq-len {} exceeds model.max_position_embeddings {} of this checkpoint (its learned "
                            "absolute position table has no rows beyond); evaluate at {} or fewer tokens",
                            seq_len, bound.tokens, bound.tokens));
  throw Error(fmt::format("--seq-len {} is beyond what attention over one sequence can hold (its scores grow with the "
                          "square of the length); evaluate at {} tokens or fewer", seq_len, bound.tokens));
}

// The run's data.valid_files are read as the run wrote them into its config: a relative path is relative
// to the directory `roformer train` was started in, which need not be this one.
void check_run_valid_files(const std::vector<std::string>& files) {
  for (const auto& f : files) {
    std::error_code ec;
    if (fs::exists(f, ec) || data::is_prepared_dir(f)) continue;
    try {
      data::expand_inputs({f});  // a pattern or a folder that still names files
    } catch (const Error&) {
      throw Error(fmt::format("input file not found: {}: it is the run's data.valid_files (its config.yaml), read "
                              "relative to the directory the run was started in{}; pass --data FILE... to evaluate "
                              "other files, or run eval from that directory",
                              f, fs::path(f).is_relative() ? ", not to this one (" + fs::current_path().string() + ")"
                                                            : std::string()));
    }
  }
}

// The length to evaluate at: --seq-len, or the run's own evaluation length (eval.max_seq_len; 0:
// the length training ended with, train.phases' last).
int64_t eval_length(const EvalRequest& req, const checkpoint::LoadedCheckpoint& ck) {
  return req.seq_len != 0 ? checked_seq_len(req.seq_len, ck.model->positions()) : train::eval_seq_len(ck.config);
}

}  // namespace

void run_eval(const EvalRequest& req) {
  const torch::Device device = core::select_device(req.device, "--device");
  auto ck = checkpoint::load_checkpoint(req.checkpoint, device);
  config::Config cfg = ck.config;
  const int64_t trained_len = train::resolve_length_phases(ck.config).back().max_seq_len;  // train.phases' last
  cfg.data.max_seq_len = eval_length(req, ck);  // checked before any data is read
  std::vector<std::string> files = req.data.empty() ? ck.config.data.valid_files : req.data;
  if (files.empty())
    throw Error("no evaluation data: pass --data FILE... (text, JSONL, Parquet, a folder or prepared directories); "
                "the run had no data.valid_files");
  if (req.data.empty()) check_run_valid_files(files);
  std::shared_ptr<const data::PreparedCorpus> corpus;
  std::unique_ptr<TempPrepared> temp;
  if (std::all_of(files.begin(), files.end(), [](const std::string& f) { return data::is_prepared_dir(f); })) {
    corpus = data::PreparedCorpus::open(files, ck.tokenizer->fingerprint());
  } else {
    temp = std::make_unique<TempPrepared>(files, *ck.tokenizer,
                                          req.text_field.empty() ? ck.config.data.text_field : req.text_field);
    corpus = data::PreparedCorpus::open(temp->dir(), ck.tokenizer->fingerprint());
  }
  if (req.mask_prob > 0) cfg.eval.mask_prob = req.mask_prob;
  auto opts = data::eval_loader_options(cfg, req.batch_size);
  opts.pin_memory = device.is_cuda();
  const int64_t max_seq = req.max_sequences > 0 ? req.max_sequences : std::numeric_limits<int64_t>::max();
  auto batches = data::make_eval_batches(corpus, opts, max_seq, req.batch_size, req.seed);
  if (batches.empty())
    throw Error(fmt::format("the evaluation data holds no complete sequence of {} tokens; give more text",
                            cfg.data.max_seq_len));
  const config::Precision precision = device.is_cuda() ? ck.config.train.precision : config::Precision::kFp32;
  metrics::EvalRecord r = eval::evaluate_mlm(ck.model, batches, device, precision);
  r.step = ck.state.step;
  if (r.n_predicted == 0)  // a loss, accuracy or perplexity over no predictions would be no result at all
    throw Error(fmt::format("no position was chosen for prediction in the {} evaluated sequence(s) of {} tokens at "
                            "mask_prob {}: there is nothing to measure; raise --mask-prob or evaluate more sequences",
                            r.n_sequences, cfg.data.max_seq_len, cfg.eval.mask_prob));
  const double tokens_per_s = r.seconds > 0 ? static_cast<double>(r.n_tokens) / r.seconds : 0.0;
  std::string data_desc;
  for (const auto& f : files) data_desc += (data_desc.empty() ? "" : ", ") + f;
  // The table is the result (stdout); with --json the record is, and the table goes beside the logs.
  (req.json ? std::cerr : std::cout) << fmt::format(
      "checkpoint      {} (step {})\n"
      "data            {}\n"
      "sequences       {} x {} tokens{}, {} predicted (mask_prob {}, seed {})\n"
      "MLM accuracy    {:.4f}   (top-5 {:.4f})\n"
      "loss            {:.4f}   (perplexity {:.2f})\n"
      "throughput      {:.0f} tokens/s on {} ({:.2f}s)\n",
      ck.dir, r.step, data_desc, r.n_sequences, cfg.data.max_seq_len,
      cfg.data.max_seq_len != trained_len ? fmt::format(" (trained at {})", trained_len)
                                                         : std::string(),
      r.n_predicted, cfg.eval.mask_prob, req.seed,
      r.accuracy, r.top5_accuracy, r.loss, r.perplexity, tokens_per_s, device.str(), r.seconds);
  if (req.json) {
    nlohmann::json rec = metrics::to_json(r);  // the figures under metrics.jsonl's keys, then what was evaluated
    rec.update({{"checkpoint", ck.dir}, {"seq_len", cfg.data.max_seq_len}, {"train_seq_len", trained_len},
                {"mask_prob", cfg.eval.mask_prob}, {"seed", req.seed}, {"batch_size", req.batch_size},
                {"tokens_per_s", tokens_per_s}});
    std::cout << rec.dump() << std::endl;
  }
}

}  // namespace roformer::tools
