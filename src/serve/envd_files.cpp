// envd's HTTP routes for one sandbox (spec/envd/envd.yaml): /files download
// and upload (multipart/form-data or application/octet-stream; parents
// created, an existing file replaced), /envs, /health, /metrics (routes.cpp
// has the table). Contents go through the agent in
// frames of at most 1 MiB, read and written by the sandbox's own user.
#include <algorithm>
#include <cctype>
#include <map>

#include "serve/gzip_codec.hpp"
#include "serve/multipart.hpp"
#include "serve/service.hpp"

namespace exg::serve {

namespace {

http::status status_of_errno(const std::string& e) {
  if (e == "ENOENT" || e == "ENOTDIR") return http::status::not_found;
  if (e == "EACCES" || e == "EPERM" || e == "EROFS") return http::status::forbidden;
  if (e == "EISDIR" || e == "EINVAL" || e == "ENAMETOOLONG" || e == "ELOOP") return http::status::bad_request;
  if (e == "ENOSPC" || e == "EDQUOT") return static_cast<http::status>(507);
  return http::status::internal_server_error;
}

std::string parent_dir(const std::string& p) {
  auto sl = p.rfind('/');
  return sl == std::string::npos || sl == 0 ? "/" : p.substr(0, sl);
}

using Metadata = std::map<std::string, std::string>;

// envd's file metadata: the request's X-Metadata-NAME headers (names
// case-insensitive, kept in lower case as fetch sends them; E2B's SDK checks
// names are HTTP tokens and values printable ASCII, the agent again).
Metadata metadata_headers(const Request& req) {
  constexpr std::string_view kPrefix = "x-metadata-";
  Metadata m;
  for (const auto& f : req) {
    std::string name(f.name_string());
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name.size() > kPrefix.size() && name.starts_with(kPrefix)) m[name.substr(kPrefix.size())] = std::string(f.value());
  }
  return m;
}

// Writes one file: parents, then the bytes in frames (the first replaces the
// file and its metadata, the rest append).
void write_file(const std::shared_ptr<Sandbox>& sb, std::string path, std::shared_ptr<std::string> data,
                std::shared_ptr<const Metadata> metadata,
                std::function<void(const std::string& errno_name, const std::string& message)> done) {
  sb->agent->call(agent::request::mkdir(parent_dir(path), /*parents=*/true), {}, [sb, path, data, metadata, done](const agent::Frame&) {
    auto step = std::make_shared<std::function<void(size_t)>>();
    *step = [sb, path, data, metadata, done, step](size_t off) {
      size_t n = std::min(data->size() - off, agent::kMaxPayload);
      agent::request::Write w{.append = off > 0};
      if (off == 0) w.metadata = *metadata;  // none given: the old metadata goes, as envd's
      sb->agent->call(agent::request::write(path, w), data->substr(off, n), [off, n, data, done, step, path](const agent::Frame& r) {
        if (!r.header.value("ok", false)) {
          done(reply_errno(r), path + ": " + reply_error_text(r));
          *step = nullptr;
          return;
        }
        if (off + n >= data->size()) {
          done("", "");
          *step = nullptr;
          return;
        }
        (*step)(off + n);
      });
    };
    (*step)(0);
  });
}

}  // namespace

void Service::envd_health(Call& c) { reply(c.ex, c.route.label, Response{http::status::no_content, 11}); }

void Service::envd_envs(Call& c) {
  nlohmann::json j = nlohmann::json::object();
  for (auto& [k, v] : c.sb->env_vars) j[k] = v;
  reply(c.ex, c.route.label, json_response(http::status::ok, j.dump()));
}

void Service::envd_metrics(Call& c) {
  auto u = registry_.usage(c.sb);
  nlohmann::json j = {{"ts", std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()},
                      {"cpu_count", static_cast<int>(std::ceil(c.sb->tmpl.cpus))}, {"cpu_used_pct", u.cpu_pct},
                      {"mem_total", c.sb->tmpl.memory_mb * 1024 * 1024}, {"mem_used", u.mem_bytes}, {"disk_used", 0}, {"disk_total", 0}};
  reply(c.ex, c.route.label, json_response(http::status::ok, j.dump()));
}

// /files acts as ?username= (or Authorization: Basic): true when that user is refused, answered here.
bool Service::files_user_refused(Call& c) {
  auto ue = user_error(c.req, query_param(c.query, "username").value_or(""), *c.sb);
  if (ue) reply(c.ex, c.route.label, api_error(http::status::unauthorized, *ue));
  return ue.has_value();
}

