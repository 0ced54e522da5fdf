// plan/local_account.hpp: a uid's account read from /etc/passwd only where
// that is certain to be getpwuid(3)'s answer, NSS otherwise.
#include <gtest/gtest.h>

#include <pwd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "plan/local_account.hpp"

namespace exg::plan {
namespace {

// Every account of this host's /etc/passwd: the same group and name as
// getpwuid gives (whichever way account_of took).
TEST(LocalAccount, AnswersAsGetpwuidForEveryLocalAccount) {
  std::ifstream f("/etc/passwd");
  std::set<uid_t> uids;
  for (std::string line; std::getline(f, line);) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    uids.insert(static_cast<uid_t>(std::stoul(line.substr(b + 1))));
  }
  ASSERT_FALSE(uids.empty());
  for (uid_t u : uids) {
    passwd* pw = ::getpwuid(u);
    ASSERT_NE(pw, nullptr) << u;
    std::string name = pw->pw_name;
    gid_t gid = pw->pw_gid;
    auto a = account_of(u);
    ASSERT_TRUE(a) << u;
    EXPECT_EQ(a->name, name) << u;
    EXPECT_EQ(a->gid, gid) << u;
  }
  // A uid no account has: none, as getpwuid says.
  uid_t unused = 1500000000u + 12345;
  if (!::getpwuid(unused)) {
    EXPECT_FALSE(account_of(unused));
  }
}

TEST(LocalAccount, TakesTheFirstEntryOfTheUid) {
  std::string text =
      "# comment\n"
      "\n"
      "root:x:0:0:root:/root:/bin/bash\n"
      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
      "other:x:65534:7::/:/bin/sh\n";
  auto a = files_account(text, 65534);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "nobody");
  EXPECT_EQ(a->gid, 65534u);
  auto r = files_account(text, 0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "root");
  EXPECT_FALSE(files_account(text, 1000));  // not in the files: NSS's other sources are asked
  // The last line without its newline still counts (glibc reads it too).
  auto last = files_account("a:x:1:2:::\nb:x:3:4::/:/bin/sh", 3);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->name, "b");
  EXPECT_EQ(last->gid, 4u);
  // Leading zeros are the same number to glibc's strtoul.
  auto z = files_account("z:x:007:010:::\n", 7);
  ASSERT_TRUE(z);
  EXPECT_EQ(z->gid, 10u);
}

// Lines glibc would read otherwise than this reader (or skip where it would
// not): before the entry, each sends the lookup to NSS.
TEST(LocalAccount, LeavesToNssWhatItDoesNotReadExactly) {
  const std::string entry = "u:x:1000:1000::/home/u:/bin/sh\n";
  for (const std::string& before : std::vector<std::string>{"+::::::\n", "-bad:x:1000:5:::\n", "+u:x:1000:9:::\n", "  u:x:1000:9:::\n",
                              ":x:1000:9:::\n", "w:x: 1000:9:::\n", "w:x:+1000:9:::\n", "w:x::9:::\n",
                              "w:x:1000:9\n", "w:x:99999999999:9:::\n", "nocolons\n", "w:x\n",
                              std::string("w:x:1\0:9:::\n", 12)}) {
    EXPECT_FALSE(files_account(before + entry, 1000)) << before;
  }
  // Blank lines and comments are skipped, as glibc skips them.
  EXPECT_TRUE(files_account("\n\r\n#c:x:1000:9:::\n" + entry, 1000));
}

TEST(LocalAccount, NsswitchFilesFirst) {
  EXPECT_TRUE(passwd_files_first("passwd:         files systemd\ngroup: files\n"));
  EXPECT_TRUE(passwd_files_first("# comment [with brackets\npasswd: files\n"));
  EXPECT_TRUE(passwd_files_first("passwd:files\n"));
  EXPECT_TRUE(passwd_files_first("  passwd : files\n"));
  EXPECT_TRUE(passwd_files_first("passwd files\n"));  // glibc needs no colon
  EXPECT_TRUE(passwd_files_first("passwd: files\nhosts: files mdns4_minimal [NOTFOUND=return] dns\n"));
  EXPECT_TRUE(passwd_files_first("passwd: files\nhosts: files [!UNAVAIL=return] dns\n"));
  EXPECT_TRUE(passwd_files_first("passwd: files systemd [SUCCESS=merge]\n"));  // only files' own actions matter
  EXPECT_TRUE(passwd_files_first("sudoers: files [broken\npasswd: files\n"));  // not a database glibc reads

  EXPECT_FALSE(passwd_files_first(""));                                  // glibc's default then
  EXPECT_FALSE(passwd_files_first("group: files\n"));                    // no passwd line
  EXPECT_FALSE(passwd_files_first("passwd: files"));                     // a last line without '\n' is not read
  EXPECT_FALSE(passwd_files_first("passwd: compat\n"));
  EXPECT_FALSE(passwd_files_first("passwd: systemd files\n"));
  EXPECT_FALSE(passwd_files_first("passwd: sss files\n"));
  EXPECT_FALSE(passwd_files_first("passwd: files [SUCCESS=continue] sss\n"));
  EXPECT_FALSE(passwd_files_first("passwd: files [NOTFOUND=return]\n"));  // (could still be taken; not worth it)
  EXPECT_FALSE(passwd_files_first("passwd: filesx\n"));
  EXPECT_FALSE(passwd_files_first("passwd:\n"));
  EXPECT_FALSE(passwd_files_first("passwd: files\npasswd: sss files\n"));  // the last one counts
  EXPECT_TRUE(passwd_files_first("passwd: sss\npasswd: files\n"));
  EXPECT_FALSE(passwd_files_first("PASSWD: files\n"));  // glibc's names are case-sensitive: no passwd line
  // A syntax error in any database's line fails every lookup in glibc.
  EXPECT_FALSE(passwd_files_first("passwd: files\nhosts: files [NOTFOUND=retrun] dns\n"));
  EXPECT_FALSE(passwd_files_first("passwd: files\nhosts: files [NOTFOUND=return\n"));
  EXPECT_FALSE(passwd_files_first("passwd: files\ngroup: files [=return]\n"));
  EXPECT_FALSE(passwd_files_first(std::string("passwd: files\n\0", 15)));
}

}  // namespace
}  // namespace exg::plan
