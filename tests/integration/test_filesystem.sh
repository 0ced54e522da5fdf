#!/usr/bin/env bash
# Filesystem rules of the default sandbox: workspace writable and persistent, the rest of the
# host read-only, HOME readable with throwaway writes, private /tmp, symlinks, protected paths,
# ordinary tools, and the policy/CLI knobs for paths.
source "$(dirname "$0")/lib.sh"

new_workspace
plant_canaries
ws_owner=$(stat -c %u "$WS")

# Files the protected-path checks use, planted from the host before the sandbox runs.
mkdir -p "$WS/a/b/c" "$WS/.vscode"
git -C "$WS/a/b/c" -c init.defaultBranch=main init -q .
printf '#!/bin/sh\necho nested-hook\n' > "$WS/a/b/c/.git/hooks/pre-commit"
chmod 755 "$WS/a/b/c/.git/hooks/pre-commit"
echo '{"editor.fontSize": 12}' > "$WS/.vscode/settings.json"
echo '# rc' > "$WS/.bashrc"
mkdir -p "$WS/x/y" "$WS/.claude/commands"
echo 'export X=0' > "$WS/.envrc"
echo 'export X=0' > "$WS/x/y/.envrc"
echo '{"mcpServers": {}}' > "$WS/.mcp.json"
echo 'original' > "$WS/.claude/commands/review.md"
echo '{}' > "$WS/.exguardian.json"
echo '[submodule "s"]' > "$WS/.gitmodules"
echo 'private-ws-data' > "$WS/private.txt"

# Listing of the workspace, to see that the sandbox creates nothing there (no placeholders).
ws_listing() { (cd "$WS" && find . -path ./.git/objects -prune -o -print | sort); }
protected_sums() {
    (cd "$WS" && find .git/hooks .git/config a/b/c/.git/hooks a/b/c/.git/config .vscode .bashrc \
        -type f -print0 2>/dev/null | sort -z | xargs -0 sha256sum)
}
listing_before=$(ws_listing)
protected_before=$(protected_sums)

require_sandbox || finish
check_refusal_helpers   # (the refusal helpers this script leans on can fail, on this layer too)

# ---- no placeholder files, neither while a sandbox runs nor after --------------------------
# (listed while the sandbox's command runs, however long its start takes)
hold_sandbox || { fail "the sandbox did not come up"; finish; }
listing_during=$(ws_listing)
release_sandbox
if [ "$listing_during" = "$listing_before" ]; then ok "workspace unchanged while a sandbox runs"
else fail "sandbox created files in the workspace while running"
     diff <(echo "$listing_before") <(echo "$listing_during") | sed 's/^/#      /'; fi
if [ "$(ws_listing)" = "$listing_before" ]; then ok "workspace unchanged after the sandbox exits"
else fail "sandbox left files in the workspace"
     diff <(echo "$listing_before") <(ws_listing) | sed 's/^/#      /'; fi

# ---- HOME readable (control for the masking checks) ------------------------------------------
expect_output_contains EXGHOMEOK sbx -- cat "$HOME/notes.txt"

# ---- writes outside the workspace fail -------------------------------------------------------
mkdir -m 777 "$O/open"
echo 'outside-original' > "$O/open/existing.txt"
chmod 666 "$O/open/existing.txt"
echo 'outside-original' > "$T/outside-file"
targets=(/etc/exg-x-$$ /usr/exg-x-$$ /var/lib/exg-x-$$ "$O/open/new.txt")
refusals=()
for target in "${targets[@]}"; do
    cleanup_path "$target"
    refusals+=("$RO_REFUSAL" "echo x > '$target'")
done
expect_refused_each '' -- "${refusals[@]}" "$RO_WRITABLE_REFUSAL" "echo x >> '$O/open/existing.txt'"
for target in "${targets[@]}"; do
    if [ -e "$target" ]; then fail "$target was created on the host"; rm -f "$target"
    else ok "$target not created on the host"; fi
done
# /var/tmp may be private like /tmp: the write must just not reach the host.
cleanup_path /var/tmp/exg-x-$$
run sh_in "echo x > /var/tmp/exg-x-$$"
check "/var/tmp/exg-x-$$ not created on the host" test ! -e /var/tmp/exg-x-$$
# $T is under the host's /tmp, which the sandbox replaces with its own: whether the write
# fails or lands in the private /tmp, it must not reach the host.
run sh_in "echo x > '$T/outside-new'; echo x >> '$T/outside-file'"
check "$T/outside-new not created on the host" test ! -e "$T/outside-new"
check "outside files unchanged" test "$(cat "$O/open/existing.txt" "$T/outside-file")" = "$(printf 'outside-original\noutside-original')"

