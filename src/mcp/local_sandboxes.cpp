#include "mcp/local_sandboxes.hpp"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>

#include "sandbox/refusals.hpp"
#include "util/layer_kind.hpp"

namespace exg::mcp {

namespace {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm;
  ::gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

bool under(const std::string& path, const std::string& root) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          (root.back() == '/' || path[root.size()] == '/'));
}

}  // namespace

std::string agent_failure(const std::string& what, const agent::Frame& r) {
  std::string e = serve::reply_errno(r);
  std::string text = what + ": " + serve::reply_error_text(r);
  if (e == "ENOENT") text += " (no such file or directory in the sandbox)";
  else if (e == "EROFS") text += " (read-only in this sandbox: the workspace and /tmp are writable, the rest is not)";
  else if (e == "EACCES" || e == "EPERM") text += " (refused by the sandbox's policy or the file's permissions)";
  else if (e == "EPIPE") text += " (the sandbox has ended)";
  return text;
}

LocalSandboxes::LocalSandboxes(boost::asio::io_context& io, serve::Registry& registry, LocalOptions opt)
    : io_(io), registry_(registry), opt_(std::move(opt)), evidence_(io, opt_.exe, opt_.state_dir + "/evidence") {
  std::error_code ec;
  std::filesystem::create_directories(opt_.state_dir + "/audit", ec);
  std::filesystem::create_directories(opt_.state_dir + "/evidence", ec);
}

void LocalSandboxes::call(ToolCallPtr c) { dispatch_tool(*this, c); }

void LocalSandboxes::evidence(ToolCallPtr c, std::shared_ptr<Held> h) {
  EvidenceKey key{h->layer, h->policy, h->allow_domains};
  // Progress every 5 s while the suite runs: clients reset their request timeout on it.
  auto ticker = std::make_shared<boost::asio::steady_timer>(io_);
  auto started = std::chrono::steady_clock::now();
  auto tick = std::make_shared<std::function<void()>>();
  *tick = [ticker, c, started, weak = std::weak_ptr<std::function<void()>>(tick)] {
    ticker->expires_after(std::chrono::seconds(5));
    ticker->async_wait([ticker, c, started, weak](boost::system::error_code ec) {
      if (ec) return;
      auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
      c->progress(static_cast<double>(secs), "the escape test runs (" + std::to_string(secs) + " s)");
      if (auto t = weak.lock()) (*t)();
    });
  };
  uint64_t tok = evidence_.get(key, [c, ticker, tick](const nlohmann::json& r, const std::string& err) {
    ticker->cancel();
    *tick = nullptr;
    c->reply(err.empty() ? ToolOutcome::ok(r) : ToolOutcome::error("evidence: " + err));
  });
  if (*tick) (*tick)();
  c->on_cancel = [this, tok, ticker, tick] {
    ticker->cancel();
    *tick = nullptr;
    evidence_.cancel(tok);
  };
}

