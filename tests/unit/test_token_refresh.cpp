// OAuth refresh at the proxy (issue 45): the tokens a response carries, a
// learned successor secret in the index, bodyHosts, and the user's credential
// file brought up to date (the integration test drives it all through a sandbox:
// test_egress_sandbox_secrets_oauth.sh).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "egress/rules.hpp"
#include "egress/secrets.hpp"
#include "egress/token_refresh.hpp"

namespace {

using namespace exg::egress;

TEST(TokenRefresh, FieldsAtAnyDepth) {
  auto got = refreshed_tokens(R"({"access_token":"a1","x":{"refresh_token":"r1","n":[{"access_token":"a2"}]},
                                  "id_token":"i","expires_in":3600,"refresh_token":7})",
                              {"access_token", "refresh_token"});
  using V = std::vector<std::pair<std::string, std::string>>;
  std::sort(got.begin(), got.end());  // (objects' keys come sorted, not in document order)
  EXPECT_EQ(got, (V{{"access_token", "a1"}, {"access_token", "a2"}, {"refresh_token", "r1"}}));
  EXPECT_TRUE(refreshed_tokens(R"({"access_token":"a1")", {"access_token"}).empty());  // truncated
  EXPECT_TRUE(refreshed_tokens("not a token answer", {"access_token"}).empty());
}

// A token endpoint answering form-encoded (GitHub's does by default): its
// pairs, percent-decoded; what is not such a body gives nothing.
TEST(TokenRefresh, FormEncodedAnswers) {
  using V = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(refreshed_tokens("access_token=gho_a1&scope=repo&token_type=bearer&refresh_token=ghr_r%2F1%2b%3D\r\n",
                             {"access_token", "refresh_token"}),
            (V{{"access_token", "gho_a1"}, {"refresh_token", "ghr_r/1+="}}));
  EXPECT_EQ(refreshed_tokens("access%5Ftoken=a+b", {"access_token"}), (V{{"access_token", "a b"}}));
  EXPECT_TRUE(refreshed_tokens("access_token=a1&broken", {"access_token"}).empty());      // a pair without '='
  EXPECT_TRUE(refreshed_tokens("access_token=a%zz1", {"access_token"}).empty());          // a bad escape
  EXPECT_TRUE(refreshed_tokens("access_token=a%4", {"access_token"}).empty());            // a cut escape
  EXPECT_TRUE(refreshed_tokens("access_token=a1&=x", {"access_token"}).empty());          // a pair without a name
  EXPECT_TRUE(refreshed_tokens("<p>access_token=a1</p> x", {"access_token"}).empty());    // prose, not a form
  EXPECT_TRUE(refreshed_tokens("token_type=bearer", {"access_token"}).empty());
}

std::shared_ptr<SecretsConfig> token_config() {
  auto c = std::make_shared<SecretsConfig>();
  Secret s{"TOK", "exg_ph_TOK_0123456789abcdef0123456789abcdef", "old-token-value", {"api.vendor.test", "auth.vendor.test"}};
  s.headers = {"authorization"};
  s.refresh_field = "access_token";
  s.body_hosts = {"auth.vendor.test"};
  s.source_file = "/home/u/.vendor/credentials.json";
  c->secrets.push_back(s);
  c->secrets.push_back(Secret{"OTHER", "exg_ph_OTHER_0123456789abcdef0123456789abcdef", "other-value", {"other.test"}});
  return c;
}

