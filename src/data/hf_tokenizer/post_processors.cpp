// Post-processors of a tokenizer.json (components.h) for one sequence: TemplateProcessing,
// BertProcessing, RobertaProcessing, ByteLevel (ids unchanged) and Sequence.
#include <nlohmann/json.hpp>

#include "data/hf_tokenizer/components.h"

namespace roformer::data::hf {

namespace {

// [CLS] $A [SEP] with the given ids (BertProcessing, RobertaProcessing).
class Frame : public PostProcessor {
 public:
  explicit Frame(const core::JsonReader& j) : cls_(token_id(j, "cls")), sep_(token_id(j, "sep")) {
    j.boolean("trim_offsets", true);  // RobertaProcessing's offsets options change no id
    j.boolean("add_prefix_space", true);
  }
  std::vector<int32_t> single(const std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 2);
    out.push_back(cls_);
    out.insert(out.end(), ids.begin(), ids.end());
    out.push_back(sep_);
    return out;
  }
  std::pair<int32_t, int32_t> single_frame() const override { return {cls_, sep_}; }

 private:
  // ["[CLS]", 101]
  static int32_t token_id(const core::JsonReader& j, const std::string& key) {
    const nlohmann::json& v = j.at(key);
    if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_number_unsigned() || v[1].get<uint64_t>() > INT32_MAX)
      j.wrong(key, "a [token, id] pair");
    return v[1].get<int32_t>();
  }
  int32_t cls_, sep_;
};

// TemplateProcessing: the "single" template, its special tokens replaced by their ids.
class Template : public PostProcessor {
 public:
  explicit Template(const core::JsonReader& j) {
    const core::JsonReader specials = j.object("special_tokens");
    for (const nlohmann::json& item : j.list("single")) {
      if (!item.is_object() || item.size() != 1) j.wrong("single", item, "a list of {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      if (item.contains("Sequence")) {
        const nlohmann::json& seq = item["Sequence"];
        if (!seq.is_object() || seq.value("id", "") != "A") j.wrong("single", item, "a template of sequence A only");
        items_.push_back({});
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].is_object() || !item["SpecialToken"].contains("id") ||
          !item["SpecialToken"]["id"].is_string())
        j.wrong("single", item, "a list of {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      if (!specials.has(name)) j.wrong("single", item, "special tokens listed in \"special_tokens\"");
      const nlohmann::json& ids = specials.object(name).list("ids");
      std::vector<int32_t> token_ids;
      for (const nlohmann::json& id : ids) {
        if (!id.is_number_unsigned() || id.get<uint64_t>() > INT32_MAX) specials.wrong(name, id, "ids from 0 to 2^31-1");
        token_ids.push_back(id.get<int32_t>());
      }
      items_.push_back({true, std::move(token_ids)});
    }
  }
  std::vector<int32_t> single(const std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    for (const Item& item : items_) {
      if (item.special) out.insert(out.end(), item.ids.begin(), item.ids.end());
      else out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
  }
  std::pair<int32_t, int32_t> single_frame() const override {
    if (items_.size() == 3 && items_[0].special && !items_[1].special && items_[2].special && items_[0].ids.size() == 1 &&
        items_[2].ids.size() == 1)
      return {items_[0].ids[0], items_[2].ids[0]};
    return {-1, -1};
  }

 private:
  struct Item {
    bool special = false;        // a special token, else the sequence
    std::vector<int32_t> ids;    // the special token's
  };
  std::vector<Item> items_;
};

class Unchanged : public PostProcessor {
 public:
  std::vector<int32_t> single(const std::vector<int32_t>& ids) const override { return ids; }
};

class Sequence : public PostProcessor {
 public:
  explicit Sequence(const core::JsonReader& j) {
    for (const core::JsonReader& step : j.objects("processors")) steps_.push_back(parse_post_processor(step));
  }
  std::vector<int32_t> single(const std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out = ids;
    for (const auto& step : steps_) out = step->single(out);
    return out;
  }
  std::pair<int32_t, int32_t> single_frame() const override {
    std::pair<int32_t, int32_t> frame = {-1, -1};
    for (const auto& step : steps_) {
      const auto f = step->single_frame();
      if (f.first >= 0) {
        if (frame.first >= 0) return {-1, -1};  // two frames
        frame = f;
      }
    }
    return frame;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

}  // namespace

std::unique_ptr<PostProcessor> parse_post_processor(const core::JsonReader& j) {
  switch (one_of(j, "type", {"TemplateProcessing", "BertProcessing", "RobertaProcessing", "ByteLevel", "Sequence"})) {
    case 0: return std::make_unique<Template>(j);
    case 1:
    case 2: return std::make_unique<Frame>(j);
    case 3: return std::make_unique<Unchanged>();
    default: return std::make_unique<Sequence>(j);
  }
}

}  // namespace roformer::data::hf
