#!/usr/bin/env bash
# `exguardian agent NAME` (issue 45, the front door): the shipped profiles are listed and shown as
# the policy files they are; an agent runs whole in the sandbox under its profile with run's options
# and its own arguments; its key from the environment is a placeholder inside (the real value never
# reaches the agent), its config directory is writable for sessions while its config (MCP servers,
# notify command) stays protected, the rest of the host as under any run; its exit status is the
# run's. The agent here is a stand-in program named like the real one (the real CLIs against a
# scripted endpoint are test_egress_sandbox_secrets_agent.sh's); without its key the run refuses.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish
cd "$WS" || exit 1
# The harness runs a copy of the binary from its own directory: the profiles are the source tree's.
need_source_tree profiles/agents/codex.json
export EXGUARDIAN_AGENT_PROFILES=$SRC/profiles/agents

run "$EXG" agent --list
check "--list: the four agents with their profiles" bash -c \
    'for a in claude codex gemini opencode; do grep -q "^$a " <<<"$1" || exit 1; done; grep -q "profile: .*/profiles/agents/codex.json" <<<"$1"' _ "$OUT"
check "--list: codex's key kept outside, only to api.openai.com" grep -q "kept outside: OPENAI_API_KEY (from env:OPENAI_API_KEY) only to api.openai.com" <<<"$OUT"
check "--list: codex's directories made before a run (its profile's filesystem.makeDirs)" \
    grep -qF "made before a run when missing: ~/.codex, ~/.codex/skills" <<<"$OUT"
run "$EXG" agent --show codex
check "--show codex: the profile is an ordinary policy file (valid JSON with its secret)" \
    python3 -c 'import json,sys; j=json.loads(sys.argv[1]); assert j["secrets"][0]["hosts"]==["api.openai.com"]' "$OUT"
run "$EXG" agent nosuch
check "an unknown agent: exit 2, the known ones named" bash -c '[ "$1" = 2 ] && grep -q "known: claude, codex, gemini, opencode" <<<"$2"' _ "$STATUS" "$ERR"

# The profile's filesystem.makeDirs (not the front door): a first run of `exguardian run --policy
# codex.json` makes ~/.codex and ~/.codex/skills (a protected name: Codex installs its skills there
# at start) on the host first, so the directory is read-only inside, not planted and quarantined
# at the end (exit 123 before). --dry-run makes nothing and says what a run would make.
CODEX_PROFILE=$SRC/profiles/agents/codex.json
rm -rf "$HOME/.codex"
run env OPENAI_API_KEY=sk-proj-x-$$ "$EXG" run --no-policy-files --policy "$CODEX_PROFILE" --dry-run -- true
check "makeDirs --dry-run: nothing made, the plan says what a run makes" bash -c \
    '[ "$1" = 0 ] && [ ! -e "$2/.codex" ] && grep -qF "$2/.codex/skills is missing; a run makes it" <<<"$3"' _ "$STATUS" "$HOME" "$OUT"
run env OPENAI_API_KEY=sk-proj-x-$$ "$EXG" run --no-policy-files --policy "$CODEX_PROFILE" -- \
    sh -c 'mkdir "$HOME/.codex/skills/.system" 2>/dev/null && echo skills-written; touch "$HOME/.codex/history.jsonl" && echo history-written'
check "makeDirs: a first run made ~/.codex and ~/.codex/skills and said so, exit 0 (not 123)" bash -c \
    '[ "$1" = 0 ] && grep -qF "made $2/.codex (empty)" <<<"$3" && grep -qF "made $2/.codex/skills (empty)" <<<"$3" && [ -d "$2/.codex/skills" ]' \
    _ "$STATUS" "$HOME" "$ERR"
check "makeDirs: ~/.codex/skills read-only inside, empty on the host; ~/.codex itself writable" bash -c \
    '! grep -q skills-written <<<"$1" && grep -q history-written <<<"$1" && [ -z "$(ls -A "$2/.codex/skills")" ] && ! grep -q quarantined <<<"$3"' \
    _ "$OUT" "$HOME" "$ERR"
