#!/usr/bin/env bash
# Code that runs later without the user asking for project code (issue 39, parts 4-7): what a
# protected config names (core.fsmonitor = tools/fsmon.sh, an .envrc's dotenv, a VS Code
# folderOpen task's script, a Claude Code statusLine script, an MCP server's script), the user's
# global git config (a relative core.hooksPath names a directory in every repository), a
# protected name staged only in the git index, compiled Python files and .pth files that review
# never shows, and names found by the wider survey (.pdbrc, *.code-workspace, ...). Each attack
# is made for real inside the sandbox; then the host-side action that would run it (git status,
# git commit, git checkout -- ., python3, pdb) is taken and the marker the planted code would
# create is checked absent, with the refusal or the "planted" report and audit line.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish
export XDG_STATE_HOME="$T/state"   # the quarantine goes under here
audit="$T/audit.jsonl"
pwned="$O/pwned"                   # what a planted command would create on the host
mkdir -p "$O" && chmod 755 "$O"
no_marker() { check "$1: the planted code did not run on the host" test ! -e "$pwned"; rm -f "$pwned"; }

planted() {
    local rel=$1 desc=$2
    check "$desc: reported as planted" grep -qF "planted: $rel" <<<"$ERR"
    check "$desc: no longer in the workspace" test ! -e "$WS/$rel" -a ! -L "$WS/$rel"
    check "$desc: audit line" grep -qF "\"path\":\"$WS/$rel\"" "$audit"
    check "$desc: in the quarantine" bash -c "find '$XDG_STATE_HOME/exguardian/quarantine' -path '*/$rel' | grep -q ."
}
attack() { rm -f "$audit"; run sbx --audit-log "$audit" -- bash -c "$1"; }
commit_all() { git -C "$WS" add -A && git -C "$WS" commit -q -m "$1"; }

# ---- (4) what a protected config names: git's core.fsmonitor ---------------------------------
mkdir -p "$WS/tools"
printf '#!/bin/sh\nexit 1\n' > "$WS/tools/fsmon.sh" && chmod +x "$WS/tools/fsmon.sh"
commit_all fsmon
git -C "$WS" config core.fsmonitor tools/fsmon.sh
expect_refused_sh "$RO_REFUSAL" '' "printf '#!/bin/sh\ntouch $pwned\nexit 1\n' > tools/fsmon.sh"
expect_refused_sh "Device or resource busy|$RO_REFUSAL" '' "rm -f tools/fsmon.sh && printf '#!/bin/sh\ntouch $pwned\n' > tools/fsmon.sh"
check "fsmonitor script unchanged" bash -c "! grep -q pwned '$WS/tools/fsmon.sh'"
run git -C "$WS" status --short
no_marker "core.fsmonitor script rewritten, then host git status"
# Named but absent at start: created during the run, it is quarantined.
git -C "$WS" config core.fsmonitor tools/fsmon2.sh
attack "printf '#!/bin/sh\ntouch $pwned\nexit 1\n' > tools/fsmon2.sh && chmod +x tools/fsmon2.sh"
check "fsmonitor script created during the run: exit 123 (got $STATUS)" test "$STATUS" = 123
planted tools/fsmon2.sh "core.fsmonitor script created during the run"
run git -C "$WS" status --short
no_marker "core.fsmonitor script created, then host git status"
git -C "$WS" config --unset core.fsmonitor

# ---- (4) a hook that execs a workspace script ------------------------------------------------
mkdir -p "$WS/scripts"
printf '#!/bin/sh\nexit 0\n' > "$WS/scripts/precommit.sh" && chmod +x "$WS/scripts/precommit.sh"
printf '#!/bin/sh\nexec scripts/precommit.sh "$@"\n' > "$WS/.git/hooks/pre-commit" && chmod +x "$WS/.git/hooks/pre-commit"
expect_refused_sh "$RO_REFUSAL" '' "echo 'touch $pwned' >> scripts/precommit.sh"
run git -C "$WS" commit -q --allow-empty -m probe
no_marker "hook's script rewritten, then host git commit"
rm -f "$WS/.git/hooks/pre-commit"

