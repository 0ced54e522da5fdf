#!/usr/bin/env bash
# A protected path stays where it is for the whole run (issue 12, part 2): renaming or
# removing one of its parent directories must not carry a denyWrite/denyRead/credential
# protection away and leave the path itself writable or readable, during the run or in the
# next one. Ordinary renames elsewhere keep working.
source "$(dirname "$0")/lib.sh"

new_workspace
plant_canaries
mkdir -p "$WS/cfg" "$WS/deep/a/b" "$WS/vault" "$WS/free/sub"
echo 'env: prod' > "$WS/cfg/prod.yaml"
echo 'deep: original' > "$WS/deep/a/b/conf.yaml"
VAULT="EXGVAULT-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
echo "$VAULT" > "$WS/vault/key.txt"
echo 'free' > "$WS/free/sub/f.txt"
sum_of() { sha256sum "$1" 2>/dev/null | cut -d' ' -f1; }
prod_sum=$(sum_of "$WS/cfg/prod.yaml") deep_sum=$(sum_of "$WS/deep/a/b/conf.yaml")

require_sandbox || finish

# ---- denyWrite: the file's directory (and every directory above it) stays put -----------------
run sh_in 'mv cfg cfg.old; echo "mv=$?"; mkdir -p cfg; echo pwned > cfg/prod.yaml; echo "write=$?"; cat cfg/prod.yaml' \
    --deny-write "$WS/cfg/prod.yaml"
if [ "$(sum_of "$WS/cfg/prod.yaml")" = "$prod_sum" ] && [ ! -e "$WS/cfg.old" ] && grep -q 'mv=[1-9]' <<<"$OUT"; then
    ok "denyWrite: mv of the parent refused, cfg/prod.yaml unchanged on the host"
else fail "denyWrite: the parent could be renamed or the file replaced"; show_last; ls -la "$WS" "$WS/cfg.old" 2>&1 | sed 's/^/#      /'; fi
run sh_in 'python3 -c "import os; os.rename(\"deep\", \"deep2\")" 2>&1; mv deep/a deep/a2; echo "mv=$?"; rm -rf deep 2>/dev/null; echo pwned > deep/a/b/conf.yaml' \
    --deny-write "$WS/deep/a/b/conf.yaml"
if [ "$(sum_of "$WS/deep/a/b/conf.yaml")" = "$deep_sum" ] && [ ! -e "$WS/deep2" ] && [ ! -e "$WS/deep/a2" ]; then
    ok "denyWrite at depth: no ancestor between the workspace and the file can be renamed or removed"
else fail "denyWrite at depth: an ancestor moved or the file changed"; show_last; fi
run sh_in 'ln cfg/prod.yaml hard 2>&1; echo "ln=$?"; echo pwned >> hard' --deny-write "$WS/cfg/prod.yaml"
if [ "$(sum_of "$WS/cfg/prod.yaml")" = "$prod_sum" ] && grep -q 'ln=[1-9]' <<<"$OUT"; then
    ok "denyWrite: no hard link to the protected file"
else fail "denyWrite: a hard link reached the protected file"; show_last; fi
rm -f "$WS/hard"

# ---- denyRead: renaming the directory does not unmask the file, now or in the next run -----------
run sh_in 'mv vault vault.x; echo "mv=$?"; cat vault.x/key.txt vault/key.txt 2>&1' --deny-read "$WS/vault/key.txt"
if grep -q 'mv=[1-9]' <<<"$OUT" && ! grep -qF "$VAULT" <<<"$OUT$ERR" && [ ! -e "$WS/vault.x" ] && [ -f "$WS/vault/key.txt" ]; then
    ok "denyRead: mv of the parent refused, the content never read"
else fail "denyRead: the parent could be renamed or the content read"; show_last; fi
# (in the next run: masked as before, EACCES, or an empty file on gVisor)
expect_no_output_contains "$VAULT" sh_in 'cat vault.x/key.txt vault/key.txt 2>&1' --deny-read "$WS/vault/key.txt"

# ---- credentials with HOME writable: ~/.config stays where it is ---------------------------------
run sh_in 'mv ~/.config ~/.config.x; echo "mv=$?"; cat ~/.config.x/gcloud/* ~/.config/gcloud/* 2>&1' --allow-write "$HOME"
if grep -q 'mv=[1-9]' <<<"$OUT" && ! grep -qF "$CANARY" <<<"$OUT$ERR" && [ ! -e "$HOME/.config.x" ] && canaries_unchanged; then
    ok "allowWrite ~: ~/.config cannot be renamed to unmask the gcloud credentials"
else fail "allowWrite ~: ~/.config moved or the credentials were read"; show_last; fi
expect_no_output_contains "$CANARY" sh_in 'cat ~/.config.x/gcloud/* 2>&1; ls ~/.config/gcloud 2>&1' --allow-write "$HOME"

# ---- ordinary renames keep working ------------------------------------------------------------
run sh_in 'mv free free2 && mv free2/sub free2/sub2 && cat free2/sub2/f.txt' --deny-write "$WS/cfg/prod.yaml"
if [ "$STATUS" -eq 0 ] && [ "$OUT" = free ] && [ -f "$WS/free2/sub2/f.txt" ]; then ok "renames of unprotected directories work"
else fail "an unprotected rename failed"; show_last; fi

# The plan says why the parents are pinned.
run "$EXG" run --dry-run --deny-write "$WS/deep/a/b/conf.yaml" --workspace "$WS" -- true
if grep -q "$WS/deep/a/b" <<<"$OUT" && grep -q 'pinned' <<<"$OUT"; then ok "--dry-run shows the pinned parents"
else fail "--dry-run does not show the pinned parents"; show_last; fi

finish
