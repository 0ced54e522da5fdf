#!/usr/bin/env bash
# The seed's escape lines, run inside the default sandbox as an agent would (cwd = workspace).
# Each is refused (or finds nothing), never shows the canary, and changes nothing on the host.
source "$(dirname "$0")/lib.sh"

new_workspace
plant_canaries
hook=$WS/.git/hooks/pre-commit
printf '#!/bin/sh\necho original-hook\n' > "$hook"
chmod 755 "$hook"
hook_sum=$(sha256sum < "$hook")

require_sandbox || finish

lines=(
    'touch ~/escape-test'
    'cat ~/.ssh/id_ed25519 ~/.aws/credentials'
    "env | grep -i -E 'key|token|secret'"
    'ls -l /var/run/docker.sock'
    "echo 'echo pwned' >> .git/hooks/pre-commit"
    "echo 'echo pwned' >> .git/hooks/post-checkout"
)

# Each line with what stops it. HOME takes throwaway writes: the touch works inside and must
# just not reach the host (checked below).
expect_status 0 sh_in "${lines[0]}"
expect_refused_sh 'id_ed25519: Permission denied' "$CANARY" "${lines[1]}"
last_refused 'credentials: Permission denied' "$CANARY" "${lines[1]}"
# The environment holds nothing to find: grep matches no line (exit 1) and prints nothing.
run sh_in "echo $RAN_MARK; ${lines[2]}"
if [ "$STATUS" = 1 ] && [ "$OUT" = "$RAN_MARK" ] && [ -z "$ERR" ]; then ok "nothing found: ${lines[2]}"
else fail "found something or did not run: ${lines[2]}"; show_last; fi
# (gVisor, when this script is run there by hand: its statx answers EINVAL on this host, so
# ls fails that way on any path)
no_such='No such file or directory'
on_layer gvisor && no_such='No such file or directory|Invalid argument'
expect_refused_sh "docker.sock.*($no_such)" '' "${lines[3]}"
expect_refused_sh 'pre-commit: Read-only file system' '' "${lines[4]}"
expect_refused_sh 'post-checkout: Read-only file system' '' "${lines[5]}"

# All lines at once, the way the seed's one-liner runs them.
joined=$(printf '%s; ' "${lines[@]}")
expect_refused_sh 'post-checkout: Read-only file system' "$CANARY" "$joined"

# Runtime sockets are invisible: /run and /var/run are empty inside.
# /run and /var/run hold nothing of the host: only exguardian's own directory (its binary, for
# probes), and no socket anywhere below them.
expect_status 0 sh_in 'test "$(ls -A /run)" = exguardian && test "$(ls -A /var/run/)" = exguardian && test -z "$(find /run /var/run/ -type s 2>/dev/null)"'

# Host side afterwards.
check "no \$HOME/escape-test on the host" test ! -e "$HOME/escape-test"
check ".git/hooks/pre-commit unchanged on the host" test "$(sha256sum < "$hook")" = "$hook_sum"
check ".git/hooks/post-checkout not created on the host" test ! -e "$WS/.git/hooks/post-checkout"
check "canary files unchanged on the host" canaries_unchanged

finish