# ---- (4) .envrc, VS Code folderOpen task, Claude Code statusLine, MCP server -----------------
printf 'dotenv_if_exists\nsource_env_if_exists .envrc.local\n' > "$WS/.envrc"
echo 'A=1' > "$WS/.env"
cat > "$WS/scripts/setup.sh" <<'EOF'
#!/bin/sh
EOF
cp "$WS/scripts/setup.sh" "$WS/scripts/build.sh"; cp "$WS/scripts/setup.sh" "$WS/scripts/status.sh"
cp "$WS/scripts/setup.sh" "$WS/scripts/mcp.sh"
mkdir -p "$WS/.vscode" "$WS/.claude"
cat > "$WS/.vscode/tasks.json" <<'EOF'
{
  // JSONC, as VS Code writes it
  "version": "2.0.0",
  "tasks": [
    {"label": "build", "type": "shell", "command": "scripts/build.sh"},
    {"label": "setup", "type": "shell", "command": "${workspaceFolder}/scripts/setup.sh",
     "runOptions": {"runOn": "folderOpen"}},
  ]
}
EOF
echo '{"statusLine": {"type": "command", "command": "sh scripts/status.sh"}}' > "$WS/.claude/settings.json"
echo '{"mcpServers": {"x": {"command": "sh", "args": ["scripts/mcp.sh"]}}}' > "$WS/.mcp.json"
commit_all configs
for f in .env scripts/setup.sh scripts/status.sh scripts/mcp.sh; do
    expect_refused_sh "$RO_REFUSAL" '' "echo 'touch $pwned' >> $f"
done
run sbx -- bash -c "echo '# edited' >> scripts/build.sh"
check "a task the user runs on purpose (build) stays project code: writable (got $STATUS)" test "$STATUS" = 0
git -C "$WS" checkout -q -- scripts/build.sh
# .envrc.local (a name now) and .env created when absent at start.
rm -f "$WS/.env" && commit_all no-env
attack "echo 'PROMPT_COMMAND=\"touch $pwned\"' > .env; echo 'touch $pwned' > .envrc.local"
check ".envrc's files created during the run: exit 123 (got $STATUS)" test "$STATUS" = 123
planted .env ".env read by the .envrc's dotenv_if_exists"
planted .envrc.local ".envrc.local sourced by the .envrc"
rm -f "$WS/.envrc" "$WS/.mcp.json"; rm -rf "$WS/.vscode" "$WS/.claude"; commit_all cleanup

# ---- (5) the user's global git config: a relative core.hooksPath -----------------------------
printf '[core]\n\thooksPath = .team-hooks\n' > "$HOME/.gitconfig"
attack "mkdir -p .team-hooks && printf '#!/bin/sh\ntouch $pwned\n' > .team-hooks/pre-commit && chmod +x .team-hooks/pre-commit
git init -q sub && mkdir -p sub/.team-hooks && printf '#!/bin/sh\ntouch $pwned\n' > sub/.team-hooks/pre-commit && chmod +x sub/.team-hooks/pre-commit"
check "global relative hooksPath: exit 123 (got $STATUS)" test "$STATUS" = 123
planted .team-hooks "the directory a global relative core.hooksPath names"
planted sub/.team-hooks "the same in a repository made during the run"
run git -C "$WS" commit -q --allow-empty -m probe
no_marker "global hooksPath directory planted, then host git commit"
mkdir -p "$WS/.team-hooks" && printf '#!/bin/sh\nexit 0\n' > "$WS/.team-hooks/pre-commit" && chmod +x "$WS/.team-hooks/pre-commit"
expect_refused_sh "$RO_REFUSAL" '' "echo 'touch $pwned' >> .team-hooks/pre-commit"
run git -C "$WS" commit -q --allow-empty -m probe
no_marker "existing global hooksPath hook, then host git commit"
rm -rf "$WS/.team-hooks" "$WS/sub" "$HOME/.gitconfig"