[ "$STATUS" = 0 ] || show_last
echo '{"filesystem": {"makeDirs": ["~/.ssh/made-by-policy"]}}' > "$T/makedirs-out.json"
run env OPENAI_API_KEY=sk-proj-x-$$ "$EXG" run --no-policy-files --policy "$CODEX_PROFILE" --policy "$T/makedirs-out.json" -- true
check "makeDirs outside every allowWrite path: exit 125, the entry and its file named, nothing made" bash -c \
    '[ "$1" = 125 ] && grep -qF "filesystem.makeDirs ~/.ssh/made-by-policy ($3" <<<"$2" && [ ! -e "$4/.ssh/made-by-policy" ]' \
    _ "$STATUS" "$ERR" "$T/makedirs-out.json" "$HOME"
echo '{"filesystem": {"makeDirs": ["~/.codex/*"]}}' > "$T/makedirs-glob.json"
run "$EXG" run --no-policy-files --policy "$T/makedirs-glob.json" --dry-run -- true
check "makeDirs with a glob: exit 125, said" bash -c '[ "$1" = 125 ] && grep -q "is a glob; makeDirs names directories" <<<"$2"' _ "$STATUS" "$ERR"

# A stand-in for the codex CLI, on PATH inside (the workspace is visible there).
mkdir -p "$WS/bin" "$HOME/.codex" "$HOME/.ssh"
echo 'notify = ["true"]' > "$HOME/.codex/config.toml"
echo "PRIVATE-KEY-CANARY" > "$HOME/.ssh/id_ed25519"
cat > "$WS/bin/codex" <<'SH'
#!/bin/sh
echo "args=$*"
echo "key=$OPENAI_API_KEY"
echo 'notify = ["sh", "-c", "touch /tmp/pwned"]' >> "$HOME/.codex/config.toml" 2>/dev/null || echo config-refused
mkdir -p "$HOME/.codex/sessions" && echo s > "$HOME/.codex/sessions/s1" && echo session-written
cat "$HOME/.ssh/id_ed25519" 2>/dev/null || echo ssh-refused
exit 7
SH
chmod +x "$WS/bin/codex"
REAL=sk-proj-real-$$-$RANDOM
run env PATH="$WS/bin:$PATH" OPENAI_API_KEY="$REAL" "$EXG" agent codex --no-policy-files -- exec --json "say hi"
check "the agent ran with its own arguments" grep -qx 'args=exec --json say hi' <<<"$OUT"
check "its exit status is the run's (7, got $STATUS)" test "$STATUS" = 7
check "its key inside is a placeholder, not the real value" bash -c \
    'grep -q "^key=." <<<"$1" && ! grep -qF "$2" <<<"$1$3"' _ "$OUT" "$REAL" "$ERR"
check "its config (notify command) refused and unchanged on the host" bash -c \
    'grep -qx config-refused <<<"$1" && [ "$(cat "$2")" = "notify = [\"true\"]" ]' _ "$OUT" "$HOME/.codex/config.toml"
check "its sessions written, and kept on the host" bash -c 'grep -qx session-written <<<"$1" && [ -f "$2" ]' _ "$OUT" "$HOME/.codex/sessions/s1"
check "~/.ssh's key refused, nothing of it printed" bash -c 'grep -qx ssh-refused <<<"$1" && ! grep -q CANARY <<<"$1$2"' _ "$OUT" "$ERR"
[ "$STATUS" = 7 ] || show_last

run env PATH="$WS/bin:$PATH" OPENAI_API_KEY="$REAL" "$EXG" agent codex --no-policy-files --dry-run -- exec
check "--dry-run: the plan, with api.openai.com allowed and the agent's command, nothing run" bash -c \
    '[ "$1" = 0 ] && grep -q "api.openai.com" <<<"$2" && grep -q "codex exec" <<<"$2" && ! grep -q "^args=" <<<"$2"' _ "$STATUS" "$OUT$ERR"
