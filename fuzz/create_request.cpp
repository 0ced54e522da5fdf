// The control plane's request bodies (src/serve/control_requests.cpp), what a
// tenant's client sends: POST /sandboxes (the sandbox to create), PUT
// /sandboxes/{id}/network, and the timeout bodies. Every input is tried as
// each. Any body gives a request or one error (400, or 404 naming the
// template), never both and never a throw; an accepted request keeps every
// bound (timeout, sizes, counts, header rules only to reachable hosts, never
// a header the proxy owns, no NUL where a C string goes); and an accepted
// request written back as the SDK would send it is accepted again as the same.
#include <algorithm>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "serve/control_requests.hpp"

using namespace exg::serve;

namespace {

constexpr int64_t kMaxTimeout = 3600;

const Templates& templates() {
  static const Templates t = *Templates::parse(R"({"templates": {
      "web": {"allowDomains": ["api.example.com", "*.Example.org"]},
      "pinned": {"policy": "/etc/exguardian/pinned.json", "allowDomains": ["pinned.example"]},
      "box": {"layer": "container", "rootfs": "/srv/rootfs", "memoryMB": 1024, "cpus": 2}}})",
                                               "fuzz-templates.json");
  return t;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The rule's host may be reached: named exactly, or under a *.domain entry (an oracle written from the API's words).
bool reachable(const std::string& host, const std::vector<std::string>& allowed) {
  std::string bare = host.starts_with("*.") ? host.substr(2) : host;
  for (const auto& a : allowed) {
    std::string l = lower(a);
    if (l == host) return true;
    if (l.starts_with("*.") && bare.size() > l.size() - 1 && bare.ends_with(l.substr(1))) return true;
  }
  return false;
}

void check_error(const BodyError& e) {
  FUZZ_CHECK(!e.message.empty(), "an error says what is wrong");
  FUZZ_CHECK(e.status == http::status::bad_request || e.status == http::status::not_found, "a refused body is a 400 or a 404");
  if (e.status == http::status::not_found) FUZZ_CHECK(e.message.starts_with("template "), "a 404 names the template");
}

void check_hosts(const std::vector<std::string>& list, bool allow) {
  FUZZ_CHECK(list.size() <= kMaxHostList, "at most 256 hosts in a list");
  for (const auto& h : list) {
    FUZZ_CHECK(!h.empty() && h.size() <= kMaxHostEntry, "a host entry is 1..253 bytes");
    if (allow) FUZZ_CHECK(h.find('/') == std::string::npos, "allowOut names hosts, never ranges");
    else FUZZ_CHECK(h != "0.0.0.0/0", "denyOut's 'everything' is the default, not an entry");
  }
}

using Rules = std::vector<std::tuple<std::string, std::string, std::string>>;
Rules sorted_rules(const std::vector<HeaderRule>& rules) {
  Rules out;
  for (const auto& r : rules) out.emplace_back(r.host, lower(r.header), r.value);
  std::sort(out.begin(), out.end());
  return out;
}

void check_create(const CreateRequest& cr, bool again);

// What the SDK would send for this request.
nlohmann::json body_of(const CreateRequest& cr) {
  nlohmann::json b = {{"templateID", cr.tmpl.name}, {"timeout", cr.timeout.count()}, {"metadata", cr.metadata}, {"envVars", cr.env_vars}};
  nlohmann::json net = nlohmann::json::object();
  if (!cr.allow_out.empty()) net["allowOut"] = cr.allow_out;
  if (!cr.deny_out.empty()) net["denyOut"] = cr.deny_out;
  if (!cr.header_rules.empty()) {
    nlohmann::json rules = nlohmann::json::object();
    for (const auto& r : cr.header_rules) rules[r.host]["transform"]["headers"][r.header] = r.value;
    for (auto& [host, rule] : rules.items()) rule = nlohmann::json::array({rule});
    net["rules"] = rules;
  }
  b["network"] = net;
  return b;
}