TEST(TokenRefresh, SuccessorHasANewPlaceholderAndExactlyTheScopeOfTheSecretItReplaces) {
  auto idx = SecretIndex::build(token_config());
  ASSERT_TRUE(idx) << idx.error().str();
  auto next = idx->with_successor(0, "new-token-value");
  ASSERT_TRUE(next) << next.error().str();
  EXPECT_EQ(idx->secrets().size(), 2u);  // the index it was made from is not changed
  const auto& all = next->secrets();
  ASSERT_EQ(all.size(), 3u);
  const Secret &old = all[0], &n = all[2];
  EXPECT_EQ(n.name, "TOK");
  EXPECT_EQ(n.value, "new-token-value");
  EXPECT_NE(n.placeholder, old.placeholder);
  EXPECT_TRUE(n.placeholder.starts_with("exg_ph_TOK_"));
  EXPECT_EQ(n.hosts, old.hosts);
  EXPECT_EQ(n.headers, old.headers);
  EXPECT_EQ(n.body_hosts, old.body_hosts);
  EXPECT_EQ(n.refresh_field, old.refresh_field);
  EXPECT_EQ(n.source_file, old.source_file);
  EXPECT_EQ(n.set_header, old.set_header);
  EXPECT_EQ(old.value, "old-token-value");  // the old one stays
  auto api = *normalise_host("api.vendor.test"), auth = *normalise_host("auth.vendor.test"),
       other = *normalise_host("other.test");
  EXPECT_EQ(next->for_host(api, 443), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(next->for_host(auth, 443), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(next->for_host(other, 443), (std::vector<size_t>{1}));
  EXPECT_EQ(next->allowed_in_header({0, 2}, "Authorization"), (std::vector<size_t>{0, 2}));
  EXPECT_TRUE(next->allowed_in_header({0, 2}, "x-other").empty());
  // An id list of the host taken from the older index is brought up to this one.
  EXPECT_EQ(next->with_successors({0}), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(next->with_successors({1}), (std::vector<size_t>{1}));
  // Its placeholder on the API host is the host's own; on another host, refused as any is.
  EXPECT_EQ(next->find("Bearer " + n.placeholder, next->for_host(api, 443)), nullptr);
  EXPECT_EQ(next->find("Bearer " + n.placeholder, next->for_host(other, 443)), &n);
  // bodyHosts: the token host's bodies get the value, the API's do not.
  EXPECT_EQ(next->in_body({0, 2}, auth, 443), (std::vector<size_t>{0, 2}));
  EXPECT_TRUE(next->in_body({0, 2}, api, 443).empty());
  // A successor's successor: same scope, found from the first one's id too.
  auto third = next->with_successor(2, "newer-token-value");
  ASSERT_TRUE(third);
  EXPECT_EQ(third->with_successors({0}), (std::vector<size_t>{0, 2, 3}));
  EXPECT_EQ(third->for_host(api, 443), (std::vector<size_t>{0, 2, 3}));
}

TEST(TokenRefresh, SharedIndexLearnsFromTheNewestOfTheChainOnce) {
  auto built = SecretIndex::build(token_config());
  ASSERT_TRUE(built);
  SharedSecretIndex shared(std::move(*built));
  auto first = shared.now();
  auto auth = *normalise_host("auth.vendor.test"), other = *normalise_host("other.test");
  auto a = shared.learn(auth, 443, "access_token", "new-token-1");
  ASSERT_TRUE(a) << a.error().str();
  ASSERT_TRUE(a->of && a->successor);
  EXPECT_EQ(*a->of, 0u);
  EXPECT_EQ(*a->successor, 2u);
  EXPECT_EQ(shared.now(), a->index);
  EXPECT_EQ(first->secrets().size(), 2u);  // a snapshot taken before is as it was
  auto b = shared.learn(auth, 443, "access_token", "new-token-2");
  ASSERT_TRUE(b && b->successor);
  EXPECT_EQ(*b->of, 2u);  // the newest: its value is the one the file holds
  // The same value again (a refresh answered twice): nothing new.
  auto again = shared.learn(auth, 443, "access_token", "new-token-2");
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->successor);
  EXPECT_EQ(shared.now()->secrets().size(), 4u);
  // A field no secret of that host refreshes, or a host without it: nothing.
  auto none = shared.learn(other, 443, "access_token", "new-token-3");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->successor);
  EXPECT_FALSE(shared.learn(auth, 443, "refresh_token", "new-token-4")->successor);
}

// Sessions read the index on their threads while one of them learns: every
// snapshot a reader takes is whole (each of its placeholders found, each
// successor in its host's list), and a scanner following the index catches a
// placeholder handed out after it started. (No lock on the reader's side but
// the snapshot's: a data race here is what TSan/ASan builds of this test see.)
TEST(TokenRefresh, LearningWhileOtherThreadsLookUp) {
  auto built = SecretIndex::build(token_config());
  ASSERT_TRUE(built);
  SharedSecretIndex shared(std::move(*built));
  auto api = *normalise_host("api.vendor.test"), other = *normalise_host("other.test");
  constexpr int kLearned = 200;
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, looked{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      size_t seen = 0;
      PlaceholderScanner follow(shared, shared.now()->for_host(other, 443));
      while (!stop.load()) {
        auto snap = shared.now();
        const auto& all = snap->secrets();
        if (all.size() < seen) ++bad;  // never goes back
        seen = all.size();
        size_t last = all.size() - 1;
        while (all[last].name != "TOK") --last;  // the newest TOK (the first: before any refresh)
        auto own = snap->for_host(api, 443);
        if (std::find(own.begin(), own.end(), last) == own.end()) ++bad;
        if (snap->find(all[last].placeholder) != &all[last]) ++bad;
        if (snap->find("x" + all[last].placeholder, own) != nullptr) ++bad;
        // The newest placeholder, to a host it is not meant for, through a scanner made earlier.
        auto newer = shared.now();
        const Secret* hit = follow.feed(" " + newer->secrets().back().placeholder + " ");
        if (newer->secrets().size() > 2 && (!hit || hit->name != "TOK")) ++bad;
        ++looked;
      }
    });
  for (int i = 0; i < kLearned; ++i) {
    auto r = shared.learn(api, 443, "access_token", "token-value-" + std::to_string(i));
    if (!r || !r->successor) ++bad;
  }
  while (looked.load() < 100) std::this_thread::yield();
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  auto end = shared.now();
  ASSERT_EQ(end->secrets().size(), 2u + kLearned);
  EXPECT_EQ(end->with_successors({0}).size(), 1u + kLearned);
  EXPECT_EQ(end->secrets().back().value, "token-value-" + std::to_string(kLearned - 1));
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(TokenRefresh, WriteBackReplacesTheOldValueKeepingTheMode) {
  char dir[] = "/tmp/exg-token-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string p = std::string(dir) + "/.credentials.json";
  std::ofstream(p) << R"({"o":{"accessToken":"old-a","refreshToken":"old-r","x":"old-a"}})";
  ASSERT_EQ(chmod(p.c_str(), 0600), 0);
  ASSERT_TRUE(write_back_token(p, "old-a", "new-access"));
  EXPECT_EQ(slurp(p), R"({"o":{"accessToken":"new-access","refreshToken":"old-r","x":"new-access"}})");
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // The old value gone (changed outside meanwhile): left as it is, an error.
  auto r = write_back_token(p, "old-a", "newer");
  EXPECT_FALSE(r);
  EXPECT_EQ(slurp(p), R"({"o":{"accessToken":"new-access","refreshToken":"old-r","x":"new-access"}})");
  EXPECT_FALSE(write_back_token(std::string(dir) + "/absent.json", "a", "b"));
  unlink(p.c_str());
  rmdir(dir);
}

}  // namespace