# ---- workspace writes persist, owned by the workspace owner ----------------------------------
expect_status 0 sh_in 'echo persisted > created-inside.txt'
check "workspace write persists on the host" test "$(cat "$WS/created-inside.txt" 2>/dev/null)" = persisted
check "file created inside is owned by the workspace owner ($ws_owner) on the host" \
    test "$(stat -c %u "$WS/created-inside.txt" 2>/dev/null)" = "$ws_owner"
rm -f "$WS/created-inside.txt"

if [ "$EXG_AS" = root ]; then
    # Root-owned workspace: the command runs as a non-zero uid, files stay owned by root.
    run sh_in 'id -u; echo r > root-ws-file.txt'
    uid_inside=$(sed -n 1p <<<"$OUT")
    check "root-owned workspace: uid inside ($uid_inside) is not 0" test -n "$uid_inside" -a "$uid_inside" != 0
    check "root-owned workspace: created file owned by root on the host" \
        test "$(stat -c %u "$WS/root-ws-file.txt" 2>/dev/null)" = 0
    rm -f "$WS/root-ws-file.txt"

    # Workspace owned by exgtest: the command runs as exgtest, files owned by exgtest.
    saved_ws=$WS
    new_workspace ws-exgtest
    chown -R exgtest: "$WS"
    exg_uid=$(id -u exgtest)
    run sh_in 'id -u; echo u > user-ws-file.txt'
    check "exgtest-owned workspace: runs as exgtest ($exg_uid), got '$(sed -n 1p <<<"$OUT")'" \
        test "$(sed -n 1p <<<"$OUT")" = "$exg_uid"
    check "exgtest-owned workspace: created file owned by exgtest on the host" \
        test "$(stat -c %u "$WS/user-ws-file.txt" 2>/dev/null)" = "$exg_uid"
    WS=$saved_ws
fi

# ---- HOME: writes work inside, do not persist ------------------------------------------------
expect_output_contains home-write-ok sh_in 'echo x > ~/homefile && mkdir -p ~/.cache/exg && echo y > ~/.cache/exg/c && cat ~/homefile >/dev/null && echo home-write-ok'
check "HOME write does not persist on the host" test ! -e "$HOME/homefile" -a ! -e "$HOME/.cache/exg"

# ---- /tmp private and writable, TMPDIR exists ------------------------------------------------
hostmark=/tmp/exg-hostonly-$$-$RANDOM
insidemark=/tmp/exg-inside-$$-$RANDOM
echo host > "$hostmark"
cleanup_path "$hostmark"
cleanup_path "$insidemark"
expect_status 1 sh_in "test -e '$hostmark'"
expect_output_contains tmp-inside-ok sh_in "echo y > '$insidemark' && test -s '$insidemark' && echo tmp-inside-ok"
check "file written to /tmp inside is not on the host" test ! -e "$insidemark"
expect_output_contains tmpdir-ok sh_in 'test -n "$TMPDIR" && test -d "$TMPDIR" && f=$(mktemp) && echo z > "$f" && echo tmpdir-ok'

# ---- symlinks in the workspace ----------------------------------------------------------------
echo 'outside-target' > "$O/outside.txt"
chmod 666 "$O/outside.txt"   # writable by anyone: only the sandbox can stop the write
ln -s "$HOME/.ssh/id_ed25519" "$WS/link-key"
ln -s "$O/outside.txt" "$WS/link-out"
ln -s "$O/open" "$WS/link-dir"
expect_refused_each "$CANARY" -- 'cat: link-key: Permission denied' 'cat link-key' \
    'link-key: Permission denied' 'echo pwned > link-key' \
    'link-key: Permission denied' 'echo pwned >> link-key' \
    "link-out: ($RO_WRITABLE_REFUSAL)" 'echo pwned > link-out' \
    "$RO_WRITABLE_REFUSAL" 'echo pwned > link-dir/via-link.txt'
check "denied symlink target unchanged on the host" canaries_unchanged
check "outside symlink target unchanged on the host" test "$(cat "$O/outside.txt")" = outside-target
check "nothing created through a symlinked dir" test ! -e "$O/open/via-link.txt"
rm -f "$WS/link-key" "$WS/link-out" "$WS/link-dir"