run env -u OPENAI_API_KEY PATH="$WS/bin:$PATH" "$EXG" agent codex --no-policy-files -- exec
check "without its key: exit 125, the variable named, nothing run" bash -c \
    '[ "$1" = 125 ] && grep -q "OPENAI_API_KEY is not set" <<<"$2" && [ -z "$3" ]' _ "$STATUS" "$ERR" "$OUT"
# ---- The terminal (a python pty driver in place of the user's terminal) ---------------------------
# A stand-in claude prints TERM, its size and a coloured word, traps SIGWINCH (prints the new
# size) and SIGINT (exits 42). The driver starts `exguardian agent claude` on a 30x100 pty with
# TERM=xterm-256color, resizes it to 40x132, then types Ctrl-C: the agent sees the new size, gets
# the SIGINT itself (the supervisor goes on and relays its exit), and 42 is the run's status.
cat > "$WS/bin/claude" <<'SH'
#!/bin/bash
echo "TERM=$TERM SIZE=$(stty size)"
printf 'COLOUR=\033[31mred\033[0m\n'
trap 'echo "WINCH $(stty size)"' WINCH
trap 'echo GOT-INT; exit 42' INT
echo READY
while :; do sleep 0.1; done
SH
chmod 755 "$WS/bin/claude"
cat > "$T/ptydrive.py" <<'PY'
import os, select, sys, time
from pty_spawn import set_size, spawn
pid, m = spawn(sys.argv[1:], 30, 100, {"TERM": "xterm-256color"})
buf = b""
def wait_for(text, secs=30):
    global buf
    end = time.time() + secs
    while text not in buf and time.time() < end:
        if select.select([m], [], [], 0.2)[0]:
            try:
                d = os.read(m, 4096)
            except OSError:
                return False
            if not d:
                return False
            buf += d
    return text in buf
ok = wait_for(b"READY")
if ok:
    set_size(m, 40, 132)
    ok = wait_for(b"WINCH 40 132")
if ok:
    os.write(m, b"\x03")
    wait_for(b"GOT-INT")
    wait_for(b"\0", 5)  # (the rest, up to the end)
else:
    os.kill(pid, 9)
sys.stdout.write(repr(buf) + "\n")
print("EXIT", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
PY
# On each layer that runs here (the microVM layer where qemu and the guest image are: no probe run,
# a guest boot under TCG costs seconds; there the resize goes to the guest's own pty).
for layer in process container gvisor landlock microvm; do
    if [ "$layer" = microvm ]; then
        if [ ! -x /usr/bin/qemu-system-x86_64 ] || [ ! -s "${EXG_MICROVM_IMAGE_DIR:-/nonexistent}/vmlinux" ]; then
            skip "tty on the microvm layer: no qemu-system-x86_64 or guest image here"
            continue
        fi
        STATUS=0
    else
        run "$EXG" run --layer "$layer" --no-policy-files -- true
    fi
    if [ "$STATUS" != 0 ]; then
        skip "tty on the $layer layer: it does not run here ($(tail -n 1 <<<"$ERR" | head -c 160))"
        continue
    fi
    run env PATH="$WS/bin:$PATH" ANTHROPIC_API_KEY=exgtest-tty PYTHONPATH="$SRC/tests/integration" PYTHONDONTWRITEBYTECODE=1 python3 "$T/ptydrive.py" "$EXG" agent claude --layer "$layer" --no-policy-files
    check "tty ($layer): TERM passed in, the pty's first size seen inside (30 100)" grep -qF 'TERM=xterm-256color SIZE=30 100' <<<"$OUT"
    check "tty ($layer): colours pass through as escape sequences" grep -qF 'COLOUR=\x1b[31mred\x1b[0m' <<<"$OUT"
    check "tty ($layer): a resize of the outer pty reaches the agent, which sees the new size (40 132)" grep -qF 'WINCH 40 132' <<<"$OUT"
    check "tty ($layer): Ctrl-C: the agent got SIGINT and the run's status is its own 42 ($(grep -o 'EXIT.*' <<<"$OUT"))" \
        bash -c 'grep -qF GOT-INT <<<"$0" && grep -qx "EXIT 42" <<<"$0"' "$OUT"
    grep -qx "EXIT 42" <<<"$OUT" || show_last
done
finish