void LocalSandboxes::prune() {
  for (auto it = held_.begin(); it != held_.end();) {
    if (registry_.find(it->first) == nullptr) {
      ::unlink(it->second->sb->audit_log.c_str());
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<LocalSandboxes::Held> LocalSandboxes::held(const ToolCallPtr& c) {
  std::string id = c->args.value("sandbox_id", "");
  prune();
  auto it = held_.find(id);
  if (it == held_.end()) {
    c->reply(ToolOutcome::error(no_such_sandbox(id)));
    return nullptr;
  }
  auto& sb = it->second->sb;
  if (sb->state != serve::Sandbox::State::Running || !sb->agent || !sb->agent->open()) {
    c->reply(ToolOutcome::error("sandbox " + id + " is ending"));
    return nullptr;
  }
  return it->second;
}

void LocalSandboxes::create(ToolCallPtr c) {
  const auto& a = c->args;
  if (opt_.lock_policy)
    for (const char* k : {"layer", "policy", "allow_domains", "workspace"})
      if (a.contains(k))
        return c->reply(ToolOutcome::error(std::string("create_sandbox: ") + k + ": this server was started with --lock-policy: "
                                           "sandboxes take its own layer, policy, domains and workspace"));
  prune();
  if (held_.size() + creating_ >= opt_.max_sandboxes)
    return c->reply(ToolOutcome::error("create_sandbox: this server holds " + std::to_string(held_.size()) +
                                       " sandboxes already, its most (--max-sandboxes); destroy one first"));
  std::string tname = a.value("template", "base");
  const serve::Template* t = opt_.templates.find(tname);
  if (!t) {
    std::string names;
    for (auto& [n, _] : opt_.templates.all()) names += (names.empty() ? "" : ", ") + n;
    return c->reply(ToolOutcome::error("create_sandbox: template " + tname + ": unknown (this server has: " + names + ")"));
  }
  serve::CreateRequest req;
  req.tenant = "mcp";
  req.tmpl = *t;
  bool tmpl_given = a.contains("template");
  if (!tmpl_given) req.tmpl.layer = opt_.layer;
  if (a.contains("layer")) req.tmpl.layer = a["layer"].get<std::string>();
  if (!req.tmpl.rootfs.empty() && req.tmpl.layer == layer::name(layer::Kind::Process))
    return c->reply(ToolOutcome::error("create_sandbox: layer process: template " + tname + " has a root filesystem, which only the "
                                       "container and gvisor layers take"));
  // The operator's policy and domains hold for every sandbox; a template's or the call's domains come on top.
  // One policy file a sandbox: the operator's is not replaced by the call's.
  if (a.contains("policy") && !opt_.policy.empty())
    return c->reply(ToolOutcome::error("create_sandbox: policy: this server's --policy " + opt_.policy + " holds for every sandbox; "
                                       "leave policy out (allow_domains adds domains)"));
  std::string policy = a.value("policy", req.tmpl.policy.empty() ? opt_.policy : req.tmpl.policy);
  if (!policy.empty()) {
    std::string rp = real_path(policy);
    struct stat st;
    if (rp.empty() || ::stat(rp.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return c->reply(ToolOutcome::error("create_sandbox: policy " + policy + ": not a readable file on the host"));
    policy = rp;
  }
  req.tmpl.policy = policy;
  std::vector<std::string> domains = opt_.allow_domains;
  for (auto& d : req.tmpl.allow_domains) domains.push_back(d);
  if (a.contains("allow_domains"))
    for (auto& d : a["allow_domains"]) domains.push_back(d.get<std::string>());
  req.tmpl.allow_domains = domains;
  if (a.contains("memory_mb")) req.tmpl.memory_mb = a["memory_mb"].get<uint64_t>();
  if (a.contains("cpus")) req.tmpl.cpus = a["cpus"].get<double>();
  if (a.contains("pids")) req.tmpl.pids = a["pids"].get<int>();
  req.timeout = a.contains("timeout_seconds") ? std::chrono::seconds(a["timeout_seconds"].get<int64_t>()) : opt_.sandbox_timeout;
  std::string host_ws;
  if (a.contains("workspace")) {
    std::string w = a["workspace"].get<std::string>();
    host_ws = real_path(w);
    struct stat st;
    if (host_ws.empty() || ::stat(host_ws.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return c->reply(ToolOutcome::error("create_sandbox: workspace " + w + ": not an existing directory on the host"));
    bool ok = false;
    for (auto& r : opt_.workspace_roots) ok = ok || under(host_ws, r);
    if (!ok) {
      std::string roots;
      for (auto& r : opt_.workspace_roots) roots += (roots.empty() ? "" : ", ") + r;
      return c->reply(ToolOutcome::error("create_sandbox: workspace " + host_ws + ": outside the directories this server may mount (" +
                                         (roots.empty() ? std::string("none: start it with --workspace-root DIR") : roots) + ")"));
    }
    req.workspace = host_ws;
  }
  req.audit_log = opt_.state_dir + "/audit/" + serve::random_id(16) + ".jsonl";
  ++creating_;
  auto h = std::make_shared<Held>();
  h->layer = req.tmpl.layer;
  h->template_name = tname;
  h->policy = policy;
  h->allow_domains = domains;
  h->host_workspace = host_ws;
  std::string audit = req.audit_log;
  registry_.create(req, [this, c, h, audit](serve::Registry::Started started) {
    --creating_;
    if (!started) {
      ::unlink(audit.c_str());
      // Fail closed: a sandbox that cannot be set up is an error, never a run on the host.
      return c->reply(ToolOutcome::error("create_sandbox: the sandbox could not be set up: " + started.error().message));
    }
    std::shared_ptr<serve::Sandbox> sb = *started;
    h->sb = sb;
    held_[sb->id] = h;
    nlohmann::json r = {{"sandbox_id", sb->id}, {"layer", h->layer}, {"template", h->template_name}, {"workspace", sb->home},
                        {"host_workspace", h->host_workspace.empty() ? nlohmann::json(nullptr) : nlohmann::json(h->host_workspace)},
                        {"expires_at", rfc3339(sb->end_at)}};
    c->reply(ToolOutcome::ok(r));
  });
}

void LocalSandboxes::list(ToolCallPtr c) {
  prune();
  nlohmann::json all = nlohmann::json::array();
  for (auto& [id, h] : held_) {
    nlohmann::json bg = nlohmann::json::array();
    for (auto& [pid, b] : h->background)
      if (b->running) bg.push_back(pid);
    all.push_back({{"sandbox_id", id}, {"layer", h->layer}, {"template", h->template_name}, {"workspace", h->sb->home},
                   {"created_at", rfc3339(h->sb->started_at)}, {"expires_at", rfc3339(h->sb->end_at)}, {"background_commands", bg}});
  }
  c->reply(ToolOutcome::ok({{"sandboxes", all}}));
}

void LocalSandboxes::destroy(ToolCallPtr c) {
  std::string id = c->args["sandbox_id"].get<std::string>();
  prune();
  auto it = held_.find(id);
  if (it == held_.end()) return c->reply(ToolOutcome::error("destroy_sandbox: sandbox_id " + id + ": no such sandbox here"));
  auto h = it->second;
  held_.erase(it);
  uint64_t from = sandbox::audit_offset(h->sb->audit_log);
  // Whatever else was in flight for it ends with it (their replies say so).
  registry_.kill(h->sb, [c, h, id, from] {
    nlohmann::json refused = sandbox::refusals_since(h->sb->audit_log, from);
    ::unlink(h->sb->audit_log.c_str());
    c->reply(ToolOutcome::ok({{"sandbox_id", id}, {"destroyed", true}, {"refusals", refused}}));
  });
}

void LocalSandboxes::shutdown(std::function<void()> done) {
  auto all = held_;
  held_.clear();
  registry_.kill_all([all, done] {
    for (auto& [id, h] : all) ::unlink(h->sb->audit_log.c_str());
    done();
  });
}

}  // namespace exg::mcp
