// Records to and from JSON through their field lists; see records.h.
#include "metrics/records.h"

#include <cmath>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/json_read.h"

namespace roformer::metrics {
using nlohmann::json;

namespace {

template <class Record>
json record_json(const Record& r) {
  json out = json::object();
  Record::visit(r, [&](const Field& f, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, std::optional<double>> || std::is_same_v<T, std::optional<int64_t>>) {
      if (value) out[f.key] = *value;
    } else {
      out[f.key] = value;
    }
  });
  return out;
}

template <class Record>
json record_line(const Record& r) {
  json out = record_json(r);
  out["type"] = Record::kType;
  return out;
}

template <class Record>
Record record_from(const core::JsonReader& j) {
  Record r;
  Record::visit(r, [&](const Field& f, auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, std::optional<double>>) {
      if (j.has(f.key)) value = j.number(f.key);
    } else if constexpr (std::is_same_v<T, std::optional<int64_t>>) {  // records before 0.1.0's issue 55: 2.0
      if (j.has(f.key)) value = std::llround(j.number(f.key));
    } else if constexpr (std::is_same_v<T, int64_t>) {
      value = j.integer(f.key, value);
    } else {
      value = j.number(f.key, value);
    }
  });
  return r;
}

template <class Record>
std::vector<Field> record_fields() {
  std::vector<Field> out;
  Record r;
  Record::visit(r, [&](const Field& f, const auto&) { out.push_back(f); });
  return out;
}

}  // namespace

json to_json(const TrainRecord& r) { return record_json(r); }
json to_json(const EvalRecord& r) { return record_json(r); }
json metrics_line(const TrainRecord& r) { return record_line(r); }
json metrics_line(const EvalRecord& r) { return record_line(r); }

TrainRecord train_record_from(const core::JsonReader& j) { return record_from<TrainRecord>(j); }
EvalRecord eval_record_from(const core::JsonReader& j) { return record_from<EvalRecord>(j); }

std::vector<Field> fields_of(const std::string& type) {
  if (type == TrainRecord::kType) return record_fields<TrainRecord>();
  if (type == EvalRecord::kType) return record_fields<EvalRecord>();
  return {};
}

}  // namespace roformer::metrics
