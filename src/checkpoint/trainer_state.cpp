// trainer_state.json parsed with every field checked; see trainer_state.h.
#include "checkpoint/trainer_state.h"

#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"

namespace roformer::checkpoint {
using nlohmann::json;

namespace {

constexpr const char* kDamaged =
    "the checkpoint is damaged: resume from another one (`roformer train --resume auto` picks the newest intact "
    "checkpoint)";

}  // namespace

std::string trainer_state_json(const TrainerState& s) {
  json state = {{"step", s.step},
                {"tokens_seen", s.tokens_seen},
                {"loader", {{"phase", s.loader_phase}, {"epoch", s.loader_epoch}, {"position", s.loader_position}}},
                {"world_size", s.world_size},
                {"loss_scale", s.loss_scale},
                {"good_steps", s.good_steps},
                {"tokenizer_fingerprint", s.tokenizer_fingerprint},
                {"num_parameters", s.num_parameters},
                {"reason", s.reason},
                {"roformer_version", s.roformer_version}};
  if (s.global_batch_size) state["global_batch_size"] = *s.global_batch_size;
  if (s.last_eval) state["last_eval"] = metrics::to_json(*s.last_eval);
  return state.dump(2) + "\n";
}

TrainerState parse_trainer_state(const std::string& text, const std::string& origin) {
  const json state = core::parse_json(text, origin, kDamaged);
  const core::JsonReader j(state, origin, kDamaged);
  TrainerState s;
  s.step = j.count("step");
  s.tokens_seen = j.count("tokens_seen");
  const core::JsonReader loader = j.object("loader");
  s.loader_phase = loader.count("phase", 0);  // absent before train.phases: the first
  s.loader_epoch = loader.count("epoch");
  s.loader_position = loader.count("position");
  s.world_size = j.count("world_size", 1);
  if (s.world_size < 1) j.wrong("world_size", "a count of processes (1 or more)");
  if (j.has("global_batch_size")) s.global_batch_size = j.count("global_batch_size");
  s.good_steps = j.count("good_steps", 0);
  if (j.has("loss_scale")) {
    s.loss_scale = j.number("loss_scale");
    if (!std::isfinite(s.loss_scale) || s.loss_scale <= 0) j.wrong("loss_scale", "a positive number");
  }
  s.tokenizer_fingerprint = j.string("tokenizer_fingerprint");
  // For the reader only (inspect, the model card): taken when present and well-typed.
  if (j.has("num_parameters") && j.at("num_parameters").is_number_integer())
    s.num_parameters = j.integer("num_parameters");
  if (j.has("reason") && j.at("reason").is_string()) s.reason = j.string("reason");
  if (j.has("roformer_version") && j.at("roformer_version").is_string())
    s.roformer_version = j.string("roformer_version");
  if (j.has("last_eval") && j.at("last_eval").is_object()) {
    try {
      s.last_eval = metrics::eval_record_from(j.object("last_eval"));
    } catch (const Error&) {  // a hand-edited figure: the reader does without it
    }
  }
  return s;
}

}  // namespace roformer::checkpoint