# ---- protected paths, also in a nested repo three levels down ---------------------------------
# Writes, and renames or removals inside a protected directory (hooks/): the read-only bind's EROFS.
# (All in one sandbox: each line its own process, output and status.)
refusals=()
for line in \
    "echo 'echo pwned' >> a/b/c/.git/hooks/pre-commit" \
    "echo 'echo pwned' > a/b/c/.git/hooks/post-checkout" \
    "echo '[core]' >> a/b/c/.git/config" \
    "mv a/b/c/.git/hooks/pre-commit a/b/c/.git/hooks/pre-commit.old" \
    "rm -f a/b/c/.git/hooks/pre-commit" \
    "echo '[core]' >> .git/config" \
    "rm -rf .git/hooks" \
    "echo x >> .vscode/settings.json" \
    "rm -f .vscode/settings.json" \
    "echo x >> .bashrc" \
    "echo 'export X=1' > .envrc" \
    "echo 'export X=1' > x/y/.envrc" \
    "echo '{}' > .mcp.json" \
    "echo x > .claude/commands/evil.md" \
    "echo x >> .claude/commands/review.md" \
    "echo '{\"filesystem\": {}}' > .exguardian.json" \
    "echo '[submodule]' >> .gitmodules"; do
    refusals+=('Read-only file system' "$line")
done
# Renames or removals of what is a mount point of its own (a protected file, a repository's .git): EBUSY.
for line in \
    "mv a/b/c/.git/config a/b/c/.git/config.old" \
    "rm -f a/b/c/.git/config" \
    "mv a/b/c/.git a/b/c/.git2" \
    "mv .git .git2" \
    "mv x/y/.envrc x/y/envrc-moved"; do
    refusals+=('Device or resource busy' "$line")
done
expect_refused_each '' -- "${refusals[@]}"
check "protected files unchanged on the host" test "$(protected_sums)" = "$protected_before"
check ".git still in place on the host" test -d "$WS/.git" -a ! -e "$WS/.git2" -a -d "$WS/a/b/c/.git" -a ! -e "$WS/a/b/c/.git2"
for p in .claude/commands/evil.md x/y/envrc-moved a/b/c/.git/hooks/post-checkout; do
    check "$p not created on the host" test ! -e "$WS/$p"
done
# Protected names that do not exist when the sandbox starts (a new .envrc, a repo made during
# the run) are the post-run sweep's job (issue 8), not covered here.
rm -rf "$WS/x" "$WS/.claude" "$WS/.envrc" "$WS/.mcp.json" "$WS/.exguardian.json" "$WS/.gitmodules"

# ---- protected paths under a directory its owner locked (chmod 000) -------------------------
# The walk opens it by giving it u+rx for the moment, keeps it so while what lies below is walked
# (a symlinked .envrc there is followed by path to its target), and puts the mode back. As root
# the modes stop nothing, so this is the ordinary user's case.
if [ "$EXG_AS" = user ]; then
    mkdir -p "$WS/locked/proj/sub"
    echo 'echo from-envrc' > "$WS/locked-target-envrc"
    ln -s ../../locked-target-envrc "$WS/locked/proj/.envrc"
    echo 'echo from-bashrc' > "$WS/locked/proj/sub/.bashrc"
    chmod 000 "$WS/locked"
    run sbx --dry-run -- true
    check "--dry-run binds the locked tree's .bashrc read-only" grep -q "protect-ro $WS/locked/proj/sub/.bashrc" <<<"$OUT$ERR"
    check "--dry-run binds the target of its symlinked .envrc read-only" grep -q "protect-ro $WS/locked-target-envrc" <<<"$OUT$ERR"
    check "the locked directory's mode is put back after the plan" test "$(stat -c %a "$WS/locked")" = 0
    expect_refused 'Read-only file system' '' -- bash -c "echo pwned >> locked-target-envrc"
    check "the locked directory's mode is put back after the run" test "$(stat -c %a "$WS/locked")" = 0
    check "the symlinked .envrc's target is unchanged" test "$(cat "$WS/locked-target-envrc")" = 'echo from-envrc'
    chmod 755 "$WS/locked"
    rm -rf "$WS/locked" "$WS/locked-target-envrc"
fi

# ---- ordinary work: git, gcc, python3 ---------------------------------------------------------
expect_status 0 sbx -- git status --short
expect_status 0 sh_in 'echo hello > inside.txt && git add inside.txt && git -c user.name=t -c user.email=t@t commit -q -m inside-commit'
check "commit made inside is in the host repo" bash -c "git -C '$WS' log --format=%s -1 | grep -qx inside-commit"
if command -v gcc >/dev/null; then
    printf '#include <stdio.h>\nint main(void){puts("hello-from-gcc");return 0;}\n' > "$WS/hello.c"
    expect_output_contains hello-from-gcc sh_in 'gcc -o hello hello.c && ./hello'
    rm -f "$WS/hello.c" "$WS/hello"