# ---- (5) a protected name staged only in the index -------------------------------------------
attack "git update-index --add --cacheinfo 100644,\$(printf 'touch $pwned\n' | git hash-object -w --stdin),.envrc && git ls-files .envrc"
check "index-only .envrc: the sandbox staged it (got: $OUT)" grep -qx .envrc <<<"$OUT"
check "index-only .envrc: exit 123 (got $STATUS)" test "$STATUS" = 123
planted .git/index "the index that stages .envrc"
check "index-only .envrc: the report names .envrc" grep -q 'stages .*\.envrc' <<<"$ERR"
run git -C "$WS" checkout -- .
check "host: git checkout -- . did not create .envrc" test ! -e "$WS/.envrc"
run git -C "$WS" reset -q
check "host: git reset rebuilds the index (README tracked)" bash -c "git -C '$WS' ls-files | grep -qx README.md"
check "host: .envrc still absent after the reset" test ! -e "$WS/.envrc"
# An ordinary commit in the sandbox is not a plant.
attack "echo x > notes.txt && git add notes.txt && git -c user.name=t -c user.email=t@t commit -q -m notes"
check "an ordinary commit in the sandbox: exit 0 (got $STATUS)" test "$STATUS" = 0
[ "$STATUS" = 0 ] || show_last
# The same in overlay mode: the run's new index would be applied to the workspace at the end.
rm -f "$audit"
run sbx --workspace-mode overlay --audit-log "$audit" -- bash -c \
    "git update-index --add --cacheinfo 100644,\$(printf 'touch $pwned\n' | git hash-object -w --stdin),.envrc && git ls-files .envrc"
check "overlay: index-only .envrc: the sandbox staged it (got: $OUT)" grep -qx .envrc <<<"$OUT"
check "overlay: index-only .envrc: exit 123 (got $STATUS)" test "$STATUS" = 123
check "overlay: the run's index reported as planted, naming .envrc" grep -q 'planted: .git/index (git index stages .envrc' <<<"$ERR"
check "overlay: ... audit line" grep -qF "\"path\":\"$WS/.git/index\"" "$audit"
check "overlay: ... the run's index in the quarantine (the live run's and this one)" \
    bash -c "[ \$(find '$XDG_STATE_HOME/exguardian/quarantine' -path '*/.git/index' | wc -l) -ge 2 ]"
check "overlay: the host's index (kept) does not stage .envrc" bash -c "[ -z \"\$(git -C '$WS' ls-files .envrc)\" ]"
run git -C "$WS" checkout -- .
check "overlay: host git checkout -- . did not create .envrc" test ! -e "$WS/.envrc"
attack_overlay_commit="echo y > notes2.txt && git add notes2.txt && git -c user.name=t -c user.email=t@t commit -q -m notes2"
run sbx --workspace-mode overlay -- bash -c "$attack_overlay_commit"
check "overlay: an ordinary commit in the sandbox is applied (exit $STATUS, notes2.txt tracked)" \
    bash -c "[ $STATUS = 0 ] && git -C '$WS' ls-files | grep -qx notes2.txt"

# ---- (6) compiled Python files and .pth files ------------------------------------------------
echo 'print("reviewed helper")' > "$WS/helper.py"
printf 'import helper\nprint("reviewed app")\n' > "$WS/app.py"
commit_all python
attack "python3 app.py"
check "python3 in the sandbox: exit 0, no compiled file left in the tree (got $STATUS)" test "$STATUS" = 0 -a ! -e "$WS/__pycache__"
# The workspace may be /tmp itself (the sandbox's caches went to /tmp/.exguardian-pycache, inside
# it: swept, quarantined, every Python run 123). A /tmp of the test's own (a tmpfs in a mount
# namespace of its own, so root only; the binary, itself under /tmp, bound to /mnt first) as the
# workspace: the caches go to a private tmpfs instead.
if [ "$EXG_AS" = root ] && [ "${EXG_LAYER:-process}" = process ]; then
    run unshare -m --propagation private bash -c 'mount -t tmpfs exg-bin /mnt && : > /mnt/exguardian &&
        mount --bind "$1" /mnt/exguardian && mount -t tmpfs exg-test /tmp && cd /tmp &&
        echo "print(\"reviewed module\")" > m.py && timeout -k 5 60 /mnt/exguardian run -- python3 -c "import m" &&
        ! find /tmp -name "*.pyc" | grep .' _ "$EXG"
    check "workspace /tmp: python3 exits 0 and leaves no compiled file there (got $STATUS)" test "$STATUS" = 0
    [ "$STATUS" = 0 ] || show_last
