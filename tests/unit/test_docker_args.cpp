// `exguardian docker-args`: the hardened docker/podman run flags for a Plan.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "oci/spec.hpp"
#include "plan/plan.hpp"

namespace exg::oci {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

class DockerArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/exg_docker_test_XXXXXX";
    char buf[PATH_MAX];
    root = ::realpath(::mkdtemp(tmpl), buf);
    ws = root + "/ws";
    home = root + "/home";
    fs::create_directories(ws + "/.git/hooks");
    fs::create_directories(home);
    std::ofstream(home + "/.npmrc") << "secret";
    ctx.uid = 1000;
    ctx.gid = 1000;
    ctx.cwd = ws;
    ctx.home = home;
    ctx.workspace = ws;
    ctx.argv = {"npm", "test", "--", "it's"};
    ctx.sandbox_id = "dockertest";
    ctx.environ = {"PATH=/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY=nope"};
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root, ec);
  }

  // As `exguardian docker-args` compiles: no transparent egress (no supervisor).
  plan::Plan compile(policy::Policy pol = {}) {
    if (!pol.network.transparent) pol.network.transparent = false;
    auto r = plan::compile(pol, ctx);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().str());
    return r ? *r : plan::Plan{};
  }

  Args args(const plan::Plan& p, Engine e = Engine::Docker, const std::string& image = "debian:12") {
    auto r = docker_args(p, e, image, "/etc/exg/seccomp.json", &notes);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().str());
    return r ? *r : Args{};
  }

  // True when `flag` is directly followed by `value` somewhere.
  static bool has(const Args& a, const std::string& flag, const std::string& value) {
    for (size_t i = 0; i + 1 < a.size(); ++i)
      if (a[i] == flag && a[i + 1] == value) return true;
    return false;
  }
  static bool has(const Args& a, const std::string& word) { return std::find(a.begin(), a.end(), word) != a.end(); }

  std::string root, ws, home;
  plan::Context ctx;
  std::vector<std::string> notes;
};

TEST_F(DockerArgsTest, Hardened) {
  policy::Policy pol;
  pol.resources.memory_bytes = 1ull << 30;
  pol.resources.pids = 128;
  pol.resources.cpus = 1.5;
  plan::Plan p = compile(pol);
  Args a = args(p);
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(a[0], "run");
  EXPECT_TRUE(has(a, "--rm"));
  EXPECT_TRUE(has(a, "--user", "1000:1000"));
  EXPECT_TRUE(has(a, "--cap-drop", "ALL"));
  EXPECT_TRUE(has(a, "--security-opt", "no-new-privileges"));
  EXPECT_TRUE(has(a, "--security-opt", "seccomp=/etc/exg/seccomp.json"));
  EXPECT_TRUE(has(a, "--read-only"));
  EXPECT_TRUE(has(a, "--network", "none"));
  EXPECT_TRUE(has(a, "--hostname", "exguardian"));
  EXPECT_TRUE(has(a, "--pids-limit", "128"));
  EXPECT_TRUE(has(a, "--memory", std::to_string(1ull << 30)));
  EXPECT_TRUE(has(a, "--memory-swap", std::to_string(1ull << 30)));
  EXPECT_TRUE(has(a, "--cpus", "1.5"));
  EXPECT_TRUE(has(a, "--ulimit", "core=0:0"));
  EXPECT_TRUE(std::any_of(a.begin(), a.end(), [](auto& s) { return s.starts_with("nofile="); }));
  EXPECT_TRUE(has(a, "-w", ws));
  EXPECT_FALSE(has(a, "--privileged"));
  // The environment is the Plan's: no secret from the caller's.
  for (const auto& e : p.env) EXPECT_TRUE(has(a, "-e", e)) << e;
  for (const auto& w : a) EXPECT_EQ(w.find("AWS_SECRET"), std::string::npos) << w;
  // Image, then the command untouched.
  Args tail(a.end() - 5, a.end());
  EXPECT_EQ(tail, (Args{"debian:12", "npm", "test", "--", "it's"}));
}

TEST_F(DockerArgsTest, VolumesAndMasks) {
  Args a = args(compile());
  EXPECT_TRUE(has(a, "-v", ws + ":" + ws + ":rw"));
  EXPECT_TRUE(has(a, "-v", home + ":" + home + ":ro"));  // read-only here; noted
  EXPECT_TRUE(has(a, "-v", "/dev/null:" + home + "/.npmrc:ro"));
  EXPECT_TRUE(has(a, "-v", ws + "/.git/hooks:" + ws + "/.git/hooks:ro"));
  EXPECT_TRUE(std::any_of(a.begin(), a.end(), [](auto& s) { return s.starts_with("/tmp:rw,nosuid,nodev,mode=1777"); }));
  EXPECT_FALSE(has(a, "-v", "/usr:/usr:ro"));  // the image's own
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](auto& n) { return n.find("exguardian proxy") != std::string::npos; }));
}

TEST_F(DockerArgsTest, ImageOrPodmanRootDirectory) {
  Args a = args(compile(), Engine::Podman, "/srv/rootfs");
  Args tail(a.end() - 6, a.end());
  EXPECT_EQ(tail, (Args{"--rootfs", "/srv/rootfs", "npm", "test", "--", "it's"}));
  for (auto [engine, image] : {std::pair{Engine::Docker, ""}, std::pair{Engine::Podman, ""},
                               std::pair{Engine::Docker, "/srv/rootfs"}, std::pair{Engine::Podman, "/"}}) {
    auto r = docker_args(compile(), engine, image, "/x.json");
    EXPECT_FALSE(r.has_value()) << to_string(engine) << " " << image;
  }
}

TEST_F(DockerArgsTest, WhatAnEngineCannotExpressIsAnError) {
  ctx.workspace_mode = plan::WorkspaceMode::Overlay;
  EXPECT_FALSE(docker_args(compile(), Engine::Docker, "img", "/x.json").has_value());
  ctx.workspace_mode = plan::WorkspaceMode::Live;
  plan::Plan p = compile();
  plan::Step odd;
  odd.kind = static_cast<plan::StepKind>(999);
  odd.target = "/etc/odd";
  p.steps.push_back(odd);
  auto r = docker_args(p, Engine::Docker, "img", "/x.json");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().str().find("/etc/odd"), std::string::npos);
  // A colon in a path would split -v's fields.
  std::string colon = root + "/a:b";
  fs::create_directories(colon);
  ctx.workspace = colon;
  ctx.cwd = colon;
  EXPECT_FALSE(docker_args(compile(), Engine::Docker, "img", "/x.json").has_value());
}

TEST_F(DockerArgsTest, NoSeccompOnlyWhenThePlanSaysSo) {
  plan::Plan p = compile();
  p.seccomp = false;
  Args a = args(p);
  EXPECT_FALSE(std::any_of(a.begin(), a.end(), [](auto& s) { return s.starts_with("seccomp="); }));
  p.seccomp = true;
  EXPECT_FALSE(docker_args(p, Engine::Docker, "img", "").has_value());  // no profile file: refused
}

}  // namespace
}  // namespace exg::oci
