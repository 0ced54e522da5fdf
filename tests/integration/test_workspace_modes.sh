#!/usr/bin/env bash
# Nothing planted survives (issue 8): protected names created during a run are quarantined,
# in both workspace modes, and reported; ordinary changes reach the workspace exactly (live,
# overlay) or not at all (discard).
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish
export XDG_STATE_HOME="$T/state"   # the quarantine goes under here
mkdir -p "$O/outside" && echo outside-original > "$O/outside/file" && chmod -R a+rwX "$O/outside"

# The attack: what an agent could leave behind for later, plus ordinary work.
attack='
git init -q sub && printf "#!/bin/sh\necho pwned\n" > sub/.git/hooks/pre-commit && chmod +x sub/.git/hooks/pre-commit
mkdir -p deep/er && mkdir -p deep/er/.vscode && echo "{\"tasks\": []}" > deep/er/.vscode/tasks.json
mkdir -p newdir && echo "export PWNED=1" > newdir/.envrc
echo "alias ls=pwned" > notes.txt && mv notes.txt .bashrc
ln -s '"$O"'/outside/file link-out
ln -s '"$O"'/outside linkdir; echo via-link > linkdir/new-through-link 2>/dev/null
echo ordinary > ordinary.txt && mkdir -p src && echo "int main(){}" > src/main.c
echo changed >> README
'
tree_of() { (cd "$1" && find . -path ./.git -prune -o -print | LC_ALL=C sort | while read -r p; do
    if [ -f "$p" ] && [ ! -L "$p" ]; then echo "$p $(sha256sum < "$p" | cut -c1-16)"; else echo "$p"; fi; done); }
planted_absent() {
    test ! -e "$WS/sub/.git/hooks/pre-commit" && test ! -e "$WS/deep/er/.vscode" && test ! -e "$WS/newdir/.envrc" &&
        test ! -e "$WS/.bashrc"
}
echo "readme" > "$WS/README"
git -C "$WS" add README && git -C "$WS" -c user.name=t -c user.email=t@t commit -qm readme

for mode in live overlay; do
    rm -rf "$XDG_STATE_HOME"
    run sbx --workspace-mode "$mode" -- bash -c "$attack"
    check "$mode: the run reports planted files and exits 123 (got $STATUS)" test "$STATUS" -eq 123
    for p in sub/.git/hooks/pre-commit deep/er/.vscode newdir/.envrc .bashrc; do
        check "$mode: $p reported" grep -q "planted: $p" <<<"$ERR"
    done
    check "$mode: planted files absent from the workspace" planted_absent
    q=$(find "$XDG_STATE_HOME/exguardian/quarantine" -mindepth 1 -maxdepth 1 -type d | head -1)
    check "$mode: hook in quarantine" test -f "$q/sub/.git/hooks/pre-commit"
    check "$mode: .envrc in quarantine" test -f "$q/newdir/.envrc"
    check "$mode: ordinary work applied" test "$(cat "$WS/ordinary.txt" 2>/dev/null)" = ordinary
    check "$mode: modification applied" grep -qx changed "$WS/README"
    check "$mode: nothing written outside through symlinks" test "$(cat "$O/outside/file")" = outside-original -a ! -e "$O/outside/new-through-link"
    check "$mode: the new repo itself stays (only its hook is quarantined)" test -d "$WS/sub/.git"
    # Reset the workspace for the next mode.
    (cd "$WS" && rm -rf sub deep newdir ordinary.txt src link-out linkdir .bashrc && git checkout -q README)
done

# A protected name renamed to an ordinary name and back (live): the changed file is caught.
echo "# rc" > "$WS/.profile"
git -C "$WS" add .profile && git -C "$WS" -c user.name=t -c user.email=t@t commit -qm profile
run sbx -- bash -c 'cp .profile p2 2>/dev/null; mv .profile p 2>/dev/null || echo blocked-by-mount'
check "live: an existing protected file cannot be renamed away (read-only bind)" grep -q blocked-by-mount <<<"$OUT"

# --allow-planted: still quarantined, the run does not fail.
run sbx --allow-planted -- bash -c 'mkdir -p n2 && echo x > n2/.envrc'
check "--allow-planted: exit 0 (got $STATUS)" test "$STATUS" -eq 0
check "--allow-planted: still quarantined" test ! -e "$WS/n2/.envrc"
rm -rf "$WS/n2" "$WS/p2"

# discard: the workspace is byte-identical afterwards.
before=$(tree_of "$WS")
run sbx --workspace-mode discard -- bash -c "$attack rm -f README; echo x > zz"
check "discard: exit 0 (got $STATUS)" test "$STATUS" -eq 0
[ "$STATUS" -eq 0 ] || show_last
check "discard: workspace byte-identical" test "$(tree_of "$WS")" = "$before"

# overlay --keep: nothing applied at exit; diff shows it; apply applies it.
keep="$T/kept"
run sbx --workspace-mode overlay --keep "$keep" -- bash -c 'echo later > later.txt; mkdir -p k && echo x > k/.envrc'
check "--keep: exit 0" test "$STATUS" -eq 0
check "--keep: nothing applied yet" test ! -e "$WS/later.txt"
run "$EXG" diff "$keep"
check "diff lists the new file" grep -qx "+ later.txt" <<<"$OUT"
check "diff flags the planted file" grep -q "^! k/.envrc" <<<"$OUT"
run "$EXG" apply "$keep"
check "apply: applied" test "$(cat "$WS/later.txt" 2>/dev/null)" = later
check "apply: planted file not applied" test ! -e "$WS/k/.envrc"
check "apply: exit 1 because something was quarantined (got $STATUS)" test "$STATUS" -eq 1
check "files applied as the workspace owner" test "$(stat -c %u "$WS/later.txt")" = "$(stat -c %u "$WS")"

# Nothing of the overlay runs is left in /var/tmp.
check "no overlay layers left in /var/tmp" bash -c '! ls /var/tmp | grep -q "^exguardian-"'
finish