void Service::files_get(Call& c) {
  if (files_user_refused(c)) return;
  const std::string route = c.route.label;
  ExchangePtr ex = c.ex;
  const std::shared_ptr<Sandbox>& sb = c.sb;
  auto p = query_param(c.query, "path");
  if (!p || p->empty() || p->find('\0') != std::string::npos) return reply(ex, route, api_error(http::status::bad_request, "path: missing"));
  std::string path = absolute_path(*sb, *p);
  auto acc = std::make_shared<std::string>();
  auto step = std::make_shared<std::function<void(uint64_t)>>();
  size_t limit = opt_.max_download;
  const bool gzip_wanted = accepts_gzip(std::string(c.req[http::field::accept_encoding]));
  *step = [this, sb, path, acc, ex, route, step, limit, gzip_wanted](uint64_t off) mutable {
    sb->agent->call(agent::request::read(path, off), {}, [this, acc, ex, route, step, off, path, limit, gzip_wanted](const agent::Frame& r) mutable {
      if (!r.header.value("ok", false)) {
        std::string e = reply_errno(r);
        *step = nullptr;
        if (e == "ENOENT") return reply(ex, route, api_error(http::status::not_found, "path " + path + " not found"));
        if (e == "EINVAL") return reply(ex, route, api_error(http::status::bad_request, "path " + path + " is not a regular file"));
        return reply(ex, route, api_error(status_of_errno(e), path + ": " + reply_error_text(r)));
      }
      acc->append(r.payload);
      if (acc->size() > limit) {
        *step = nullptr;
        return reply(ex, route, api_error(http::status::payload_too_large, path + ": larger than this server's download limit"));
      }
      if (r.header.value("eof", true) || r.payload.empty()) {
        Response resp{http::status::ok, 11};
        resp.set(http::field::content_type, "application/octet-stream");
        if (gzip_wanted) {  // the SDK's read(..., {gzip: true})
          resp.set(http::field::content_encoding, "gzip");
          resp.body() = gzip(*acc);
        } else {
          resp.body() = std::move(*acc);
        }
        *step = nullptr;
        return reply(ex, route, std::move(resp));
      }
      (*step)(off + r.payload.size());
    });
  };
  (*step)(0);
}

void Service::files_post(Call& c) {
  if (files_user_refused(c)) return;
  const std::string route = c.route.label;
  ExchangePtr ex = c.ex;
  const std::shared_ptr<Sandbox>& sb = c.sb;
  Request& req = c.req;
  std::string qpath = query_param(c.query, "path").value_or("");
  std::string ct(req[http::field::content_type]);
  std::vector<Upload> files;
  if (ct.starts_with("multipart/form-data")) {
    auto parts = multipart_files(ct, req.body());
    if (!parts) return reply(ex, route, api_error(http::status::bad_request, parts.error()));
    files = std::move(*parts);
    if (!qpath.empty() && files.size() == 1) files[0].path = qpath;
  } else if (ct.starts_with("application/octet-stream")) {
    std::string enc(req[http::field::content_encoding]);
    for (char& ch : enc) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (enc == "gzip" || enc == "x-gzip") {  // the SDK's write(..., {gzip: true})
      auto plain = gunzip(req.body(), opt_.max_upload);
      if (!plain)
        return reply(ex, route, api_error(http::status::bad_request, "Content-Encoding gzip: the body is not gzip, or is larger than the upload limit once decompressed"));
      files.push_back({qpath, std::move(*plain)});
    } else if (!enc.empty() && enc != "identity") {
      return reply(ex, route, api_error(http::status::bad_request, "Content-Encoding " + enc + ": only gzip is accepted"));
    } else {
      files.push_back({qpath, std::move(req.body())});
    }
  } else {
    return reply(ex, route, api_error(http::status::bad_request, "Content-Type " + ct + ": expected multipart/form-data or application/octet-stream"));
  }
  for (auto& f : files) {
    if (f.path.empty()) return reply(ex, route, api_error(http::status::bad_request, "path: missing (query ?path= or the part's filename)"));
    if (f.path.find('\0') != std::string::npos || f.path.size() > 4096) return reply(ex, route, api_error(http::status::bad_request, "path: not usable"));
    f.path = absolute_path(*sb, f.path);
  }
  auto metadata = std::make_shared<const Metadata>(metadata_headers(req));
  // One file after the other; the answer lists them all.
  auto list = std::make_shared<std::vector<Upload>>(std::move(files));
  auto result = std::make_shared<nlohmann::json>(nlohmann::json::array());
  auto next = std::make_shared<std::function<void(size_t)>>();
  // The step holds itself weakly; each pending write holds it strongly, so it ends with the last one.
  std::weak_ptr<std::function<void(size_t)>> weak_next = next;
  *next = [this, sb, list, result, weak_next, ex, route, metadata](size_t i) mutable {
    if (i == list->size()) return reply(ex, route, json_response(http::status::ok, result->dump()));
    std::string path = (*list)[i].path;
    auto data = std::make_shared<std::string>(std::move((*list)[i].data));
    auto next = weak_next.lock();
    write_file(sb, path, data, metadata, [this, next, result, path, i, ex, route, metadata](const std::string& e, const std::string& msg) mutable {
      if (!e.empty()) return reply(ex, route, api_error(status_of_errno(e), msg));
      auto sl = path.rfind('/');
      nlohmann::json entry = {{"name", path.substr(sl + 1)}, {"type", "file"}, {"path", path}};
      if (!metadata->empty()) entry["metadata"] = *metadata;
      result->push_back(std::move(entry));
      (*next)(i + 1);
    });
  };
  (*next)(0);
}

}  // namespace exg::serve