fi
attack "python3 - <<'EOF'
import importlib._bootstrap_external as b, os, sys
st = os.stat('helper.py')
code = compile('import os; os.system(\"touch $pwned\")', 'helper.py', 'exec')
os.makedirs('__pycache__', exist_ok=True)
p = '__pycache__/helper.' + sys.implementation.cache_tag + '.pyc'
open(p, 'wb').write(b._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size))
print(p)
EOF"
pyc=$(tail -1 <<<"$OUT")
check "pyc stamped with helper.py's mtime and size: exit 123 (got $STATUS)" test "$STATUS" = 123
planted "$pyc" "a planted $pyc"
run bash -c "cd '$WS' && python3 app.py"
check "host: python3 app.py ran the reviewed source (got: $OUT)" grep -q 'reviewed helper' <<<"$OUT"
no_marker "planted pyc, then host python3 app.py"
rm -rf "$WS/__pycache__"
if python3 -m venv --without-pip "$WS/.venv" 2>/dev/null; then
    sp=$(cd "$WS" && echo .venv/lib/python3*/site-packages)
    attack "echo 'import os; os.system(\"touch $pwned\")' > $sp/zz.pth; echo /opt/extra > $sp/paths.pth"
    check ".pth with an import line: exit 123 (got $STATUS)" test "$STATUS" = 123
    planted "$sp/zz.pth" "a .pth with an import line"
    check "a .pth of paths only is kept" test -e "$WS/$sp/paths.pth"
    check "...and not reported" bash -c "! grep -qF 'planted: $sp/paths.pth' <<<\"\$1\"" _ "$ERR"
    run "$WS/.venv/bin/python" -c pass
    no_marker "planted .pth, then the virtualenv's interpreter starts"
    rm -rf "$WS/.venv"
else
    skip "python3 -m venv is not available here: the .pth checks need a virtualenv"
fi
# A virtualenv made inside with pip (setuptools' distutils-precedence.pth comes with it) is an
# ordinary thing to do: it is kept, and the run does not fail.
if python3 -m venv "$T/venv-probe" >/dev/null 2>&1 && ls "$T"/venv-probe/lib/python3*/site-packages/distutils-precedence.pth >/dev/null 2>&1; then
    attack "python3 -m venv .venv"
    check "python3 -m venv inside (with setuptools' .pth): exit 0 (got $STATUS)" test "$STATUS" = 0
    [ "$STATUS" = 0 ] || show_last
    rm -rf "$WS/.venv"
else
    skip "python3 -m venv with setuptools is not available here"
fi
rm -rf "$T/venv-probe"

# ---- (7) names from the wider survey ---------------------------------------------------------
attack "printf '!import os; os.system(\"touch $pwned\")\n' > .pdbrc
echo '{\"tasks\": {\"version\": \"2.0.0\", \"tasks\": [{\"label\": \"x\", \"command\": \"touch $pwned\", \"runOptions\": {\"runOn\": \"folderOpen\"}}]}}' > app.code-workspace
echo 'return {}' > .lazy.lua
echo '{\"*\": \"touch $pwned\"}' > .lintstagedrc.json
printf '[hooks]\nenter = \"touch $pwned\"\n' > mise.dev.toml
mkdir -p r/.sl && printf '[hooks]\nupdate = touch $pwned\n' > r/.sl/config
printf 'source(\"/dev/null\")\n' > .Rprofile"
check "survey names: exit 123 (got $STATUS)" test "$STATUS" = 123
for p in .pdbrc app.code-workspace .lazy.lua .lintstagedrc.json mise.dev.toml r/.sl/config .Rprofile; do planted "$p" "$p"; done
run bash -c "cd '$WS' && printf 'q\n' | python3 -m pdb app.py"
no_marker "planted .pdbrc, then host pdb in the workspace"
rm -rf "$WS/r"

finish
