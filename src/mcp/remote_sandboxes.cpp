#include "mcp/remote_sandboxes.hpp"

#include "serve/sandbox_registry.hpp"
#include "util/json_parse.hpp"

namespace exg::mcp {

namespace {

namespace http = boost::beast::http;

constexpr const char* kSessionKey = "exguardian_mcp";  // the metadata key marking a session's sandboxes

}  // namespace

RemoteSandboxes::RemoteSandboxes(boost::asio::io_context& io, RemoteOptions opt)
    : io_(io), opt_(std::move(opt)), http_(io, opt_.server), session_tag_(serve::random_id(20)) {}

void RemoteSandboxes::call(ToolCallPtr c) { dispatch_tool(*this, c); }

void RemoteSandboxes::evidence(ToolCallPtr c, std::shared_ptr<Held> h) {
  c->reply(ToolOutcome::error("evidence: runs in standalone mode only (exguardian mcp without --server): exguardian serve does not "
                              "run the escape test for its clients. On the server's host, `exguardian escape-test --layer " + h->layer +
                              "` gives the report for this sandbox's layer"));
}

std::shared_ptr<RemoteSandboxes::Held> RemoteSandboxes::held(const ToolCallPtr& c) {
  std::string id = c->args.value("sandbox_id", "");
  auto it = held_.find(id);
  if (it == held_.end()) {
    c->reply(ToolOutcome::error(no_such_sandbox(id)));
    return nullptr;
  }
  return it->second;
}

void RemoteSandboxes::forget(const std::string& id) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  auto h = it->second;
  held_.erase(it);
  for (auto& [pid, b] : h->background) {
    if (b->stream) b->stream->cancel();
    b->stream = nullptr;
    b->exited(-1, 0);
  }
}

HttpCallPtr RemoteSandboxes::control(http::verb method, const std::string& target, const nlohmann::json* body, Reply done,
                                     std::chrono::seconds deadline) {
  HttpRequest r;
  r.deadline = deadline;
  r.method = method;
  r.target = target;
  r.headers.push_back({"X-API-KEY", opt_.api_key});
  if (body) {
    r.content_type = "application/json";
    r.body = body->dump();
  }
  return http_.request(std::move(r), [done](HttpAnswer a) { done(a, serve_failure(a, Plane::Control)); });
}

void RemoteSandboxes::take_refusals(const std::shared_ptr<Held>& h, RefusalsDone done) {
  h->refusals_waiting.push_back(std::move(done));
  if (!h->fetching_refusals) fetch_refusals(h);
}

void RemoteSandboxes::fetch_refusals(const std::shared_ptr<Held>& h) {
  h->fetching_refusals = true;
  std::string target = "/sandboxes/" + h->id + "/refusals?since=" + std::to_string(h->audit_next);
  control(http::verb::get, target, nullptr, [this, h](const HttpAnswer& a, const std::optional<std::string>& failure) {
    nlohmann::json refused = nlohmann::json::array();
    std::string note;
    auto j = failure ? nlohmann::json() : parse_json(a.body);
    if (failure) {
      note = "The sandbox's refusals could not be had from exguardian serve (" + *failure + ").";
    } else if (!j.is_object() || !j.contains("refusals") || !j["refusals"].is_array() || !j.contains("next") ||
               !j["next"].is_number_unsigned()) {
      note = "The sandbox's refusals could not be had: exguardian serve's answer to GET /sandboxes/{id}/refusals is not {refusals, next}.";
    } else {
      refused = std::move(j["refusals"]);
      h->audit_next = j["next"].get<uint64_t>();
    }
    RefusalsDone done = std::move(h->refusals_waiting.front());
    h->refusals_waiting.pop_front();
    h->fetching_refusals = false;
    if (!h->refusals_waiting.empty()) fetch_refusals(h);  // the next one's window starts where this one ended
    done(std::move(refused), std::move(note));
  }, std::chrono::seconds(30));
}

HttpRequest RemoteSandboxes::envd_request(const Held& h, http::verb method, const std::string& target) const {
  HttpRequest r;
  r.method = method;
  r.target = target;
  // The routing E2B_SANDBOX_URL gives the SDK: the sandbox by header, its own token (never the API key).
  r.headers.push_back({"E2b-Sandbox-Id", h.id});
  r.headers.push_back({"X-Access-Token", h.access_token});
  return r;
}

HttpCallPtr RemoteSandboxes::envd(const std::shared_ptr<Held>& h, HttpRequest r, Reply done) {
  std::string id = h->id;
  return http_.request(std::move(r), [this, id, done](HttpAnswer a) {
    if (sandbox_gone(a, Plane::Envd)) forget(id);
    done(a, serve_failure(a, Plane::Envd));
  });
}