void check_create(const CreateRequest& cr, bool again) {
  const Template* t = templates().find(cr.tmpl.name);
  FUZZ_CHECK(t != nullptr && t->policy == cr.tmpl.policy, "the request's template is one of the server's");
  FUZZ_CHECK(cr.timeout.count() >= 1 && cr.timeout.count() <= kMaxTimeout, "the timeout is within the tenant's limit");
  FUZZ_CHECK(cr.tenant.empty(), "the tenant is the caller's to set");
  FUZZ_CHECK(cr.metadata.is_object() && cr.metadata.size() <= kMaxMapEntries, "metadata is an object of at most 256 entries");
  for (auto& [k, v] : cr.metadata.items())
    FUZZ_CHECK(k.size() <= kMaxMapKey && v.is_string() && v.get_ref<const std::string&>().size() <= kMaxMapValue,
               "metadata maps short keys to strings");
  FUZZ_CHECK(cr.env_vars.size() <= kMaxMapEntries, "at most 256 envVars");
  for (const auto& [k, v] : cr.env_vars) {
    FUZZ_CHECK(!k.empty() && k.size() <= kMaxMapKey && !std::isdigit(static_cast<unsigned char>(k[0])), "an envVar has a name");
    FUZZ_CHECK(std::all_of(k.begin(), k.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }),
               "an envVar's name is [A-Za-z_][A-Za-z0-9_]*");
    FUZZ_CHECK(v.size() <= kMaxMapValue && v.find('\0') == std::string::npos, "an envVar's value is a C string of at most 64 KiB");
  }
  check_hosts(cr.allow_out, true);
  check_hosts(cr.deny_out, false);
  FUZZ_CHECK(cr.header_rules.size() <= kMaxRuleHeaders, "at most 256 rule headers");
  if (!cr.header_rules.empty()) FUZZ_CHECK(cr.tmpl.policy.empty(), "no rules for a template with its own policy file");
  std::vector<std::string> allowed = cr.allow_out;
  allowed.insert(allowed.end(), t->allow_domains.begin(), t->allow_domains.end());
  Rules sorted = sorted_rules(cr.header_rules);
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto& [host, header, value] = sorted[i];
    FUZZ_CHECK(host == lower(host) && reachable(host, allowed), "a rule's header goes only to a host the sandbox may reach");
    FUZZ_CHECK(!header.empty() && header.size() <= 256 && !proxy_owned_header(header), "a rule sets a header the proxy leaves alone");
    FUZZ_CHECK(value.size() >= kMinRuleValue && value.size() <= kMaxRuleValue, "a rule's value is 4..8192 bytes");
    FUZZ_CHECK(value.find_first_of(std::string("\r\n\0", 3)) == std::string::npos, "a rule's value is one line without NUL");
    if (i > 0) FUZZ_CHECK(std::get<0>(sorted[i - 1]) != host || std::get<1>(sorted[i - 1]) != header, "one value per host and header");
  }
  if (again) return;
  // Round trip: the request as a body is accepted as the same request.
  auto back = parse_create_body(body_of(cr).dump(), templates(), kMaxTimeout);
  if (!back) std::fprintf(stderr, "refused again: %s\n", back.error().message.c_str());
  FUZZ_CHECK(back.has_value(), "an accepted request, sent again, is accepted");
  check_create(*back, true);
  FUZZ_CHECK(back->tmpl.name == cr.tmpl.name && back->timeout == cr.timeout && back->metadata == cr.metadata &&
                 back->env_vars == cr.env_vars && back->allow_out == cr.allow_out && back->deny_out == cr.deny_out &&
                 sorted_rules(back->header_rules) == sorted,
             "an accepted request, sent again, is the same request");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);

  auto cr = parse_create_body(body, templates(), kMaxTimeout);
  if (cr) check_create(*cr, false);
  else check_error(cr.error());

  auto net = parse_network_update(body);
  if (net) {
    check_hosts(net->allow_out, true);
    check_hosts(net->deny_out, false);
    nlohmann::json again = {{"allowOut", net->allow_out}, {"denyOut", net->deny_out}};
    auto back = parse_network_update(again.dump());
    FUZZ_CHECK(back && back->allow_out == net->allow_out && back->deny_out == net->deny_out,
               "an accepted network update, sent again, is the same update");
  } else {
    check_error(net.error());
    FUZZ_CHECK(net.error().status == http::status::bad_request, "a refused network update is a 400");
  }

  for (auto [key, required] : {std::pair{"timeout", true}, std::pair{"duration", false}, std::pair{"timeout", false}}) {
    auto t = parse_timeout_body(body, key, required, kMaxTimeout);
    if (!t) {
      check_error(t.error());
      continue;
    }
    FUZZ_CHECK(t->has_value() || !required, "a required timeout is there");
    if (*t) FUZZ_CHECK(**t >= 1 && **t <= kMaxTimeout, "a timeout is 1..the tenant's limit");
    if (body.empty()) FUZZ_CHECK(!required && !t->has_value(), "an empty body is {} only where allowed");
  }
  return 0;
}