else
    skip "gcc not installed on the host"
fi
run sbx -- python3 -c 'print(1)'
check "python3 runs (status $STATUS, output '$OUT')" test "$STATUS" = 0 -a "$OUT" = 1

# ---- --deny-read, --allow-write, policy denyWrite, project policy ----------------------------
# expect_unreadable FILE STR [exguardian run options]: FILE's content (STR) is out of reach inside:
# reading it is refused (EACCES). gVisor shows a denyRead file as an empty one (cat succeeds and
# prints nothing), so there it must read as empty.
expect_unreadable() {
    local file=$1 secret=$2; shift 2
    if on_layer gvisor; then
        run sbx "$@" -- sh -c 'echo "$0" && cat "$1"' "$RAN_MARK" "$file"
        if [ "$STATUS" -eq 0 ] && [ "$OUT" = "$RAN_MARK" ] && ! grep -qF -- "$secret" <<<"$ERR"; then ok "$file reads as empty: $*"
        else fail "$file is not empty inside: $*"; show_last; fi
    else
        expect_refused "cat: $file: Permission denied" "$secret" "$@" -- cat "$file"
    fi
}
expect_output_contains private-ws-data sbx -- cat private.txt
expect_unreadable private.txt private-ws-data --deny-read "$WS/private.txt"

# allowRead inside a denied directory: the re-allowed part is readable, the rest is not, and
# the denied directory cannot be listed.
mkdir -p -m 755 "$O/vault/public" && echo vault-secret > "$O/vault/secret.txt" && echo vault-public > "$O/vault/public/readme.txt"
chmod 644 "$O/vault/secret.txt" "$O/vault/public/readme.txt"
expect_output_contains vault-public sbx --deny-read "$O/vault" --allow-read "$O/vault/public" -- cat "$O/vault/public/readme.txt"
expect_refused 'No such file or directory' vault-secret --deny-read "$O/vault" --allow-read "$O/vault/public" -- cat "$O/vault/secret.txt"
# (listed by python: gVisor's statx answers EINVAL on this host, so `ls` fails there on any path;
# in a microVM the mask is readable, as qemu's 9p server must read what it walks: it lists only
# the allowed name)
if [ "$EXG_LAYER" = microvm ]; then
    run sbx --deny-read "$O/vault" --allow-read "$O/vault/public" -- \
        python3 -c 'import os, sys; print(os.listdir(sys.argv[1]))' "$O/vault"
    if [ "$STATUS" -eq 0 ] && grep -qxF "['public']" <<<"$OUT"; then ok "the masked directory lists only the allowed name"
    else fail "listing of the masked directory"; show_last; fi
else
    expect_refused 'PermissionError: .*Permission denied' secret.txt --deny-read "$O/vault" --allow-read "$O/vault/public" -- \
        python3 -c 'import os, sys; print(os.listdir(sys.argv[1]))' "$O/vault"
fi

mkdir -m 755 "$O/extra"
expect_refused_sh "$RO_REFUSAL" '' "echo x > '$O/extra/without-flag.txt'"
expect_status 0 sbx --allow-write "$O/extra" -- bash -c "echo x > '$O/extra/with-flag.txt'"
check "--allow-write dir: file persists on the host" test -f "$O/extra/with-flag.txt" -a ! -e "$O/extra/without-flag.txt"

echo 'locked-original' > "$WS/locked.txt"
cat > "$T/policy.json" <<EOF
{
  "network": { "allowedDomains": [], "deniedDomains": [] },
  "filesystem": {
    "denyRead": [],
    "allowWrite": [],
    "denyWrite": ["$WS/locked.txt"]
  }
}
EOF
expect_refused_sh 'locked.txt: Read-only file system' '' 'echo x >> locked.txt' --policy "$T/policy.json"
expect_status 0 sbx --policy "$T/policy.json" -- bash -c 'echo x >> unlocked.txt'
check "policy denyWrite: file unchanged on the host" test "$(cat "$WS/locked.txt")" = locked-original

# Project policy ./.exguardian.json (planted from the host) is merged in.
cat > "$WS/.exguardian.json" <<EOF
{
  "network": { "allowedDomains": [], "deniedDomains": [] },
  "filesystem": { "denyRead": ["$WS/private.txt"], "allowWrite": [], "denyWrite": [] }
}
EOF
expect_unreadable private.txt private-ws-data
rm -f "$WS/.exguardian.json"

finish
