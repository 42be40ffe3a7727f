// The subset of JSON Schema (2020-12, as OpenAPI 3.1 uses it) that docs/openapi.yaml uses, read from the
// document with yaml-cpp: $ref, allOf, type, const, enum, required, properties, additionalProperties,
// pattern, minLength/maxLength (in code points, as JSON Schema counts), minimum/maximum and the formats
// date-time and uri-reference. Tests check responses against the document with it, and check that the
// requests they generate as valid (or as breaking one constraint) are what they claim to be. A keyword
// it does not know fails the validation, so the document cannot outgrow the checker unnoticed.
// Header-only, like http_test_client.hpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <boost/json/value.hpp>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace charge_outbox::testing {

// Unicode code points of UTF-8 text; a malformed sequence counts as one code point per byte.
inline std::size_t CodePointCount(std::string_view utf8) {
  std::size_t n = 0;
  for (const char c : utf8) {
    if ((static_cast<unsigned char>(c) & 0xC0u) != 0x80u) ++n;
  }
  return n;
}

inline std::string Utf8(char32_t cp) {
  std::string out;
  const auto u = static_cast<std::uint32_t>(cp);
  if (u < 0x80) {
    out += static_cast<char>(u);
  } else if (u < 0x800) {
    out += static_cast<char>(0xC0 | (u >> 6));
    out += static_cast<char>(0x80 | (u & 0x3F));
  } else if (u < 0x10000) {
    out += static_cast<char>(0xE0 | (u >> 12));
    out += static_cast<char>(0x80 | ((u >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (u & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (u >> 18));
    out += static_cast<char>(0x80 | ((u >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((u >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (u & 0x3F));
  }
  return out;
}

class OpenApiDocument {
 public:
  explicit OpenApiDocument(const std::string& path) : doc_(YAML::LoadFile(path)) {}

  const YAML::Node& root() const { return doc_; }

  // `node` with every "$ref": "#/..." followed (a chain of them too).
  // Reads through const nodes only: yaml-cpp's non-const operator[] may add the key it looks up.
  YAML::Node Resolve(const YAML::Node& start_node) const {
    YAML::Node node;
    node.reset(start_node);
    for (int hops = 0; node.IsMap() && std::as_const(node)["$ref"]; ++hops) {
      if (hops > 16) throw std::runtime_error("$ref cycle");
      const auto ref = std::as_const(node)["$ref"].as<std::string>();
      if (!ref.starts_with("#/")) throw std::runtime_error("only local $ref is supported: " + ref);
      YAML::Node at;
      at.reset(doc_);
      std::size_t start = 2;
      while (start <= ref.size()) {
        auto end = ref.find('/', start);
        if (end == std::string::npos) end = ref.size();
        const YAML::Node next = std::as_const(at)[ref.substr(start, end - start)];
        if (!next.IsDefined()) throw std::runtime_error("dangling $ref " + ref);
        at.reset(next);
        start = end + 1;
      }
      node.reset(at);
    }
    return node;
  }

  // Every violation of `schema` by `value`, each prefixed with where it is ("body.amount: ..."); empty
  // when it conforms.
  std::vector<std::string> Validate(const YAML::Node& schema, const boost::json::value& value,
                                    const std::string& where = "body") const {
    std::vector<std::string> errors;
    Check(schema, value, where, errors);
    return errors;
  }

  // A compiled `pattern` (ECMAScript syntax; the document's patterns are byte classes and literals).
  const std::regex& Pattern(const std::string& pattern) const {
    auto& slot = patterns_[pattern];
    if (!slot) slot = std::make_unique<std::regex>(pattern, std::regex::ECMAScript);
    return *slot;
  }

 private:
  static bool IsInteger(const boost::json::value& v) {
    if (v.is_int64() || v.is_uint64()) return true;
    return v.is_double() && std::isfinite(v.get_double()) && std::trunc(v.get_double()) == v.get_double();
  }

  static double Number(const boost::json::value& v) {
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    return v.get_double();
  }

  static bool HasType(const boost::json::value& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "integer") return IsInteger(v);
    if (type == "number") return v.is_number();
    if (type == "boolean") return v.is_bool();
    if (type == "null") return v.is_null();
    throw std::runtime_error("unknown JSON Schema type " + type);
  }

  // A YAML scalar of the document equals a JSON value: strings as strings, numbers by value.
  static bool ScalarEquals(const YAML::Node& expected, const boost::json::value& v) {
    const auto text = expected.as<std::string>();
    if (v.is_string()) return v.get_string() == text;
    if (v.is_bool()) return text == (v.get_bool() ? "true" : "false");
    if (v.is_number()) {
      try {
        return expected.as<double>() == Number(v);
      } catch (const YAML::Exception&) {
        return false;
      }
    }
    return v.is_null() && (text == "null" || text == "~");
  }

  static bool IsDateTime(std::string_view s) {
    static const std::regex kRfc3339(
        R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$)");
    return std::regex_match(s.begin(), s.end(), kRfc3339);
  }

  // RFC 3986 relative-ref or URI: no spaces, controls or non-ASCII, and well-formed percent escapes.
  static bool IsUriReference(std::string_view s) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c <= 0x20 || c >= 0x7F || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' || c == '`' ||
          c == '{' || c == '|' || c == '}') {
        return false;
      }
      if (c == '%' && (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
                       !std::isxdigit(static_cast<unsigned char>(s[i + 2])))) {
        return false;
      }
    }
    return true;
  }

  void Check(const YAML::Node& raw, const boost::json::value& v, const std::string& where,
             std::vector<std::string>& errors) const {
    static const std::set<std::string> kKnown = {
        "$ref",      "allOf",     "type",      "const",   "enum",    "required", "properties", "additionalProperties",
        "pattern",   "minLength", "maxLength", "minimum", "maximum", "format",   "description"};
    const auto schema = Resolve(raw);
    if (!schema.IsMap()) throw std::runtime_error(where + ": schema is not a map");
    for (const auto& keyword : schema) {
      const auto name = keyword.first.as<std::string>();
      if (!kKnown.contains(name)) throw std::runtime_error(where + ": the checker does not know keyword " + name);
    }
    const auto fail = [&](const std::string& what) { errors.push_back(where + ": " + what); };

    if (const auto all = schema["allOf"]) {
      for (const auto& part : all) Check(part, v, where, errors);
    }
    if (const auto type = schema["type"]) {
      bool ok = false;
      if (type.IsSequence()) {
        for (const auto& t : type) ok = ok || HasType(v, t.as<std::string>());
      } else {
        ok = HasType(v, type.as<std::string>());
      }
      if (!ok) {
        fail("is not of type " + YAML::Dump(type));
        return;  // the other keywords would only repeat it
      }
    }
    if (const auto c = schema["const"]; c && !ScalarEquals(c, v)) fail("is not " + c.as<std::string>());
    if (const auto e = schema["enum"]) {
      bool found = false;
      for (const auto& item : e) found = found || ScalarEquals(item, v);
      if (!found) fail("is not one of the enum");
    }
    if (v.is_string()) {
      const std::string_view s = v.get_string();
      const auto length = CodePointCount(s);
      if (const auto m = schema["minLength"]; m && length < m.as<std::size_t>()) fail("is shorter than minLength");
      if (const auto m = schema["maxLength"]; m && length > m.as<std::size_t>()) fail("is longer than maxLength");
      if (const auto p = schema["pattern"]; p && !std::regex_search(s.begin(), s.end(), Pattern(p.as<std::string>()))) {
        fail("does not match " + p.as<std::string>());
      }
      if (const auto f = schema["format"]) {
        const auto format = f.as<std::string>();
        if (format == "date-time" && !IsDateTime(s)) fail("is not a date-time");
        if (format == "uri-reference" && !IsUriReference(s)) fail("is not a uri-reference");
      }
    }
    if (v.is_number()) {
      if (const auto m = schema["minimum"]; m && Number(v) < m.as<double>()) fail("is below minimum");
      if (const auto m = schema["maximum"]; m && Number(v) > m.as<double>()) fail("is above maximum");
    }
    if (v.is_object()) {
      const auto& o = v.get_object();
      if (const auto required = schema["required"]) {
        for (const auto& r : required) {
          if (!o.contains(r.as<std::string>())) fail("lacks required " + r.as<std::string>());
        }
      }
      const auto properties = schema["properties"];
      for (const auto& member : o) {
        const std::string key(member.key());
        if (properties && properties[key]) {
          Check(properties[key], member.value(), where + "." + key, errors);
        } else if (const auto extra = schema["additionalProperties"]) {
          if (extra.IsScalar() && !extra.as<bool>()) fail("has a property the schema does not allow: " + key);
          if (extra.IsMap()) Check(extra, member.value(), where + "." + key, errors);
        }
      }
    }
  }

  YAML::Node doc_;
  mutable std::map<std::string, std::unique_ptr<std::regex>> patterns_;
};

}  // namespace charge_outbox::testing
