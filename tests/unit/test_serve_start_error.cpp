// serve's typed start errors: what the supervisor would refuse of a create's
// own egress (allowOut, denyOut, network.rules) is found before it starts and
// typed as the request's fault (400); the server's own configuration (the
// template's domains) never is. The status comes from the kind, not the text.
#include <gtest/gtest.h>

#include "serve/start_error.hpp"

using namespace exg::serve;

namespace {

std::string rules_policy(const std::string& header) {
  return R"({"secrets": [{"name": "E2B_RULE_1", "from": "env:EXG_E2B_RULE_1", "hosts": ["api.test"], "setHeader": ")" +
         header + R"("}]})";
}

}  // namespace

TEST(ServeStartError, TheRequestsOwnEgressIsCheckedAsTheSupervisorWould) {
  RequestEgress ok{.allowed = {"api.test"}, .allow_out = {"api.test"}, .rule_hosts = {"api.test"},
                   .policy_name = "/s/policy.json", .policy_dir = "/s", .policy_text = rules_policy("X-Api-Key")};
  EXPECT_FALSE(request_egress_refusal(ok));

  RequestEgress bad_allow{.allowed = {"a b"}, .allow_out = {"a b"}};
  auto e = request_egress_refusal(bad_allow);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, StartError::Kind::Request);
  EXPECT_TRUE(e->message.starts_with("network.allowOut: whitespace in domain")) << e->message;

  RequestEgress bad_deny{.deny_out = {"https://x.test"}};
  e = request_egress_refusal(bad_deny);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, StartError::Kind::Request);
  EXPECT_TRUE(e->message.starts_with("network.denyOut: ")) << e->message;

  // A rule for a host the request also denies: the supervisor refuses the secret's host.
  RequestEgress denied_rule = ok;
  denied_rule.deny_out = {"api.test"};
  e = request_egress_refusal(denied_rule);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, StartError::Kind::Request);
  EXPECT_TRUE(e->message.starts_with("network.rules.api.test: ")) << e->message;
  EXPECT_NE(e->message.find("denied"), std::string::npos) << e->message;

  RequestEgress unreachable_rule = ok;
  unreachable_rule.allowed = {"other.test"};
  e = request_egress_refusal(unreachable_rule);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("not allowed"), std::string::npos) << e->message;

  // What the policy parser refuses in the request's policy file (its rules as secrets).
  RequestEgress bad_header = ok;
  bad_header.policy_text = rules_policy("bad header");
  e = request_egress_refusal(bad_header);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, StartError::Kind::Request);
  EXPECT_TRUE(e->message.starts_with("network.rules: /s/policy.json:")) << e->message;
}

TEST(ServeStartError, TheTemplatesDomainsAreNotTheRequests) {
  // A bad domain of the template (or of the tenant's secrets) is passed on as
  // --allow-domain too; its refusal is the supervisor's, typed Server there.
  RequestEgress from_template{.allowed = {"a b", "api.test"}, .allow_out = {"api.test"}};
  EXPECT_FALSE(request_egress_refusal(from_template));
  EXPECT_EQ(StartError::server("x").kind, StartError::Kind::Server);
  EXPECT_EQ(StartError{}.kind, StartError::Kind::Server);
}
