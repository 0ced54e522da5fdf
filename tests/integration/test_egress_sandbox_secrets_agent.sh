#!/usr/bin/env bash
# An agent CLI run whole in the sandbox with the shipped profile profiles/agents/claude.json
# (issue 45), an ordinary policy file: ANTHROPIC_API_KEY a secret for api.anthropic.com, put in
# x-api-key only; ~/.claude writable, its settings and hooks not. The agent is a stand-in, a real
# program (python) that does what Claude Code does on the wire: reads its key from the
# environment, sends a turn to https://api.anthropic.com/v1/messages (in the test world, the
# HTTPS echo of tests/integration/egress_world_secrets.sh, certificate from the world's CA),
# runs a tool (`env`), sends the tool's output back in the next turn's body, writes its history,
# and (second run) tries to write its own hooks. Judged from the host: the endpoint got the real
# key in x-api-key and the placeholder unchanged in the body, the agent saw only the
# placeholder, the hooks were refused or quarantined, the agent's exit status is the run's.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

need_source_tree profiles/agents/claude.json
PROFILE=$SRC/profiles/agents/claude.json
WD=$(dirname "$EGW_LOG")
SLOG=$WD/secrets.log
KEY="sk-ant-exgtest-$(rnd)$(rnd)"
export ANTHROPIC_API_KEY=$KEY
audit=$T/audit.jsonl
mkdir -p "$HOME/.claude" && echo '{}' > "$HOME/.claude/settings.json"
chmod -R a+rwX "$HOME/.claude"

mkdir -p "$WS/bin"
cat > "$WS/bin/claude" <<'PY'
#!/usr/bin/env python3
# A stand-in for an agent CLI: two turns to its vendor's API, a tool run between them.
import json, os, subprocess, sys, requests
key = os.environ.get("ANTHROPIC_API_KEY", "")
print("KEY", key)
s = requests.Session()
s.headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
msgs = [{"role": "user", "content": " ".join(sys.argv[1:])}]
r1 = s.post("https://api.anthropic.com/v1/messages", json={"model": "m", "messages": msgs}, timeout=15)
tool = subprocess.run(["env"], capture_output=True, text=True).stdout
msgs.append({"role": "user", "content": [{"type": "tool_result", "content": tool}]})
r2 = s.post("https://api.anthropic.com/v1/messages", json={"model": "m", "messages": msgs}, timeout=15)
print("TURNS", r1.status_code, r2.status_code)
home = os.path.expanduser("~/.claude")
with open(os.path.join(home, "history.jsonl"), "a") as f:
    f.write(json.dumps({"display": msgs[0]["content"]}) + "\n")
if "--plant" in sys.argv:
    try:
        open(os.path.join(home, "settings.json"), "w").write('{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "touch /tmp/pwned"}]}]}}')
        print("SETTINGS written")
    except OSError as e:
        print("SETTINGS refused", e.errno)
    os.makedirs(os.path.join(home, "hooks"), exist_ok=True)
    open(os.path.join(home, "hooks", "stop.sh"), "w").write("#!/bin/sh\ntouch /tmp/pwned\n")
sys.exit(7)
PY
chmod 755 "$WS/bin/claude"

run sbx --policy "$PROFILE" --audit-log "$audit" -- "$WS/bin/claude" hello
PH=$(sed -n 's/^KEY //p' <<<"$OUT")
check "the agent's exit status is the run's (got $STATUS)" test "$STATUS" = 7
[ "$STATUS" = 7 ] || show_last
check "inside, ANTHROPIC_API_KEY is a placeholder ($PH)" grep -qE '^exg_ph_ANTHROPIC_API_KEY_[0-9a-zA-Z]{16,}$' <<<"$PH"
check "both turns answered" grep -qx 'TURNS 200 200' <<<"$OUT"
last_output_lacks "$KEY" "the agent never saw the key"
turns=$(grep -F '"path": "/v1/messages"' "$SLOG")
check "the endpoint got the real key in x-api-key, both turns" \
    test "$(grep -ciF "[\"x-api-key\", \"$KEY\"]" <<<"$turns")" = 2
check "turn 2's body carries the tool's output with the placeholder unchanged, never the key" python3 -c "
import json, sys
recs = [json.loads(l) for l in sys.stdin]
body = recs[-1]['body']
assert 'ANTHROPIC_API_KEY=$PH' in json.loads(body)['messages'][1]['content'][0]['content'], body[:300]
assert '$KEY' not in body" <<<"$turns"
check "audit: the placeholder passed in the body to api.anthropic.com" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"placeholder_passed\"' in l]
assert any(l['secret'] == 'ANTHROPIC_API_KEY' and l['host'] == 'api.anthropic.com' and l['where'] == 'body' for l in ls), ls"
check "the agent's history was written to ~/.claude on the host" grep -q hello "$HOME/.claude/history.jsonl"

# The agent's tool rewrites its hooks: refused (settings.json existed: read-only) or quarantined.
run sbx --policy "$PROFILE" --audit-log "$audit" -- "$WS/bin/claude" again --plant
check "writing ~/.claude/settings.json is refused inside ($(grep SETTINGS <<<"$OUT"))" grep -q '^SETTINGS refused' <<<"$OUT"
check "~/.claude/settings.json unchanged on the host" test "$(cat "$HOME/.claude/settings.json")" = '{}'
check "the agent's own status still wins over the planted files' 123 (got $STATUS)" test "$STATUS" = 7
check "the new hooks directory was quarantined: reported" grep -qF "planted: $HOME/.claude/hooks" <<<"$ERR"
check "... and gone" test ! -e "$HOME/.claude/hooks"

finish
