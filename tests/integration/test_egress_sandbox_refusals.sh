#!/usr/bin/env bash
# The refusal summary (issue 40): at the end of every `exguardian run` that refused something,
# a few lines on stderr say what, with counts: the hosts the proxy refused and the rule that
# refused each, the syscalls the seccomp filter refused, the planted files quarantined. Without
# it a refused host was only curl's "403" and a refused syscall only "Operation not permitted".
# --quiet leaves it out; a run that refused nothing has none. Runs in the egress test world
# (run.sh builds it for test_egress_sandbox*): the refused hosts never reach a server anyway.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

cat > "$T/policy.json" <<'JSON'
{
  "network": {"allowedDomains": ["allowed.test", "denied.test"], "deniedDomains": ["denied.test"]},
  "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}
}
JSON
# A refused host (deniedDomains), one off the list, a refused syscall (a nested user namespace),
# a planted file (a bare repository's config in src/ naming a command, core.fsmonitor: quarantined
# at exit, exit 123; one with only plain values, as OpenCode's snapshot store writes, is kept).
attack='curl -sS -m 10 -o /dev/null http://denied.test/ 2>/dev/null
curl -sS -m 10 -o /dev/null http://other.test/ 2>/dev/null
curl -sS -m 10 -o /dev/null http://other.test/again 2>/dev/null
unshare -U -r true 2>/dev/null
mkdir src src/objects src/refs; echo "ref: refs/heads/main" > src/HEAD
printf "[core]\n\tfsmonitor = ./watch\n" > src/config
echo '"$RAN_MARK"'
exit 0'

summary_of() { sed -n '/^exguardian: refused in this run/,$p' <<<"$ERR"; }

run sbx --policy "$T/policy.json" -- bash -c "$attack"
if ! grep -qxF "$RAN_MARK" <<<"$OUT"; then fail "the attack did not run (exit $STATUS)"; show_last; fi
check "planted file: exit 123 (got $STATUS)" test "$STATUS" = 123
s=$(summary_of)
check "a summary heading" grep -qxF "exguardian: refused in this run (each one: -v or --audit-log; no summary: --quiet):" <<<"$s"
check "egress: 3 refusals, the hosts with their counts, most first, and each one's rule" \
    grep -qxF "exguardian:   egress: 3 refusals: other.test x2 (default deny (not on the allow list)), denied.test x1 (deniedDomains[0] \"denied.test\")" <<<"$s"
check "syscalls: the nested namespace's unshare, counted" grep -qE "^exguardian:   syscalls: [0-9]+ refused: (.*, )?unshare x[0-9]+" <<<"$s"
check "planted files: the quarantined config, named" grep -qxF "exguardian:   planted files: 1 quarantined: src/config" <<<"$s"
check "a few lines, not one a refusal" test "$(grep -c . <<<"$s")" -le 5
check "the planted file is out of the workspace" test ! -e "$WS/src/config"
rm -rf "$WS/src"

# --quiet: no summary; the planted file's own line (and exit 123) stay.
run sbx --quiet --policy "$T/policy.json" -- bash -c "$attack"
check "--quiet: the attack ran, exit 123 (got $STATUS)" test "$STATUS" = 123
if grep -qF "refused in this run" <<<"$ERR"; then fail "--quiet: a summary anyway"; show_last
else ok "--quiet: no summary"; fi
check "--quiet: the planted file is still reported" grep -qF "planted: src/config" <<<"$ERR"
rm -rf "$WS/src"
run sbx -q --policy "$T/policy.json" -- bash -c 'curl -sS -m 10 -o /dev/null http://other.test/ 2>/dev/null; exit 0'
if [ "$STATUS" -eq 0 ] && ! grep -qF "refused in this run" <<<"$ERR"; then ok "-q is --quiet"
else fail "-q: exit $STATUS or a summary"; show_last; fi

# Only what this run refused: an allowed host and ordinary work give no summary.
run sbx --policy "$T/policy.json" -- bash -c 'curl -sS -m 10 http://allowed.test/ && echo done > out.txt'
check "nothing refused: the run worked" grep -q "hello from" <<<"$OUT"
if grep -qF "refused" <<<"$ERR"; then fail "nothing refused, yet a summary"; show_last
else ok "nothing refused: no summary"; fi

finish
