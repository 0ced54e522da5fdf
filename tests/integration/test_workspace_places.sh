#!/usr/bin/env bash
# Workspaces where users keep them, on every layer: writes land on the host.
# - inside HOME (~/project: HOME is a throwaway overlay, the workspace its own writable bind;
#   on the container and gVisor layers writes there were silently dropped into HOME's layer);
# - with a directory whose group is not the user's own (`chgrp users sub`), and a workspace
#   whose own group is another (issue 12, part 6: gVisor as a user refused these).
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

# ---- a workspace inside HOME --------------------------------------------------------------
mkdir -p "$HOME/proj"
echo 'home-original' > "$HOME/keep.txt"
WS=$HOME/proj
run sbx -- sh -c 'echo from-sandbox > made.txt && mkdir -p d && echo x > d/f && echo thrown > ~/home-write.txt'
if [ "$STATUS" -eq 0 ] && [ "$(cat "$HOME/proj/made.txt" 2>/dev/null)" = from-sandbox ] && [ -f "$HOME/proj/d/f" ]; then
    ok "workspace inside HOME: writes land in the workspace on the host"
else fail "workspace inside HOME: writes did not reach the host"; show_last; ls -la "$HOME/proj" | sed 's/^/#      /'; fi
if [ ! -e "$HOME/home-write.txt" ] && [ "$(cat "$HOME/keep.txt")" = home-original ]; then
    ok "workspace inside HOME: HOME itself stays throwaway"
else fail "workspace inside HOME: a write to HOME reached the host"; fi
run sbx -- cat made.txt
if [ "$OUT" = from-sandbox ]; then ok "workspace inside HOME: the next run reads what the last one wrote"
else fail "workspace inside HOME: the next run does not see the last one's file"; show_last; fi
# Protected names inside it are still protected (their bind comes from the workspace, not HOME).
git -C "$HOME/proj" -c init.defaultBranch=main init -q .
printf '#!/bin/sh\necho original\n' > "$HOME/proj/.git/hooks/pre-commit"
hook_sum=$(sha256sum "$HOME/proj/.git/hooks/pre-commit")
expect_refused_sh 'pre-commit: Read-only file system' '' 'echo "echo pwned" >> .git/hooks/pre-commit'
check "workspace inside HOME: its git hook unchanged on the host" test "$(sha256sum "$HOME/proj/.git/hooks/pre-commit")" = "$hook_sum"

# ---- entries of another group ------------------------------------------------------------
if getent group users >/dev/null && { [ "$(id -u)" -eq 0 ] || id -nG | tr ' ' '\n' | grep -qx users; }; then
    WS=$T/grp
    mkdir -p "$WS/sub"
    chgrp users "$WS/sub"
    run sbx -- sh -c 'touch sub/x && echo ok > sub/y && mkdir sub/z && touch top'
    if [ "$STATUS" -eq 0 ] && [ -f "$WS/sub/x" ] && [ "$(cat "$WS/sub/y")" = ok ] && [ -d "$WS/sub/z" ]; then
        ok "a workspace directory of group 'users' is writable"
    else fail "a workspace directory of group 'users' is not writable"; show_last; fi
    WS=$T/grp2
    mkdir -p "$WS"
    chgrp users "$WS"
    chmod 700 "$WS"
    run sbx -- sh -c 'echo ok > f && cat f'
    if [ "$STATUS" -eq 0 ] && [ "$(cat "$WS/f" 2>/dev/null)" = ok ]; then
        ok "a 0700 workspace of group 'users' is writable"
    else fail "a 0700 workspace of group 'users' is not writable"; show_last; fi
else
    fail "the runner is not in the group 'users' (run.sh adds exgtest to it): cannot check other groups"
fi

# ---- --workspace-mode overlay and discard without --keep (issue 39, part 9) ---------------------
# The layer directory is then ExGuardian's own, under /var/tmp; on the gVisor layer and on the
# container layer as an ordinary user its overlay was reported to fail ("mount overlay ...
# Invalid argument"): writes must be applied (overlay) or dropped (discard).
new_workspace ovl
run sbx --workspace-mode overlay -- sh -c 'echo x > f && mkdir -p d && echo y > d/g'
if [ "$STATUS" -eq 0 ] && [ "$(cat "$WS/f" 2>/dev/null)" = x ] && [ "$(cat "$WS/d/g" 2>/dev/null)" = y ]; then
    ok "overlay without --keep: starts, and the writes are applied at exit"
else fail "overlay without --keep: did not start or did not apply"; show_last; fi
run sbx --workspace-mode discard -- sh -c 'echo z > dropped && cat README.md'
if [ "$STATUS" -eq 0 ] && [ ! -e "$WS/dropped" ] && grep -q "test workspace" <<<"$OUT"; then
    ok "discard without --keep: starts, reads the workspace, drops the writes"
else fail "discard without --keep: did not start or kept a write"; show_last; fi

# ---- discard as an ordinary user with another mount under /var ---------------------------------
# podman leaves its storage bound under /var (/var/lib/containers/storage/overlay); any mount
# below /var made the container layers' runtime host seal /var read-only before it mounted the
# discard overlay, whose upper lies in /var/tmp: "mount overlay ...: Invalid argument". Set up
# here in a private mount namespace (root makes the bind), the sandbox run as exgtest in it.
if [ "$EXG_AS" = root ] && on_layer container gvisor && id -u exgtest >/dev/null 2>&1; then
    new_workspace varsub
    chown -R exgtest: "$WS"
    mkdir -p "$O/sub"
    run unshare --mount --propagation private bash -c '
        mount --bind "$1" "$1" || exit 90
        cd "$2" && exec setpriv --reuid=exgtest --regid="$(id -g exgtest)" --init-groups --reset-env -- \
            "$3" run --no-policy-files --layer "$4" --workspace-mode discard -- sh -c "echo z > dropped && cat README.md"' \
        _ "$O/sub" "$WS" "$EXG" "$EXG_LAYER"
    if [ "$STATUS" -eq 0 ] && [ ! -e "$WS/dropped" ] && grep -q "test workspace" <<<"$OUT"; then
        ok "discard as exgtest with a mount below /var (as podman leaves one): starts, drops the writes"
    else fail "discard as exgtest with a mount below /var: status $STATUS"; show_last; fi
fi

finish