void RemoteSandboxes::rpc(const std::shared_ptr<Held>& h, const std::string& method, const nlohmann::json& msg,
                          std::function<void(const nlohmann::json&, const std::optional<std::string>&)> done) {
  HttpRequest r = envd_request(*h, http::verb::post, "/" + method);
  r.content_type = "application/json";
  r.headers.push_back({"Connect-Protocol-Version", "1"});
  r.body = msg.dump();
  envd(h, std::move(r), [done](const HttpAnswer& a, const std::optional<std::string>& failure) {
    if (failure) return done(nullptr, failure);
    auto j = parse_json(a.body);
    if (!j.is_object()) return done(nullptr, std::string("exguardian serve's answer is not a JSON object"));
    done(j, std::nullopt);
  });
}

void RemoteSandboxes::create(ToolCallPtr c) {
  const auto& a = c->args;
  // What exguardian serve's create cannot take: its templates carry layer, policy and resources, and it mounts nothing of this host.
  static const std::pair<const char*, const char*> kNotHere[] = {
      {"layer", "the server's templates decide the layer: name one with template"},
      {"policy", "a policy file of this host cannot be given to the server: its templates carry their policies"},
      {"workspace", "the server cannot mount a directory of this host: write_file puts files into the sandbox"},
      {"memory_mb", "the server's templates set the resources: name one with template"},
      {"cpus", "the server's templates set the resources: name one with template"},
      {"pids", "the server's templates set the resources: name one with template"},
  };
  for (auto& [k, why] : kNotHere)
    if (a.contains(k))
      return c->reply(ToolOutcome::error(std::string("create_sandbox: ") + k + ": not available in client mode (exguardian mcp --server " +
                                         opt_.server.url + "): " + why));
  if (opt_.lock_policy && a.contains("allow_domains"))
    return c->reply(ToolOutcome::error("create_sandbox: allow_domains: this server was started with --lock-policy: sandboxes take its "
                                       "own domains and the template's"));
  if (held_.size() + creating_ >= opt_.max_sandboxes)
    return c->reply(ToolOutcome::error("create_sandbox: this session holds " + std::to_string(held_.size()) +
                                       " sandboxes already, its most (--max-sandboxes); destroy one first"));
  nlohmann::json body = {{"templateID", a.value("template", "base")},
                         {"timeout", a.contains("timeout_seconds") ? a["timeout_seconds"].get<int64_t>() : opt_.sandbox_timeout.count()},
                         {"metadata", {{kSessionKey, session_tag_}}}};
  std::vector<std::string> domains = opt_.allow_domains;
  if (a.contains("allow_domains"))
    for (auto& d : a["allow_domains"]) domains.push_back(d.get<std::string>());
  if (!domains.empty()) body["network"] = {{"allowOut", domains}};
  ++creating_;
  control(http::verb::post, "/sandboxes", &body, [this, c](const HttpAnswer& ans, const std::optional<std::string>& failure) {
    if (failure) {
      --creating_;
      return c->reply(ToolOutcome::error("create_sandbox: " + *failure));
    }
    auto j = parse_json(ans.body);
    auto h = std::make_shared<Held>();
    if (j.is_object()) {
      h->id = j.value("sandboxID", "");
      h->access_token = j.value("envdAccessToken", "");
      h->template_name = j.value("templateID", "");
    }
    if (h->id.empty() || h->access_token.empty()) {
      --creating_;
      return c->reply(ToolOutcome::error("create_sandbox: exguardian serve's answer names no sandboxID and envdAccessToken"));
    }
    describe(c, h);
  });
}

// After the create: its layer and end (the detail), its workspace (where "." is); then it is this session's.
void RemoteSandboxes::describe(ToolCallPtr c, std::shared_ptr<Held> h) {
  auto fail = [this, c, h](const std::string& why) {
    --creating_;
    // Not left running unseen: what this session cannot use, it destroys.
    control(http::verb::delete_, "/sandboxes/" + h->id, nullptr, [](const HttpAnswer&, const std::optional<std::string>&) {});
    c->reply(ToolOutcome::error("create_sandbox: sandbox " + h->id + " was created, then destroyed: " + why));
  };
  control(http::verb::get, "/sandboxes/" + h->id, nullptr, [this, c, h, fail](const HttpAnswer& ans, const std::optional<std::string>& failure) {
    if (failure) return fail(*failure);
    auto j = parse_json(ans.body);
    if (!j.is_object()) return fail("its detail is not a JSON object");
    h->layer = j.value("layer", "");
    h->created_at = j.value("startedAt", "");
    h->expires_at = j.value("endAt", "");
    if (h->layer.empty()) return fail("exguardian serve does not say which layer it runs on (a server older than this client?)");
    rpc(h, "filesystem.Filesystem/Stat", {{"path", "."}}, [this, c, h, fail](const nlohmann::json& r, const std::optional<std::string>& failure) {
      if (failure) return fail("its workspace: " + *failure);
      h->home = r.contains("entry") ? r["entry"].value("path", "") : "";
      if (h->home.empty()) return fail("its workspace: the answer names no path");
      --creating_;
      held_[h->id] = h;
      c->reply(ToolOutcome::ok({{"sandbox_id", h->id}, {"layer", h->layer}, {"template", h->template_name}, {"workspace", h->home},
                                {"host_workspace", nullptr}, {"expires_at", h->expires_at}}));
    });
  });
}

