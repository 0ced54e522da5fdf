// A uid's account (its primary group and name) as getpwuid(3) answers, read
// from /etc/passwd where that text alone is certain to be glibc's answer.
// NSS's first call in a process (two nscd probes, nsswitch.conf read and
// parsed, its tables set up, its code paged in) cost 60-90 us of a run's
// plan, for the one lookup a root run with someone else's workspace makes.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace exg::plan {

struct Account {
  gid_t gid = 0;
  std::string name;
};

// getpwuid(uid)'s answer: from /etc/passwd when glibc would take it from
// there (no nscd socket, nsswitch.conf's passwd line starts with "files" and
// says nothing about it, the entry and every line before it read exactly as
// glibc reads them), else from getpwuid itself. nullopt: no such account.
std::optional<Account> account_of(uid_t uid);

// Whether, with this nsswitch.conf, glibc's passwd lookups ask "files" first
// and stop at an entry found there: the file parses (glibc 2.33+ fails every
// lookup on a syntax error in any database's line) and its last passwd line
// names "files" first with no [STATUS=ACTION] after it.
bool passwd_files_first(std::string_view nsswitch_conf);

// uid's first entry in passwd's text as glibc's files source finds it, or
// nullopt when there is none or when a line before it (or it) is one this
// reader does not take exactly as glibc does (leading blanks, a +/- entry, an
// empty name, a uid or gid that is not plain digits, a NUL): then ask NSS.
std::optional<Account> files_account(std::string_view passwd, uid_t uid);

}  // namespace exg::plan
