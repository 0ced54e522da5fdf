// E2B's snapshots and fork on the control plane (snapshots.hpp says what a
// snapshot keeps): POST /sandboxes/{id}/snapshots, GET /snapshots, DELETE
// /templates/{id} (the SDK's deleteSnapshot), POST /sandboxes/{id}/fork. A
// create whose templateID names a snapshot is control_routes.cpp's.
#include <boost/asio/post.hpp>

#include "serve/control_requests.hpp"
#include "serve/service.hpp"
#include "serve/snapshots.hpp"
#include "util/json_parse.hpp"

namespace exg::serve {

namespace {

nlohmann::json snapshot_json(const SnapshotRecord& r) {
  nlohmann::json q = nlohmann::json::array();
  for (const auto& [path, why] : r.quarantined) q.push_back({{"path", path}, {"why", why}});
  // snapshotID and names are E2B's; the rest is not: what it keeps, and what the sweep took out of it.
  return {{"snapshotID", r.id}, {"names", r.names}, {"sandboxID", r.sandbox}, {"templateID", r.template_name},
          {"kept", snapshot_keeps(r.layer)}, {"quarantined", q}};
}

}  // namespace

void Service::create_snapshot(Call& c) {
  const std::string route = c.route.label;
  ExchangePtr ex = c.ex;
  auto names = parse_snapshot_body(c.req.body());
  if (!names) return reply(ex, route, api_error(names.error().status, names.error().message));
  // The tenant's quota.snapshots: those kept and those on their way (a fork's own are not counted).
  const std::string tenant = c.tenant->id;
  size_t held = registry_.snapshots().list(tenant, "", "").size() + snapshots_taking_[tenant];
  if (held >= c.tenant->quota.max_snapshots) {
    ++metrics_.quota_refusals;
    return reply(ex, route, api_error(http::status::too_many_requests,
                                      "tenant " + tenant + " holds " + std::to_string(held) + " snapshots, its quota (snapshots) is " +
                                          std::to_string(c.tenant->quota.max_snapshots) + ": delete one first (Sandbox.deleteSnapshot)"));
  }
  ++snapshots_taking_[tenant];
  registry_.take_snapshot(c.sb, std::move(*names), false, [this, ex, route, tenant](Result<SnapshotRecord> r) mutable {
    --snapshots_taking_[tenant];
    if (!r) return reply(ex, route, api_error(http::status::internal_server_error, "no snapshot taken: " + r.error().str()));
    reply(ex, route, json_response(http::status::created, snapshot_json(*r).dump()));
  });
}

// Newest first; ?sandboxID, ?name (a name or an id), ?limit (1..1000), ?nextToken (X-Next-Token answers).
void Service::list_snapshots(Call& c) {
  auto bad = [&](const std::string& why) { reply(c.ex, c.route.label, api_error(http::status::bad_request, why)); };
  size_t limit = 100;
  if (auto l = query_param(c.query, "limit")) {
    char* end = nullptr;
    long v = std::strtol(l->c_str(), &end, 10);
    if (l->empty() || *end || v < 1 || v > 1000) return bad("limit: expected an integer 1..1000");
    limit = static_cast<size_t>(v);
  }
  std::string after = url_decode(query_param(c.query, "nextToken").value_or(""));
  auto all = registry_.snapshots().list(c.tenant->id, url_decode(query_param(c.query, "sandboxID").value_or("")),
                                        url_decode(query_param(c.query, "name").value_or("")));
  nlohmann::json out = nlohmann::json::array();
  bool passed = after.empty();
  std::string next;
  for (const auto* r : all) {
    if (!passed) {
      passed = r->id == after;
      continue;
    }
    if (out.size() == limit) {
      next = out.back()["snapshotID"];
      break;
    }
    out.push_back(snapshot_json(*r));
  }
  if (!passed) return bad("nextToken: not a token this server gave (or its snapshot is gone)");
  Response resp = json_response(http::status::ok, out.dump());
  if (!next.empty()) resp.set("X-Next-Token", next);
  reply(c.ex, c.route.label, std::move(resp));
}

// The SDK's deleteSnapshot: 204, or 404 (it reads that as "not found": false).
void Service::delete_snapshot(Call& c) {
  const std::string& id = c.params.at("templateID");
  if (registry_.snapshots().remove(c.tenant->id, id)) return reply(c.ex, c.route.label, Response{http::status::no_content, 11});
  if (templates_.find(id))
    return reply(c.ex, c.route.label, api_error(http::status::not_implemented, not_served("DELETE /templates/" + id + " (a template of the templates file)")));
  reply(c.ex, c.route.label, api_error(http::status::not_found, "snapshot " + id + " not found"));
}

// E2B's fork: one snapshot of the sandbox (filesystem only, swept), then
// `count` sandboxes made from it, one after the other (each counted in the
// tenant's quota before the next is asked for), each entry saying how its
// fork went (a made one also what it kept: `kept`, not E2B's, as a
// snapshot's answer says it); the snapshot goes once they have their copies.
void Service::fork_sandbox(Call& c) {
  const std::string route = c.route.label;
  ExchangePtr ex = c.ex;
  auto f = parse_fork_body(c.req.body(), c.tenant->quota.max_timeout_s);
  if (!f) return reply(ex, route, api_error(f.error().status, f.error().message));
  if (!c.sb->rules_shown.empty())
    return reply(ex, route, api_error(http::status::conflict,
                                      "fork: the sandbox's network.rules are not kept by the server (their values are the "
                                      "supervisor's only): create a sandbox from a snapshot with its rules instead"));
  const Tenant* t = c.tenant;
  std::shared_ptr<Sandbox> src = c.sb;
  registry_.take_snapshot(src, {}, true, [this, ex, route, t, src, want = *f](Result<SnapshotRecord> snap) mutable {
    if (!snap) return reply(ex, route, api_error(http::status::internal_server_error, "fork: no snapshot taken: " + snap.error().str()));
    CreateRequest cr;
    cr.tenant = t->id;
    cr.tmpl = src->tmpl;
    cr.timeout = std::chrono::seconds(want.timeout_s);
    cr.metadata = src->metadata;
    cr.env_vars = src->env_vars;
    cr.allow_out = src->allow_out;
    cr.deny_out = src->deny_out;
    cr.tenant_secrets = t->secrets;
    cr.tenant_secret_hosts = t->secret_hosts;
    cr.secure = !src->access_token.empty();
    cr.mask_request_host = src->mask_request_host;
    cr.seed_home = registry_.snapshots().dir_of(snap->id) + "/home";
    auto results = std::make_shared<nlohmann::json>(nlohmann::json::array());
    auto next = std::make_shared<std::function<void(int)>>();
    const std::string snap_id = snap->id;
    *next = [this, ex, route, t, cr, count = want.count, results, next, snap_id](int i) mutable {
      auto error_entry = [&](int code, const std::string& message) {
        results->push_back({{"error", {{"code", code}, {"message", message}}}});
      };
      if (i == count) {
        registry_.snapshots().remove(t->id, snap_id);
        reply(ex, route, json_response(http::status::created, results->dump()));
        // The cycle through its own capture ends, after this call has returned.
        boost::asio::post(io_, [next] { *next = nullptr; });
        return;
      }
      if (auto q = check_quota(*t, cr.tmpl)) {
        auto answer = parse_json(q->body());
        error_entry(429, answer.is_object() ? answer.value("message", "quota") : "quota");
        return (*next)(i + 1);
      }
      registry_.create(cr, [this, results, next, i](Registry::Started st) mutable {
        if (!st) {
          results->push_back({{"error", {{"code", 500}, {"message", "the fork did not start: " + st.error().message}}}});
          return (*next)(i + 1);
        }
        results->push_back({{"sandbox", created_json(**st)}, {"kept", snapshot_keeps((*st)->tmpl.layer)}});
        (*next)(i + 1);
      });
    };
    (*next)(0);
  });
}

}  // namespace exg::serve
