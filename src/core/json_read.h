// Checked reading of the JSON we take from a user's disk (an export's config.json, a checkpoint's
// manifest and trainer state, a prepared corpus's meta.json, metrics.jsonl records). Every access
// says what it expects, so a hand-edited file with a wrong type ("vocab_size": "300", a null
// hidden_size, "pos_att_type": [5]) ends in one line naming the file, the key, what was expected and
// what to do (a roformer::Error: exit 1), never in nlohmann's type_error. Messages:
//   FILE: "KEY" is VALUE but must be EXPECTED; ADVICE
//   FILE has no "KEY"; ADVICE
// Nested objects name their keys by path ("loader.epoch").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace roformer::core {

// Parses `text`; a syntax error is a roformer::Error "ORIGIN is not valid JSON (...); ADVICE".
nlohmann::json parse_json(const std::string& text, const std::string& origin, const std::string& advice);

class JsonReader {
 public:
  // `object` must be a JSON object (else an Error) and outlive the reader. `origin` is the file (and
  // line) every message names, `advice` what the user can do about it.
  JsonReader(const nlohmann::json& object, std::string origin, std::string advice);

  // Whether `key` is there (a null value is there, with the wrong type for every accessor).
  bool has(const std::string& key) const;
  // The object's keys, in the document's (sorted) order.
  std::vector<std::string> keys() const;

  // Required: a missing key or another type is an Error.
  int64_t integer(const std::string& key) const;  // a JSON integer within int64
  int64_t count(const std::string& key) const;    // an integer >= 0
  double number(const std::string& key) const;    // any JSON number (an integer too)
  bool boolean(const std::string& key) const;
  std::string string(const std::string& key) const;
  std::vector<std::string> strings(const std::string& key) const;  // a list of strings
  JsonReader object(const std::string& key) const;                  // a nested object
  std::vector<JsonReader> objects(const std::string& key) const;    // a list of objects ("key[i].inner")
  const nlohmann::json& list(const std::string& key) const;         // a JSON array, elements unchecked

  // Optional: `fallback` when the key is absent; present with another type it is still an Error.
  int64_t integer(const std::string& key, int64_t fallback) const;
  int64_t count(const std::string& key, int64_t fallback) const;
  double number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;

  // The value of `key` as it is (which must be there), for a check of the caller's own.
  const nlohmann::json& at(const std::string& key) const;
  // Throws the Error "ORIGIN: "KEY" is VALUE but must be EXPECTED; ADVICE".
  [[noreturn]] void wrong(const std::string& key, const std::string& expected) const;
  // The same message for a value found inside `key` (an element of a list): VALUE is `value`.
  [[noreturn]] void wrong(const std::string& key, const nlohmann::json& value, const std::string& expected) const;

  const std::string& origin() const { return origin_; }

 private:
  JsonReader(const nlohmann::json& object, std::string origin, std::string advice, std::string prefix);
  const nlohmann::json* find(const std::string& key) const;  // nullptr when absent
  const nlohmann::json& need(const std::string& key) const;  // throws "has no KEY"
  const nlohmann::json& object_;
  std::string origin_, advice_;
  std::string prefix_;  // "loader." inside the object "loader"
};

}  // namespace roformer::core
