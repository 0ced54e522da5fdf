// The control plane: E2B's REST API for sandboxes (spec/openapi.yml), as the
// SDK calls it, each call authenticated by a tenant's X-API-KEY. Another
// tenant's sandbox is answered exactly like an unknown one (404).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <sstream>

#include "sandbox/refusals.hpp"
#include "serve/control_requests.hpp"
#include "serve/service.hpp"
#include "util/json_parse.hpp"
#include "util/unique_fd.hpp"

namespace exg::serve {

namespace {

const char* state_name(Sandbox::State s) {
  switch (s) {
    case Sandbox::State::Paused: return "paused";
    case Sandbox::State::Starting: return "starting";
    case Sandbox::State::Ending: return "killing";
    default: return "running";
  }
}

// A `since` offset of a sandbox's audit log, from the query's `name` (absent: 0). It must be one
// the refusals answers gave (0, or the start of a line within the log): else the message why not.
BodyResult<uint64_t> audit_since(const Sandbox& sb, const std::string& query, const char* name) {
  uint64_t since = 0;
  if (auto v = query_param(query, name)) {
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(v->c_str(), &end, 10);
    if (v->empty() || *end || errno || !std::isdigit(static_cast<unsigned char>((*v)[0])))
      return std::unexpected(BodyError{http::status::bad_request,
                                       std::string(name) + ": expected an offset (a whole number of bytes) from an earlier answer's next"});
    since = n;
  }
  uint64_t size = sandbox::audit_offset(sb.audit_log);
  bool at_line = since == 0;
  if (since > 0 && since <= size) {
    UniqueFd fd(::open(sb.audit_log.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    char c = 0;
    at_line = fd && ::pread(fd.get(), &c, 1, static_cast<off_t>(since - 1)) == 1 && c == '\n';
  }
  if (!at_line)
    return std::unexpected(BodyError{http::status::bad_request, std::string(name) + ": " + std::to_string(since) +
                                                                    " is not a line boundary of this sandbox's audit log (" + std::to_string(size) +
                                                                    " bytes): use an earlier answer's next"});
  return since;
}

// {refusals, next}: the refusals after `since` and where the next window starts.
nlohmann::json refusals_answer(const Sandbox& sb, uint64_t since) {
  uint64_t next = since;
  nlohmann::json refused = sandbox::refusals_since(sb.audit_log, since, &next);
  return {{"refusals", refused}, {"next", next}};
}


}  // namespace

// What create, connect and resume answer (E2B's Sandbox): the envd access
// token only when the sandbox has one (secure).
nlohmann::json Service::created_json(const Sandbox& sb) const {
  nlohmann::json j = {{"templateID", sb.tmpl.name}, {"sandboxID", sb.id}, {"clientID", "exguardian"}, {"envdVersion", kEnvdVersion}};
  if (!opt_.domain.empty()) j["domain"] = opt_.domain;  // the SDK's getHost(port): PORT-ID.DOMAIN
  if (!sb.access_token.empty()) j["envdAccessToken"] = sb.access_token;
  if (!sb.traffic_token.empty()) j["trafficAccessToken"] = sb.traffic_token;
  return j;
}

nlohmann::json Service::sandbox_json(const Sandbox& sb, bool detail) const {
  nlohmann::json j = {
      {"templateID", sb.tmpl.name},
      {"sandboxID", sb.id},
      {"clientID", "exguardian"},
      {"startedAt", rpc::rfc3339(sb.started_at)},
      {"endAt", rpc::rfc3339(sb.end_at)},
      {"cpuCount", static_cast<int>(std::ceil(sb.tmpl.cpus))},
      {"memoryMB", sb.tmpl.memory_mb},
      {"diskSizeMB", 0},
      {"metadata", sb.metadata},
      {"state", state_name(sb.state)},
      {"envdVersion", kEnvdVersion},
      {"volumeMounts", nlohmann::json::array()},
  };
  if (!opt_.domain.empty()) j["domain"] = opt_.domain;
  if (detail) {
    if (!sb.access_token.empty()) j["envdAccessToken"] = sb.access_token;  // secure false: none (E2B omits it too)
    j["allowInternetAccess"] = !sb.allow_out.empty() || !sb.tmpl.allow_domains.empty();
    j["network"] = {{"allowOut", sb.allow_out}, {"denyOut", sb.deny_out}};
    if (!sb.rules_shown.empty()) j["network"]["rules"] = sb.rules_shown;
    if (!sb.mask_request_host.empty()) j["network"]["maskRequestHost"] = sb.mask_request_host;
    j["lifecycle"] = {{"onTimeout", sb.auto_pause ? "pause" : "kill"}, {"autoResume", sb.auto_resume}};
    j["layer"] = sb.tmpl.layer;  // not E2B's: the isolation layer (exguardian mcp --server reports it)
  }
  return j;
}

std::optional<Response> Service::check_quota(const Tenant& t, const Template& tmpl) const {
  auto mine = registry_.of_tenant(t.id);
  uint64_t mem = tmpl.memory_mb;
  double cpus = tmpl.cpus;
  for (auto& sb : mine) mem += sb->tmpl.memory_mb, cpus += sb->tmpl.cpus;
  auto refuse = [&](const std::string& why) { return api_error(http::status::too_many_requests, why); };
  if (mine.size() + 1 > t.quota.max_sandboxes)
    return refuse("quota: tenant " + t.id + " may hold " + std::to_string(t.quota.max_sandboxes) + " sandboxes at once");
  if (mem > t.quota.max_memory_mb)
    return refuse("quota: tenant " + t.id + " may use " + std::to_string(t.quota.max_memory_mb) + " MB of sandbox memory at once");
  std::ostringstream cpus_os;
  cpus_os << t.quota.max_cpus;  // 3, 1.5: as the tenants file says it
  const std::string cpus_text = cpus_os.str();
  if (cpus > t.quota.max_cpus + 1e-9)
    return refuse("quota: tenant " + t.id + " may use " + cpus_text + " CPUs at once");
  if (registry_.count() + 1 > opt_.max_sandboxes)
    return refuse("quota: this server holds at most " + std::to_string(opt_.max_sandboxes) + " sandboxes");
  return std::nullopt;
}

void Service::get_sandbox(Call& c) {
  reply(c.ex, c.route.label, json_response(http::status::ok, sandbox_json(*c.sb, true).dump()));
}

void Service::kill_sandbox(Call& c) {
  const std::string& route = c.route.label;
  ExchangePtr ex = c.ex;
  if (!query_param(c.query, "refusals_since"))
    return registry_.kill(c.sb, [this, ex, route]() mutable { reply(ex, route, Response{http::status::no_content, 11}); });
  // Not E2B's: ?refusals_since=N answers 200 with the refusals of its last moments too (the
  // planted files its end quarantined), read before its audit log goes with it.
  auto since = audit_since(*c.sb, c.query, "refusals_since");
  if (!since) return reply(ex, route, api_error(since.error().status, since.error().message));
  auto last = std::make_shared<nlohmann::json>(nlohmann::json{{"refusals", nlohmann::json::array()}, {"next", *since}});
  c.sb->before_removal.push_back([last, from = *since](const Sandbox& gone) { *last = refusals_answer(gone, from); });
  registry_.kill(c.sb, [this, ex, route, last]() mutable { reply(ex, route, json_response(http::status::ok, last->dump())); });
}

void Service::set_timeout(Call& c) { new_timeout(c, true); }
void Service::refresh_timeout(Call& c) { new_timeout(c, false); }

// /timeout {timeout} (required) and /refreshes {duration}: a new end, from now.
void Service::new_timeout(Call& c, bool set) {
  auto secs = parse_timeout_body(c.req.body(), set ? "timeout" : "duration", set, c.tenant->quota.max_timeout_s);
  if (!secs) return reply(c.ex, c.route.label, api_error(secs.error().status, secs.error().message));
  registry_.set_timeout(c.sb, std::chrono::seconds(secs->value_or(60)));
  reply(c.ex, c.route.label, Response{http::status::no_content, 11});
}

std::string Service::pause_refusal(Sandbox& sb) const {
  const Tenant* t = tenants_.find(sb.tenant);
  if (!t) return "";
  const uint64_t limit = t->quota.max_paused_disk_mb << 20;
  uint64_t others = 0;
  for (const auto& o : registry_.of_tenant(sb.tenant))
    if (o.get() != &sb && o->state == Sandbox::State::Paused) others += o->paused_disk_bytes;
  // Its home on the host: under its directory while it has a supervisor (sb.home is the path inside), kept apart when dormant.
  const std::string host_home = sb.dormant || sb.host_workspace ? sb.home : sb.dir + "/home";
  uint64_t mine = disk_bytes(host_home, limit - std::min(others, limit));
  if (others + mine > limit)
    return "pause: sandbox " + sb.id + "'s files (" + std::to_string(mine >> 20) + " MiB) and the tenant's other paused sandboxes (" +
           std::to_string(others >> 20) + " MiB) are over its quota pausedDiskMB " + std::to_string(t->quota.max_paused_disk_mb) +
           ": kill or resume one, or delete files first";
  sb.paused_disk_bytes = mine;
  return "";
}

void Service::pause_sandbox(Call& c) {
  const std::string& route = c.route.label;
  const std::string& id = c.sb->id;
  auto keep_memory = parse_pause_body(c.req.body());
  if (!keep_memory) return reply(c.ex, route, api_error(keep_memory.error().status, keep_memory.error().message));
  if (c.sb->state == Sandbox::State::Paused) return reply(c.ex, route, api_error(http::status::conflict, "sandbox " + id + " is already paused"));
  if (!opt_.cgroup_limits && *keep_memory)  // (a filesystem-only pause freezes nothing)
    return reply(c.ex, route, api_error(http::status::conflict, "pause: this server runs sandboxes without cgroups (--no-cgroup-limits): it cannot freeze them"));
  if (c.sb->pausing) return reply(c.ex, route, api_error(http::status::conflict, "sandbox " + id + " is being paused already"));
  if (!*keep_memory && !c.sb->rules_shown.empty())
    return reply(c.ex, route, api_error(http::status::conflict, "pause {memory: false}: sandbox " + id + " has network.rules, whose "
                                                                "values are never written to disk: its files only cannot be kept"));
  if (auto why = pause_refusal(*c.sb); !why.empty()) {
    ++metrics_.quota_refusals;
    return reply(c.ex, route, api_error(http::status::too_many_requests, why));
  }
  registry_.pause(c.sb, [this, ex = c.ex, route](Result<void> r) mutable {
    if (!r) return reply(ex, route, api_error(http::status::internal_server_error, r.error().str()));
    reply(ex, route, Response{http::status::no_content, 11});
  }, *keep_memory);
}

void Service::resume_sandbox(Call& c) { resume_or_connect(c, false); }
void Service::connect_sandbox(Call& c) { resume_or_connect(c, true); }

// /resume thaws a paused sandbox (409 when it is not); /connect thaws it if
// paused (201) and answers a running one too (200). {timeout} optional.
void Service::resume_or_connect(Call& c, bool connect) {
  const std::string& route = c.route.label;
  auto& sb = c.sb;
  auto secs = parse_timeout_body(c.req.body(), "timeout", false, c.tenant->quota.max_timeout_s);
  if (!secs) return reply(c.ex, route, api_error(secs.error().status, secs.error().message));
  if (sb->dormant) return revive_sandbox(c, secs->value_or(std::min<int64_t>(sb->timeout.count(), c.tenant->quota.max_timeout_s)));
  if (sb->pausing)
    return reply(c.ex, route, api_error(http::status::conflict, "sandbox " + sb->id + " is being paused: " + (connect ? "connect" : "resume") +
                                                                " it once the pause has answered"));
  bool was_paused = sb->state == Sandbox::State::Paused;
  if (!connect && !was_paused) return reply(c.ex, route, api_error(http::status::conflict, "sandbox " + sb->id + " is not paused"));
  // (a resume starts the create's timeout again; one given here replaces it)
  if (was_paused)
    if (auto r = registry_.resume(sb); !r) return reply(c.ex, route, api_error(http::status::internal_server_error, r.error().str()));
  if (*secs) {
    // connect only ever extends the life of a running sandbox (E2B's rule).
    auto want = std::chrono::system_clock::now() + std::chrono::seconds(**secs);
    if (!connect || was_paused || want > sb->end_at) registry_.set_timeout(sb, std::chrono::seconds(**secs));
  }
  reply(c.ex, route, json_response(was_paused ? http::status::created : http::status::ok, created_json(*sb).dump()));
}

// A sandbox paused before the server restarted (kept_pauses.hpp): started again
// under its id and tokens from its kept home, swept; its processes are not
// back (the answer cannot say so in E2B's shape: docs/serve.md does).
void Service::revive_sandbox(Call& c, int64_t timeout_s) {
  const std::string route = c.route.label;
  ExchangePtr ex = c.ex;
  if (c.sb->reviving) return reply(ex, route, api_error(http::status::conflict, "sandbox " + c.sb->id + " is being resumed already"));
  CreateRequest cr;
  cr.timeout = std::chrono::seconds(timeout_s);
  cr.tenant_secrets = c.tenant->secrets;
  cr.tenant_secret_hosts = c.tenant->secret_hosts;
  registry_.revive(c.sb, cr, [this, ex, route](Registry::Started started) mutable {
    if (!started)
      return reply(ex, route, api_error(http::status::internal_server_error, "the paused sandbox did not start again: " + started.error().message));
    // (a code-interpreter template's sandbox is up with its interpreter: sandbox_registry.hpp)
    reply(ex, route, json_response(http::status::created, created_json(**started).dump()));
  });
}

void Service::sandbox_metrics(Call& c) {
  const Sandbox& sb = *c.sb;
  // start/end (unix seconds): E2B keeps a history; here the one sample is now's,
  // answered when the range holds now (end 10 s late at most: the client took
  // its end before the request went out), else none.
  auto now = std::chrono::system_clock::now();
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  std::optional<int64_t> range[2];
  const char* names[2] = {"start", "end"};
  for (int i = 0; i < 2; ++i)
    if (auto v = query_param(c.query, names[i])) {
      char* end = nullptr;
      long long n = std::strtoll(v->c_str(), &end, 10);
      if (v->empty() || *end || n < 0) return reply(c.ex, c.route.label, api_error(http::status::bad_request, std::string(names[i]) + ": expected unix seconds"));
      range[i] = n;
    }
  if (range[0] && range[1] && *range[0] > *range[1])
    return reply(c.ex, c.route.label, api_error(http::status::bad_request, "start: after end"));
  if ((range[0] && *range[0] > now_s) || (range[1] && *range[1] + 10 < now_s))
    return reply(c.ex, c.route.label, json_response(http::status::ok, "[]"));
  auto u = registry_.usage(c.sb);
  nlohmann::json metric = {
      {"timestamp", rpc::rfc3339(now)},
      {"timestampUnix", now_s},
      {"cpuCount", static_cast<int>(std::ceil(sb.tmpl.cpus))},
      {"cpuUsedPct", u.cpu_pct},
      {"memUsed", u.mem_bytes},
      {"memTotal", sb.tmpl.memory_mb * 1024 * 1024},
      {"memCache", u.mem_cache},
      {"diskUsed", 0},
      {"diskTotal", 0},
  };
  reply(c.ex, c.route.label, json_response(http::status::ok, nlohmann::json::array({metric}).dump()));
}

// E2B's SandboxNetworkUpdateConfig: the egress rules replaced whole (an
// omitted list is cleared), checked as at create, put in force by the
// supervisor's set_network (docs/agent-protocol.md).
void Service::update_network(Call& c) {
  const std::string route = c.route.label;
  ExchangePtr ex = c.ex;
  std::shared_ptr<Sandbox> sb = c.sb;
  auto update = parse_network_update(c.req.body());
  if (!update) return reply(ex, route, api_error(update.error().status, update.error().message));
  std::vector<std::string> allow_out = std::move(update->allow_out), deny_out = std::move(update->deny_out);
  if (sb->state != Sandbox::State::Running)
    return reply(ex, route, api_error(http::status::conflict, "sandbox " + sb->id + " is not running"));
  if (!sb->tmpl.policy.empty())
    return reply(ex, route, api_error(http::status::conflict, "the template " + sb->tmpl.name + " has its own policy file: its rules are fixed"));
  if (!sb->agent || !sb->agent->open())
    return reply(ex, route, api_error(http::status::internal_server_error, "the sandbox's supervisor is not reachable"));
  // The template's own domains stay: a sandbox never has less than its template gives.
  std::vector<std::string> allow = sb->tmpl.allow_domains;
  allow.insert(allow.end(), allow_out.begin(), allow_out.end());
  sb->agent->call(agent::request::set_network(allow, deny_out), {}, [this, ex, route, sb, allow_out, deny_out](const agent::Frame& r) mutable {
    std::string e = reply_errno(r);
    if (e.empty()) {
      sb->allow_out = allow_out;
      sb->deny_out = deny_out;
      return reply(ex, route, Response{http::status::no_content, 11});
    }
    std::string text = r.header.value("message", reply_error_text(r));
    // The supervisor names its own fields ("set_network: allow X: why"); the client wrote allowOut / denyOut.
    for (auto [ours, theirs] : {std::pair{"set_network: allow: ", "allowOut: "}, std::pair{"set_network: allow ", "allowOut: "},
                                std::pair{"set_network: deny ", "denyOut: "}})
      if (text.starts_with(ours)) text = theirs + text.substr(std::string(ours).size());
    if (e == "EINVAL") return reply(ex, route, api_error(http::status::bad_request, text));
    if (e == "ENOTSUP") return reply(ex, route, api_error(http::status::conflict, text + "; create it with network.allowOut"));
    reply(ex, route, api_error(http::status::internal_server_error, text));
  });
}

void Service::create_sandbox(Call& c) {
  const std::string route = c.route.label;
  ExchangePtr ex = c.ex;
  const Tenant& t = *c.tenant;
  // A templateID that names one of the tenant's snapshots: its template, and its home copied in (snapshots.hpp).
  std::string body = c.req.body(), seed;
  if (auto peek = parse_json(body); peek.is_object() && peek.contains("templateID") && peek["templateID"].is_string())
    if (const SnapshotRecord* s = registry_.snapshots().find(t.id, peek["templateID"].get<std::string>())) {
      if (!templates_.find(s->template_name))
        return reply(ex, route, api_error(http::status::conflict, "snapshot " + s->id + ": its template " + s->template_name +
                                                                      " is not served by this server any more"));
      peek["templateID"] = s->template_name;
      body = peek.dump();
      seed = registry_.snapshots().dir_of(s->id) + "/home";
    }
  auto cr = parse_create_body(body, templates_, t.quota.max_timeout_s);
  if (!cr) return reply(ex, route, api_error(cr.error().status, cr.error().message));
  if (cr->auto_pause && !opt_.cgroup_limits)
    return reply(ex, route, api_error(http::status::bad_request, "autoPause: this server runs sandboxes without cgroups "
                                                                 "(--no-cgroup-limits) and cannot pause them"));
  cr->seed_home = seed;
  cr->tenant = t.id;
  cr->tenant_secrets = t.secrets;
  cr->tenant_secret_hosts = t.secret_hosts;
  if (auto q = check_quota(t, cr->tmpl)) {
    ++metrics_.quota_refusals;
    return reply(ex, route, std::move(*q));
  }
  registry_.create(*cr, [this, ex, route](Registry::Started started) mutable {
    // Whose fault it is, as the registry typed it: egress the request asked for and the supervisor would refuse is the request's.
    if (!started && started.error().kind == StartError::Kind::Request)
      return reply(ex, route, api_error(http::status::bad_request, started.error().message));
    if (!started)
      return reply(ex, route, api_error(http::status::internal_server_error, "the sandbox did not start: " + started.error().message));
    ex->log_sandbox = (*started)->id;
    // A code-interpreter template's sandbox is up with its interpreter, its kernel running (sandbox_registry.hpp).
    reply(ex, route, json_response(http::status::created, created_json(**started).dump()));
  });
}


// Not E2B's: what the sandbox refused (egress, syscalls, planted files, ...)
// since an offset of its audit log, and the offset to ask from next time, so
// that a client (exguardian mcp --server) reports each refusal once, with the
// call that met it. The log itself stays on this host.
void Service::refusals(Call& c) {
  auto since = audit_since(*c.sb, c.query, "since");
  if (!since) return reply(c.ex, c.route.label, api_error(since.error().status, since.error().message));
  reply(c.ex, c.route.label, json_response(http::status::ok, refusals_answer(*c.sb, *since).dump()));
}

// GET /sandboxes lists the running ones; /v2 the paused ones too (E2B's v2 default).
void Service::list_sandboxes(Call& c) {
  const std::string& route = c.route.label;
  ExchangePtr& ex = c.ex;
  const Tenant& t = *c.tenant;
  const std::string& query = c.query;
  bool v2 = c.path.starts_with("/v2/");
  auto bad = [&](const std::string& why) { reply(ex, route, api_error(http::status::bad_request, why)); };
  std::map<std::string, std::string> want_meta;
  if (auto meta = query_param(query, "metadata"); meta && !meta->empty()) {
    size_t pos = 0;
    while (pos <= meta->size()) {
      size_t amp = meta->find('&', pos);
      if (amp == std::string::npos) amp = meta->size();
      std::string kv = meta->substr(pos, amp - pos);
      auto eq = kv.find('=');
      if (eq == std::string::npos) return bad("metadata: expected key=value pairs joined by &");
      // The SDK encodes each key and value, then the pairs as a query string.
      want_meta[url_decode(url_decode(kv.substr(0, eq)))] = url_decode(url_decode(kv.substr(eq + 1)));
      pos = amp + 1;
    }
  }
  std::vector<std::string> states = {"running"};
  if (v2) states.push_back("paused");
  if (auto st = query_param(query, "state"); st && !st->empty()) {
    states.clear();
    size_t pos = 0;
    while (pos <= st->size()) {
      size_t c = st->find(',', pos);
      if (c == std::string::npos) c = st->size();
      std::string s = st->substr(pos, c - pos);
      if (s != "running" && s != "paused") return bad("state: " + s + ": expected running or paused");
      states.push_back(s);
      pos = c + 1;
    }
  }
  size_t limit = 100;
  if (auto l = query_param(query, "limit")) {
    char* end = nullptr;
    long v = std::strtol(l->c_str(), &end, 10);
    if (l->empty() || *end || v < 1 || v > 1000) return bad("limit: expected an integer 1..1000");
    limit = static_cast<size_t>(v);
  }
  std::string after = query_param(query, "nextToken").value_or("");
  // E2B's order: newest first unless order=asc.
  std::string order = query_param(query, "order").value_or("desc");
  if (order != "asc" && order != "desc") return bad("order: expected asc or desc");
  std::optional<std::chrono::system_clock::time_point> started_after;
  if (auto sa = query_param(query, "startedAfter"); sa && !sa->empty()) {
    started_after = rpc::parse_rfc3339(url_decode(*sa));
    if (!started_after) return bad("startedAfter: expected an RFC 3339 time such as 2026-12-06T21:00:00.000Z");
  }
  std::string tmpl = url_decode(query_param(query, "template").value_or(""));
  auto all = registry_.of_tenant(t.id);
  std::sort(all.begin(), all.end(), [asc = order == "asc"](auto& a, auto& b) {
    if (a->started_at != b->started_at) return asc ? a->started_at < b->started_at : a->started_at > b->started_at;
    return a->id < b->id;
  });
  nlohmann::json out = nlohmann::json::array();
  bool passed = after.empty();
  std::string next;
  for (auto& sb : all) {
    if (!passed) {
      passed = sb->id == after;
      continue;
    }
    std::string st = sb->state == Sandbox::State::Paused ? "paused" : sb->state == Sandbox::State::Running ? "running" : "";
    if (std::find(states.begin(), states.end(), st) == states.end()) continue;
    if (started_after && sb->started_at < *started_after) continue;
    if (!tmpl.empty() && sb->tmpl.name != tmpl) continue;
    bool match = true;
    for (auto& [k, v] : want_meta)
      if (!sb->metadata.contains(k) || sb->metadata[k] != v) match = false;
    if (!match) continue;
    if (out.size() == limit) {
      next = out.back()["sandboxID"];
      break;
    }
    out.push_back(sandbox_json(*sb, false));
  }
  if (!after.empty() && !passed) return bad("nextToken: not a token this server gave (or its sandbox is gone)");
  Response r = json_response(http::status::ok, out.dump());
  if (!next.empty()) r.set("X-Next-Token", next);
  reply(ex, route, std::move(r));
}

}  // namespace exg::serve
