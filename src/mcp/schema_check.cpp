#include "mcp/schema_check.hpp"

#include <cmath>

namespace exg::mcp {

namespace {

// A finite double with no fractional part. Every double of magnitude 2^53 or
// more is whole; below that, the round trip through int64_t drops any fraction.
// (Plain arithmetic, not std::floor: libm is not linked, see CMakeLists.txt.)
bool is_whole(double d) {
  if (std::fabs(d) >= 9007199254740992.0) return true;
  return static_cast<double>(static_cast<int64_t>(d)) == d;
}

bool has_type(const nlohmann::json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                                       is_whole(v.get<double>()));
  return false;
}

std::string type_text(const nlohmann::json& t) {
  if (t.is_string()) return (t == "object" || t == "array" || t == "integer") ? "an " + t.get<std::string>() : "a " + t.get<std::string>();
  std::string s;
  for (size_t i = 0; i < t.size(); ++i) s += (i ? " or " : "") + type_text(t[i]);
  return s;
}

// a < b, exact when both are integers (through double, 2^63 would pass as equal to INT64_MAX).
bool less(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number_integer() && b.is_number_integer()) {
    bool a_neg = !a.is_number_unsigned() && a.get<int64_t>() < 0, b_neg = !b.is_number_unsigned() && b.get<int64_t>() < 0;
    if (a_neg != b_neg) return a_neg;
    return a_neg ? a.get<int64_t>() < b.get<int64_t>() : a.get<uint64_t>() < b.get<uint64_t>();
  }
  return a.get<double>() < b.get<double>();
}

}  // namespace

std::optional<std::string> schema_error(const nlohmann::json& schema, const nlohmann::json& v, const std::string& where) {
  if (auto t = schema.find("type"); t != schema.end()) {
    bool ok = false;
    if (t->is_string()) ok = has_type(v, *t);
    else
      for (auto& one : *t) ok = ok || has_type(v, one);
    if (!ok) return where + ": expected " + type_text(*t);
  }
  if (auto e = schema.find("enum"); e != schema.end()) {
    bool ok = false;
    std::string list;
    for (auto& x : *e) {
      ok = ok || x == v;
      list += (list.empty() ? "" : ", ") + x.dump();
    }
    if (!ok) return where + ": expected one of " + list;
  }
  if (v.is_number()) {
    if (auto m = schema.find("minimum"); m != schema.end() && less(v, *m)) return where + ": at least " + m->dump();
    if (auto m = schema.find("maximum"); m != schema.end() && less(*m, v)) return where + ": at most " + m->dump();
  }
  if (v.is_string()) {
    size_t n = v.get_ref<const std::string&>().size();
    if (auto m = schema.find("minLength"); m != schema.end() && n < m->get<size_t>())
      return where + (m->get<size_t>() == 1 ? ": must not be empty" : ": at least " + m->dump() + " characters");
    if (auto m = schema.find("maxLength"); m != schema.end() && n > m->get<size_t>()) return where + ": longer than " + m->dump() + " bytes";
    if (v.get_ref<const std::string&>().find('\0') != std::string::npos) return where + ": holds a NUL character";
  }
  if (v.is_array()) {
    if (auto m = schema.find("minItems"); m != schema.end() && v.size() < m->get<size_t>())
      return where + ": at least " + m->dump() + (m->get<size_t>() == 1 ? " item" : " items");
    if (auto m = schema.find("maxItems"); m != schema.end() && v.size() > m->get<size_t>()) return where + ": more than " + m->dump() + " items";
    if (auto items = schema.find("items"); items != schema.end())
      for (size_t i = 0; i < v.size(); ++i)
        if (auto e = schema_error(*items, v[i], where + "[" + std::to_string(i) + "]")) return e;
  }
  if (v.is_object()) {
    const auto props = schema.find("properties");
    if (auto req = schema.find("required"); req != schema.end())
      for (auto& r : *req)
        if (!v.contains(r.get<std::string>())) return where + "." + r.get<std::string>() + ": missing (required)";
    auto extra = schema.find("additionalProperties");
    for (auto& [k, x] : v.items()) {
      std::string at = where + "." + k;
      if (props != schema.end() && props->contains(k)) {
        if (auto e = schema_error((*props)[k], x, at)) return e;
      } else if (extra != schema.end() && extra->is_object()) {
        if (auto e = schema_error(*extra, x, at)) return e;
      } else if (extra != schema.end() && *extra == false) {
        std::string known;
        if (props != schema.end())
          for (auto& [pk, pv] : props->items()) known += (known.empty() ? "" : ", ") + pk;
        return at + ": unknown argument" + (known.empty() ? " (this tool takes none)" : " (expected: " + known + ")");
      }
    }
  }
  return std::nullopt;
}

}  // namespace exg::mcp
