// What a run writes for TensorBoard, and when; see tensorboard_sink.h.
#include "train/tensorboard_sink.h"

#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace roformer::train {
namespace fs = std::filesystem;

namespace {

bool is_hparam(const std::string& key) {
  static const std::set<std::string> kKeys = {"train.steps",      "train.batch_size", "train.grad_accum",
                                              "train.precision",  "train.seed",       "data.max_seq_len",
                                              "data.packing",     "tokenizer.vocab_size", "tokenizer.model_type"};
  for (const char* section : {"model.", "masking.", "optimizer.", "schedule."})
    if (key.rfind(section, 0) == 0) return true;
  return kKeys.count(key) > 0;
}

}  // namespace

std::vector<tensorboard::Scalar> tensorboard_scalars(const nlohmann::json& record) {
  std::vector<tensorboard::Scalar> out;
  if (!record.is_object()) return out;
  // A record edited by hand is read as far as it can be: a field of another type is left out.
  const auto it_type = record.find("type");
  const std::string type = it_type != record.end() && it_type->is_string() ? it_type->get<std::string>() : "";
  for (const metrics::Field& f : metrics::fields_of(type)) {
    if (f.tag == nullptr) continue;
    const auto it = record.find(f.key);
    if (it != record.end() && it->is_number()) out.push_back({f.tag, it->get<double>(), f.description ? f.description : ""});
  }
  return out;
}

std::vector<tensorboard::HParam> tensorboard_hparams(const config::Config& config) {
  std::vector<tensorboard::HParam> out;
  for (const auto& [key, value] : config::values(config)) {
    if (!is_hparam(key)) continue;
    if (const auto* i = std::get_if<int64_t>(&value)) out.push_back({key, static_cast<double>(*i)});
    if (const auto* d = std::get_if<double>(&value)) out.push_back({key, *d});
    if (const auto* b = std::get_if<bool>(&value)) out.push_back({key, *b});
    if (const auto* s = std::get_if<std::string>(&value)) out.push_back({key, *s});
  }
  return out;
}

TensorBoardSink::TensorBoardSink(const config::Config& config, const checkpoint::RunLayout& run,
                                 std::optional<int64_t> resumed_at)
    : earlier_files_(tensorboard::list_event_files(run.tensorboard())), writer_(run.tensorboard()) {
  const int64_t first = resumed_at ? *resumed_at + 1 : 0;
  const double now = tensorboard::wall_time_now();
  if (!resumed_at && !earlier_files_.empty())
    spdlog::warn("{} already holds {} event file(s) of an earlier run: TensorBoard shows this run's steps (its "
                 "SessionLog START supersedes the earlier ones) but keeps the earlier run's HParams; delete them "
                 "for a clean record", fs::path(path()).parent_path().string(), earlier_files_.size());
  writer_.add(tensorboard::session_start_event(now, first));
  if (resumed_at && earlier_files_.empty()) replay(run.metrics(), *resumed_at);
  writer_.add(tensorboard::text_event(now, first, "config", "```yaml\n" + config::to_yaml(config) + "```\n"));
  writer_.add(tensorboard::hparams_session_start_event(now, first, tensorboard_hparams(config)));
  writer_.flush();
}

// The records up to the checkpoint, stamped with the current time (metrics.jsonl holds none).
void TensorBoardSink::replay(const std::string& metrics_path, int64_t last_step) {
  std::ifstream in(metrics_path);
  const double now = tensorboard::wall_time_now();
  int64_t replayed = 0;
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) continue;
    const auto step = record["step"].get<int64_t>();
    const auto scalars = tensorboard_scalars(record);
    if (step > last_step || scalars.empty()) continue;
    writer_.add(tensorboard::scalars_event(now, step, described_once(scalars)));
    ++replayed;
  }
  if (replayed > 0)
    spdlog::info("TensorBoard: {} had no event file; wrote the {} metrics record(s) up to step {} first",
                 fs::path(path()).parent_path().string(), replayed, last_step);
}

std::vector<tensorboard::Scalar> TensorBoardSink::described_once(std::vector<tensorboard::Scalar> scalars) {
  for (auto& s : scalars)
    if (!described_.insert(s.tag).second) s.description.clear();
  return scalars;
}

void TensorBoardSink::write(const metrics::TrainRecord& record) { write_json(metrics::metrics_line(record)); }
void TensorBoardSink::write(const metrics::EvalRecord& record) { write_json(metrics::metrics_line(record)); }

void TensorBoardSink::write_json(const nlohmann::json& record) {
  const auto scalars = tensorboard_scalars(record);
  if (scalars.empty() || !record.contains("step")) return;
  writer_.add(tensorboard::scalars_event(tensorboard::wall_time_now(), record["step"].get<int64_t>(),
                                         described_once(scalars)));
  writer_.flush();
}

void TensorBoardSink::finish(const metrics::RunSummary& summary) {
  writer_.add(tensorboard::hparams_session_end_event(tensorboard::wall_time_now(), summary.step,
                                                     tensorboard::SessionStatus::kSuccess));
  writer_.close();
}

}  // namespace roformer::train
