#!/usr/bin/env bash
# The seed's escape lines, run inside the default sandbox as an agent would (cwd = workspace).
# Each must fail or print nothing, never show the canary, and change nothing on the host.
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

for line in "${lines[@]}"; do
    run sh_in "$line"
    if [ "$STATUS" -ne 0 ] || [ -z "$OUT" ]; then
        ok "fails or prints nothing: $line (status $STATUS)"
    else
        fail "succeeded with output: $line"; show_last
    fi
    last_output_lacks "$CANARY" "no canary in output: $line"
done

# All lines at once, the way the seed's one-liner runs them.
joined=$(printf '%s; ' "${lines[@]}")
run sh_in "$joined"
last_output_lacks "$CANARY" "no canary in output of the joined escape lines"

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
