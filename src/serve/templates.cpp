#include "serve/templates.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "policy/policy.hpp"
#include "util/json_parse.hpp"
#include "util/layer_kind.hpp"

namespace exg::serve {

Templates::Templates() {
  Template base;
  base.name = "base";
  by_name_["base"] = base;
  // What @e2b/code-interpreter's Sandbox.create() asks for by default.
  Template ci = base;
  ci.name = kCodeInterpreterTemplate;
  ci.code_interpreter = true;
  by_name_[ci.name] = ci;
}

Result<Templates> Templates::load(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail(Error::sys("--templates " + file));
  std::string text(std::istreambuf_iterator<char>(in), {});
  auto t = parse(text, file);
  if (!t) return t;
  for (const auto& [name, tp] : t->by_name_) {
    if (tp.policy.empty()) continue;
    const std::string at = file + ": templates." + name + ".policy";
    auto p = policy::load_policy_file(tp.policy);
    if (!p) return fail(Error::msg(at, p.error().message));
    const auto kind = *layer::parse_kind(tp.layer);
    const bool lets_sockets = p->network.allow_all_unix_sockets.value_or(false) || !p->network.allow_unix_sockets.empty();
    if (lets_sockets && (kind == layer::Kind::Gvisor || kind == layer::Kind::Microvm))
      return fail(Error::msg(at, "lets host Unix sockets through (network.allowUnixSockets or allowAllUnixSockets), "
                                 "which the " + tp.layer + " layer cannot carry a host's Unix socket to"));
  }
  return t;
}

Result<Templates> Templates::parse(const std::string& text, const std::string& where) {
  auto j = parse_json(text);
  auto bad = [&](const std::string& path, const std::string& why) { return fail(Error::msg(where + ": " + path, why)); };
  if (j.is_discarded()) return bad("", "not valid JSON");
  if (!j.is_object()) return bad("", "expected an object {\"templates\": {...}}");
  for (auto& [k, v] : j.items())
    if (k != "templates") return bad(k, "unknown key (expected \"templates\")");
  if (!j.contains("templates") || !j["templates"].is_object()) return bad("templates", "expected an object name -> template");
  Templates t;
  for (auto& [name, e] : j["templates"].items()) {
    std::string at = "templates." + name;
    if (name.empty() || name.size() > 64) return bad(at, "a name of 1..64 characters");
    for (char c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
        return bad(at, "names use only letters, digits, '-', '_' and '.'");
    if (!e.is_object()) return bad(at, "expected an object");
    Template tp;
    tp.name = name;
    // A file's own code-interpreter-v1 (another layer, say) is still the code interpreter, unless it says otherwise.
    tp.code_interpreter = name == kCodeInterpreterTemplate;
    for (auto& [k, v] : e.items()) {
      std::string kat = at + "." + k;
      if (k == "layer") {
        auto kind = v.is_string() ? layer::parse_kind(v.get<std::string>()) : std::nullopt;
        if (!kind) return bad(kat, "expected " + layer::names_text(layer::all_kinds()));
        tp.layer = std::string(layer::name(*kind));
      } else if (k == "rootfs" || k == "policy") {
        if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>()[0] != '/')
          return bad(kat, "expected an absolute path");
        (k == "rootfs" ? tp.rootfs : tp.policy) = v.get<std::string>();
      } else if (k == "allowDomains") {
        if (!v.is_array()) return bad(kat, "expected an array of domain names");
        for (auto& d : v) {
          if (!d.is_string() || d.get<std::string>().empty()) return bad(kat, "expected domain names (strings)");
          tp.allow_domains.push_back(d.get<std::string>());
        }
      } else if (k == "memoryMB") {
        if (!v.is_number_integer() || v.get<int64_t>() < 16 || v.get<int64_t>() > 1024 * 1024)
          return bad(kat, "expected an integer 16..1048576");
        tp.memory_mb = v.get<uint64_t>();
      } else if (k == "cpus") {
        if (!v.is_number() || v.get<double>() < 0.01 || v.get<double>() > 1024) return bad(kat, "expected a number 0.01..1024");
        tp.cpus = v.get<double>();
      } else if (k == "pids") {
        if (!v.is_number_integer() || v.get<int64_t>() < 8 || v.get<int64_t>() > 1000000) return bad(kat, "expected an integer 8..1000000");
        tp.pids = v.get<int>();
      } else if (k == "codeInterpreter") {
        if (!v.is_boolean()) return bad(kat, "expected true or false");
        tp.code_interpreter = v.get<bool>();
      } else if (k == "allowRoot") {
        if (!v.is_boolean()) return bad(kat, "expected true or false");
        tp.allow_root = v.get<bool>();
      } else {
        return bad(kat, "unknown key (layer, rootfs, policy, allowDomains, memoryMB, cpus, pids, allowRoot, codeInterpreter)");
      }
    }
    // Root only where the sandbox has a kernel of its own: gVisor's, or the microVM's guest.
    const auto kind = *layer::parse_kind(tp.layer);
    if (tp.allow_root && kind != layer::Kind::Gvisor && kind != layer::Kind::Microvm)
      return bad(at + ".allowRoot", "only the gvisor and microvm layers run E2B's root user (as uid 0 of their own "
                                    "kernel); the " + tp.layer + " layer runs commands on the host's kernel, where a sandbox gets no root");
    if (!tp.rootfs.empty() && kind != layer::Kind::Container && kind != layer::Kind::Gvisor)
      return bad(at + ".rootfs", "only the container and gvisor layers take a rootfs");
    t.by_name_[name] = tp;
  }
  return t;
}

const Template* Templates::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

}  // namespace exg::serve
