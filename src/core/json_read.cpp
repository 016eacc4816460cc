// Checked reading of a user's JSON; see json_read.h.
#include "core/json_read.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace roformer::core {
using nlohmann::json;

namespace {

// A value as a message shows it: its JSON text (escaped, at most 60 characters), a string marked
// as one so that "300" is not read as the number.
std::string shown(const json& v) {
  std::string text = v.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return v.is_string() ? text + " (a string)" : text;
}

// "; ADVICE", or nothing without advice.
std::string then(const std::string& advice) { return advice.empty() ? "" : "; " + advice; }

bool is_int64(const json& v) {
  return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX});
}

}  // namespace

json parse_json(const std::string& text, const std::string& origin, const std::string& advice) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{} is not valid JSON ({}){}", origin, e.what(), then(advice)));
  }
}

JsonReader::JsonReader(const json& object, std::string origin, std::string advice)
    : JsonReader(object, std::move(origin), std::move(advice), "") {
  if (!object_.is_object())
    throw Error(fmt::format("{} holds {} but must hold a JSON object{}", origin_, shown(object_), then(advice_)));
}

JsonReader::JsonReader(const json& object, std::string origin, std::string advice, std::string prefix)
    : object_(object), origin_(std::move(origin)), advice_(std::move(advice)), prefix_(std::move(prefix)) {}

const json* JsonReader::find(const std::string& key) const {
  const auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

const json& JsonReader::need(const std::string& key) const {
  if (const json* v = find(key)) return *v;
  throw Error(fmt::format("{} has no \"{}{}\"{}", origin_, prefix_, key, then(advice_)));
}

bool JsonReader::has(const std::string& key) const { return find(key) != nullptr; }

std::vector<std::string> JsonReader::keys() const {
  std::vector<std::string> out;
  for (const auto& item : object_.items()) out.push_back(item.key());
  return out;
}

const json& JsonReader::at(const std::string& key) const { return need(key); }

void JsonReader::wrong(const std::string& key, const json& value, const std::string& expected) const {
  throw Error(fmt::format("{}: \"{}{}\" is {} but must be {}{}", origin_, prefix_, key, shown(value), expected,
                          then(advice_)));
}

void JsonReader::wrong(const std::string& key, const std::string& expected) const { wrong(key, need(key), expected); }

int64_t JsonReader::integer(const std::string& key) const {
  const json& v = need(key);
  if (!is_int64(v)) wrong(key, "an integer");
  return v.get<int64_t>();
}

int64_t JsonReader::count(const std::string& key) const {
  const json& v = need(key);
  if (!is_int64(v) || v.get<int64_t>() < 0) wrong(key, "a count (an integer >= 0)");
  return v.get<int64_t>();
}

double JsonReader::number(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_number()) wrong(key, "a number");
  return v.get<double>();
}

bool JsonReader::boolean(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_boolean()) wrong(key, "true or false");
  return v.get<bool>();
}

std::string JsonReader::string(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_string()) wrong(key, "a string");
  return v.get<std::string>();
}

std::vector<std::string> JsonReader::strings(const std::string& key) const {
  std::vector<std::string> out;
  for (const json& e : list(key)) {
    if (!e.is_string()) wrong(key, "a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

const json& JsonReader::list(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_array()) wrong(key, "a list");
  return v;
}

JsonReader JsonReader::object(const std::string& key) const {
  const json& v = need(key);
  if (!v.is_object()) wrong(key, "a JSON object");
  return JsonReader(v, origin_, advice_, prefix_ + key + ".");
}

std::vector<JsonReader> JsonReader::objects(const std::string& key) const {
  std::vector<JsonReader> out;
  for (const json& e : list(key)) {
    if (!e.is_object()) wrong(key, e, "a list of JSON objects");
    out.push_back(JsonReader(e, origin_, advice_, fmt::format("{}{}[{}].", prefix_, key, out.size())));
  }
  return out;
}

int64_t JsonReader::integer(const std::string& key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

int64_t JsonReader::count(const std::string& key, int64_t fallback) const { return has(key) ? count(key) : fallback; }

double JsonReader::number(const std::string& key, double fallback) const { return has(key) ? number(key) : fallback; }

bool JsonReader::boolean(const std::string& key, bool fallback) const { return has(key) ? boolean(key) : fallback; }

std::string JsonReader::string(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

}  // namespace roformer::core