void RemoteSandboxes::list(ToolCallPtr c) {
  // The server's view (a sandbox past its timeout is gone there), of this session's sandboxes only.
  std::string target = "/v2/sandboxes?limit=1000&metadata=" + query_escape(std::string(kSessionKey) + "=" + session_tag_);
  control(http::verb::get, target, nullptr, [this, c](const HttpAnswer& ans, const std::optional<std::string>& failure) {
    if (failure) return c->reply(ToolOutcome::error("list_sandboxes: " + *failure));
    auto j = parse_json(ans.body);
    if (!j.is_array()) return c->reply(ToolOutcome::error("list_sandboxes: exguardian serve's answer is not a JSON array"));
    std::map<std::string, nlohmann::json> there;
    for (auto& s : j)
      if (s.is_object() && s.contains("sandboxID") && s["sandboxID"].is_string()) there[s["sandboxID"].get<std::string>()] = s;
    std::vector<std::string> gone;
    for (auto& [id, h] : held_)
      if (!there.count(id)) gone.push_back(id);
    for (auto& id : gone) forget(id);
    nlohmann::json all = nlohmann::json::array();
    for (auto& [id, h] : held_) {
      nlohmann::json bg = nlohmann::json::array();
      for (auto& [pid, b] : h->background)
        if (b->running) bg.push_back(pid);
      const auto& s = there[id];
      all.push_back({{"sandbox_id", id}, {"layer", h->layer}, {"template", h->template_name}, {"workspace", h->home},
                     {"created_at", s.value("startedAt", h->created_at)}, {"expires_at", s.value("endAt", h->expires_at)},
                     {"background_commands", bg}});
    }
    c->reply(ToolOutcome::ok({{"sandboxes", all}}));
  });
}

void RemoteSandboxes::destroy(ToolCallPtr c) {
  std::string id = c->args["sandbox_id"].get<std::string>();
  if (!held_.count(id)) return c->reply(ToolOutcome::error("destroy_sandbox: sandbox_id " + id + ": no such sandbox here"));
  // Its refusals up to now, then the kill, which answers those of its last moments (the planted
  // files its end quarantined) before its audit log goes with it.
  auto h = held_[id];
  take_refusals(h, [this, c, id, h](nlohmann::json refused, std::string note) {
    std::string target = "/sandboxes/" + id + "?refusals_since=" + std::to_string(h->audit_next);
    control(http::verb::delete_, target, nullptr, [this, c, id, refused, note](const HttpAnswer& ans, const std::optional<std::string>& failure) mutable {
      if (sandbox_gone(ans, Plane::Control)) {
        forget(id);
        return c->reply(ToolOutcome::error("destroy_sandbox: sandbox_id " + id + ": it had ended on exguardian serve already (its timeout)"));
      }
      if (failure) return c->reply(ToolOutcome::error("destroy_sandbox: " + *failure));
      forget(id);
      auto last = parse_json(ans.body);
      if (last.is_object() && last.contains("refusals") && last["refusals"].is_array())
        for (auto& r : last["refusals"]) refused.push_back(std::move(r));
      else if (note.empty())
        note = "The refusals of the sandbox's last moments could not be had: exguardian serve answered its kill without them.";
      nlohmann::json r = {{"sandbox_id", id}, {"destroyed", true}, {"refusals", refused}};
      if (!note.empty()) r["note"] = note;
      c->reply(ToolOutcome::ok(r));
    });
  });
}

void RemoteSandboxes::shutdown(std::function<void()> done) {
  std::vector<std::string> ids;
  for (auto& [id, h] : held_) ids.push_back(id);
  auto left = std::make_shared<size_t>(ids.size());
  if (ids.empty()) return done();
  for (auto& id : ids) {
    forget(id);
    control(http::verb::delete_, "/sandboxes/" + id, nullptr, [left, done](const HttpAnswer&, const std::optional<std::string>&) {
      if (--*left == 0) done();
    }, std::chrono::seconds(30));
  }
}

}  // namespace exg::mcp
