// trainer_state.json parsed with every field checked; see trainer_state.h.
#include "checkpoint/trainer_state.h"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace roformer::checkpoint {
using nlohmann::json;

namespace {

[[noreturn]] void damaged(const std::string& origin, const std::string& what) {
  throw Error(fmt::format("{}: {}; the checkpoint is damaged: resume from another one (`roformer train --resume "
                          "auto` picks the newest intact checkpoint)", origin, what));
}

// A required (or, with a default, optional) non-negative integer field of `object`.
int64_t count_field(const json& object, const char* name, const std::string& where, const std::string& origin,
                    std::optional<int64_t> fallback = std::nullopt) {
  if (!object.contains(name)) {
    if (fallback) return *fallback;
    damaged(origin, fmt::format("{}{} is missing", where, name));
  }
  const json& v = object[name];
  if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t{INT64_MAX} : v.get<int64_t>() < 0))
    damaged(origin, fmt::format("{}{} is {}, not a count", where, name, v.dump()));
  return v.get<int64_t>();
}

}  // namespace

std::string trainer_state_json(const TrainerState& s) {
  json state = {{"step", s.step},
                {"tokens_seen", s.tokens_seen},
                {"loader", {{"epoch", s.loader_epoch}, {"position", s.loader_position}}},
                {"world_size", s.world_size},
                {"loss_scale", s.loss_scale},
                {"good_steps", s.good_steps},
                {"tokenizer_fingerprint", s.tokenizer_fingerprint},
                {"num_parameters", s.num_parameters},
                {"reason", s.reason},
                {"roformer_version", s.roformer_version}};
  if (s.global_batch_size) state["global_batch_size"] = *s.global_batch_size;
  if (s.last_eval)
    state["last_eval"] = {{"loss", s.last_eval->loss}, {"accuracy", s.last_eval->accuracy},
                          {"top5_accuracy", s.last_eval->top5_accuracy}, {"perplexity", s.last_eval->perplexity}};
  return state.dump(2) + "\n";
}

TrainerState parse_trainer_state(const std::string& text, const std::string& origin) {
  json state;
  try {
    state = json::parse(text);
  } catch (const json::exception& e) {
    damaged(origin, fmt::format("not JSON ({})", e.what()));
  }
  if (!state.is_object()) damaged(origin, "not a JSON object");
  TrainerState s;
  s.step = count_field(state, "step", "", origin);
  s.tokens_seen = count_field(state, "tokens_seen", "", origin);
  if (!state.contains("loader") || !state["loader"].is_object()) damaged(origin, "loader is missing");
  s.loader_epoch = count_field(state["loader"], "epoch", "loader.", origin);
  s.loader_position = count_field(state["loader"], "position", "loader.", origin);
  s.world_size = count_field(state, "world_size", "", origin, int64_t{1});
  if (s.world_size < 1) damaged(origin, "world_size is 0");
  if (state.contains("global_batch_size")) s.global_batch_size = count_field(state, "global_batch_size", "", origin);
  s.good_steps = count_field(state, "good_steps", "", origin, int64_t{0});
  if (state.contains("loss_scale")) {
    const json& v = state["loss_scale"];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      damaged(origin, fmt::format("loss_scale is {}, not a positive number", v.dump()));
    s.loss_scale = v.get<double>();
  }
  if (!state.contains("tokenizer_fingerprint") || !state["tokenizer_fingerprint"].is_string())
    damaged(origin, "tokenizer_fingerprint is missing");
  s.tokenizer_fingerprint = state["tokenizer_fingerprint"].get<std::string>();
  // For the reader only: taken when present and well-typed.
  if (state.contains("num_parameters") && state["num_parameters"].is_number_integer())
    s.num_parameters = state["num_parameters"].get<int64_t>();
  if (state.contains("reason") && state["reason"].is_string()) s.reason = state["reason"].get<std::string>();
  if (state.contains("roformer_version") && state["roformer_version"].is_string())
    s.roformer_version = state["roformer_version"].get<std::string>();
  if (state.contains("last_eval") && state["last_eval"].is_object()) {
    const json& e = state["last_eval"];
    auto number = [&](const char* key) { return e.contains(key) && e[key].is_number() ? e[key].get<double>() : 0.0; };
    s.last_eval = TrainerState::Eval{number("loss"), number("accuracy"), number("top5_accuracy"), number("perplexity")};
  }
  return s;
}

}  // namespace roformer::checkpoint
