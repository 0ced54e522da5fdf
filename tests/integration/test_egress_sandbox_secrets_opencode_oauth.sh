#!/usr/bin/env bash
# The real OpenCode signed in to Anthropic with OAuth (a Claude Pro/Max subscription; issue 45),
# run whole by `exguardian agent opencode` in a pty in the egress test world. OpenCode 1.18.33
# has no Anthropic sign-in of its own: it is the npm plugin opencode-anthropic-auth (0.0.13),
# which a user names in OpenCode's config ("plugin"). OpenCode installs a plugin named by its
# npm name with its own package manager at start, which needs the registry: here, as a user
# without egress to it would, the plugin is installed on the host (npm, pinned, in the runner's
# cache, copied to a directory under HOME outside the profile's writable trees) and named by its
# directory (a file:// entry), which OpenCode imports as it is.
# The user's ~/.local/share/opencode/auth.json holds an expired access token and a refresh
# token (anthropic.access/refresh/expires): the plugin refreshes at console.anthropic.com (JSON,
# the world's echo issues new tokens), writes them into auth.json inside (through OpenCode's
# auth API), and its model turns to api.anthropic.com carry the new access token in
# Authorization. Judged from the host: the token endpoint got the real refresh token, the turns
# the new real access token, the file the tool `cat`s inside holds new placeholders only, the
# user's file outside the new real tokens, and no real token in the turns' bodies or the CLI's
# terminal output, and the world got requests for Anthropic's hosts only (OpenCode's background
# install of its plugin SDK into ~/.config/opencode goes to the registry: refused, not needed).
# Then the same without the plugin: OpenCode does not sign in, no request reaches Anthropic.
# Last, what OpenCode loads as code from ~/.config/opencode (writable in its profile) is protected.
# The scripted model is tests/integration/egress_world_secrets.sh's.
# npm: opencode-ai@1.18.33 opencode-anthropic-auth@0.0.13
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish
if ! command -v script >/dev/null; then
    fail "script is needed (make deps installs it)"
    finish
fi
# (run.sh installed the packages before the world was built: the world has no registry)
if ! npm_pinned "$T/npm" opencode-ai@1.18.33 opencode-anthropic-auth@0.0.13; then
    fail "npm install of OpenCode and its plugin failed: $(tail -n 3 "$T/npm/npm.log" 2>/dev/null)"
    finish
fi
MODS=$(readlink -f "$T/npm/node_modules")  # (the runner's cache, seen inside; $T's /tmp is not)
BIN=$MODS/.bin
# The plugin where a user would install it: a directory of their own under HOME that the profile
# does not make writable (the plugin and what it imports; OpenCode's own packages stay out).
PLUGINS=$HOME/.local/lib/opencode-plugins/node_modules
mkdir -p "$PLUGINS"
for m in "$MODS"/*; do
    case ${m##*/} in opencode-ai|opencode-linux-*) ;; *) cp -r "$m" "$PLUGINS/" ;; esac
done
PLUGIN=$PLUGINS/opencode-anthropic-auth
need_source_tree profiles/agents/opencode.json
export EXGUARDIAN_AGENT_PROFILES=$SRC/profiles/agents
SLOG=$(dirname "$EGW_LOG")/secrets.log
audit=$T/audit.jsonl

mkdir -p "$HOME/.config/opencode" "$HOME/.local/share/opencode" "$HOME/.cache/opencode"
cat > "$HOME/.config/opencode/opencode.json" <<EOF
{"\$schema": "https://opencode.ai/config.json",
 "plugin": ["file://$PLUGIN"],
 "permission": {"bash": "allow", "external_directory": "allow"}}
EOF
ACCESS="sk-ant-oat01-exgtest-$(rnd)$(rnd)"
REFRESH="sk-ant-ort01-exgtest-$(rnd)$(rnd)"
NEW_ACCESS=$(issued "$REFRESH" sk-ant-oat01-new- a)
NEW_REFRESH=$(issued "$REFRESH" sk-ant-ort01-new- r)
CRED=$HOME/.local/share/opencode/auth.json
printf '{"anthropic": {"type": "oauth", "refresh": "%s", "access": "%s", "expires": 1000}}\n' "$REFRESH" "$ACCESS" > "$CRED"
chmod -R a+rwX "$HOME/.config" "$HOME/.local" "$HOME/.cache"
chmod 600 "$CRED"
# (its update check and model catalogue fetch off: the world has neither; 1.18.33 still asks
# models.opencode.ai for the catalogue, refused, and uses the one it ships)
export OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1

before=$(wc -l < "$SLOG")
printf 'EXG-RUN: cat ~/.local/share/opencode/auth.json' > "$T/prompt"
run timeout -k 5 120 script -qec "cd '$WS' && PATH='$BIN:$PATH' '$EXG' agent opencode --audit-log '$audit' \
-- run -m anthropic/claude-sonnet-4-5 \"\$(cat '$T/prompt')\"" /dev/null
ALL=$(tail -n +$((before + 1)) "$SLOG")
# The model turns (OpenCode's title request is none), and the tool's output as the CLI sent it back.
TURNS=$(grep -F '"path": "/v1/messages' <<<"$ALL" | grep -v 'Generate a title for this conversation')
TOOL=$(python3 -c '
import json, sys
last = json.loads(json.loads(sys.stdin.read().splitlines()[-1])["body"])["messages"][-1]["content"]
for b in last if isinstance(last, list) else []:
    if b.get("type") == "tool_result":
        c = b["content"]
        print(c if isinstance(c, str) else "".join(x.get("text", "") for x in c))' <<<"$TURNS" 2>&1)

check "opencode OAuth: ran in a pty and ended with the model's answer (status $STATUS)" \
    bash -c '[ "$0" = 0 ] && grep -q done <<<"$1"' "$STATUS" "$OUT"
[ "$STATUS" = 0 ] || show_last
CLIENT_ID=$(grep -oE 'CLIENT_ID = "[^"]+"' "$PLUGIN/index.mjs" | cut -d'"' -f2)
check "opencode OAuth: the plugin refreshed at console.anthropic.com with the real refresh token (its client_id $CLIENT_ID)" python3 -c '
import json, sys
tok = [json.loads(l) for l in sys.stdin if "\"path\": \"/v1/oauth/token\"" in l]
sent = [json.loads(r["body"]) for r in tok]
assert len(tok) == 1 and sent[0]["refresh_token"] == sys.argv[1] and sent[0]["client_id"] == sys.argv[2], [r["body"][:120] for r in tok]
assert dict((k.lower(), v) for k, v in tok[0]["headers"])["host"] == "console.anthropic.com", tok' "$REFRESH" "$CLIENT_ID" <<<"$ALL"
check "opencode OAuth: two turns to api.anthropic.com, each with the refreshed access token in Authorization, no x-api-key ($(grep -c . <<<"$TURNS"))" \
    bash -c '[ "$(grep -c . <<<"$0")" = 2 ] && [ "$(grep -ciF "[\"authorization\", \"Bearer $1\"]" <<<"$0")" = 2 ] &&
             ! grep -qi "\"x-api-key\"" <<<"$0"' "$TURNS" "$NEW_ACCESS"
check "opencode OAuth: the tool's cat of auth.json inside shows new placeholders only" python3 -c '
import json, re, sys
c = json.loads(sys.argv[1])["anthropic"]
assert re.fullmatch(r"exg_ph_OPENCODE_ANTHROPIC_OAUTH_ACCESS_TOKEN_[0-9a-f]{32}", c["access"]), c
assert re.fullmatch(r"exg_ph_OPENCODE_ANTHROPIC_OAUTH_REFRESH_TOKEN_[0-9a-f]{32}", c["refresh"]), c
assert c["type"] == "oauth" and c["expires"] > 1000, c' "$TOOL"
check "opencode OAuth: the CLI's terminal shows the same file as the tool printed it" \
    grep -qF "$(grep -o '"access": "exg_ph_[^"]*"' <<<"$TOOL")" <<<"$OUT"
check "opencode OAuth: no real token, old or new, in what the tool printed or the turns' bodies" python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.argv[5].splitlines() if l.strip()]
for v in sys.argv[1:5]:
    assert v not in sys.argv[6] and not any(v in r["body"] for r in recs), v[:24]' \
    "$ACCESS" "$REFRESH" "$NEW_ACCESS" "$NEW_REFRESH" "$TURNS" "$TOOL"
for v in "$ACCESS" "$REFRESH" "$NEW_ACCESS" "$NEW_REFRESH"; do
    last_output_lacks "$v" "opencode OAuth: the CLI's terminal output never holds a real token (${v:0:24}...)"
done
check "opencode OAuth: the user's auth.json outside holds the new real tokens, no placeholder, mode 600" bash -c \
    'grep -qF "\"$1\"" "$0" && grep -qF "\"$2\"" "$0" && ! grep -q exg_ph_ "$0" && [ "$(stat -c %a "$0")" = 600 ]' \
    "$CRED" "$NEW_ACCESS" "$NEW_REFRESH"
check "opencode OAuth: audit: both tokens refreshed at console.anthropic.com and written back to the user's file" python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]) if "\"token_refreshed\"" in l]
got = sorted((l["secret"], l["field"], l["host"], l.get("file"), "write_back_error" in l) for l in ls)
assert got == [("OPENCODE_ANTHROPIC_OAUTH_ACCESS_TOKEN", "access_token", "console.anthropic.com", sys.argv[2], False),
               ("OPENCODE_ANTHROPIC_OAUTH_REFRESH_TOKEN", "refresh_token", "console.anthropic.com", sys.argv[2], False)], ls' "$audit" "$CRED"
[ -n "$TOOL" ] || show_last
check "opencode OAuth: the world got requests for the vendor's hosts only" python3 -c '
import json, sys
hosts = {dict((k.lower(), v) for k, v in json.loads(l)["headers"])["host"] for l in sys.stdin if l.strip()}
assert hosts == {"api.anthropic.com", "console.anthropic.com"}, hosts' <<<"$ALL"

# Without the plugin, OpenCode 1.18.33 does not use the OAuth tokens at all (its Anthropic
# provider takes an API key only): it fails before any request to Anthropic. So the round above
# was the plugin's.
echo '{"permission": {"bash": "allow", "external_directory": "allow"}}' > "$HOME/.config/opencode/opencode.json"
printf '{"anthropic": {"type": "oauth", "refresh": "%s", "access": "%s", "expires": 1000}}\n' "$REFRESH" "$ACCESS" > "$CRED"
before=$(wc -l < "$SLOG")
run timeout -k 5 120 script -qec "cd '$WS' && PATH='$BIN:$PATH' '$EXG' agent opencode \
-- run -m anthropic/claude-sonnet-4-5 \"\$(cat '$T/prompt')\"" /dev/null
check "opencode OAuth without the plugin: no sign-in, no request to Anthropic, the run fails (status $STATUS)" \
    bash -c '[ "$0" != 0 ] && [ -z "$1" ]' "$STATUS" "$(tail -n +$((before + 1)) "$SLOG")"

# OpenCode loads its global plugins (and custom tools, commands, the packages they import) from
# ~/.config/opencode, which its profile makes writable: a tool rewriting a plugin the user has
# there is refused, one it plants is quarantined at exit (123), so neither runs at OpenCode's next
# start on the host.
mkdir -p "$HOME/.config/opencode/plugins"
echo 'export const Mine = async () => ({})' > "$HOME/.config/opencode/plugins/mine.js"
cp "$HOME/.config/opencode/plugins/mine.js" "$T/mine.before"
chmod -R a+rwX "$HOME/.config/opencode"
run sbx --policy "$SRC/profiles/agents/opencode.json" -- sh -c 'echo "fetch(1)" >> ~/.config/opencode/plugins/mine.js || echo mine-refused
mkdir -p ~/.config/opencode/plugin ~/.config/opencode/node_modules/p && echo "fetch(2)" > ~/.config/opencode/plugin/exg.js &&
echo "fetch(3)" > ~/.config/opencode/node_modules/p/index.js && echo planted'
check "opencode's global plugins: the user's refused inside, the planted plugin and package quarantined, exit 123 ($STATUS)" \
    bash -c '[ "$0" = 123 ] && grep -qx mine-refused <<<"$1" && grep -qx planted <<<"$1" &&
             grep -qF "planted: $3/.config/opencode/plugin " <<<"$2" && grep -qF "planted: $3/.config/opencode/node_modules " <<<"$2"' \
    "$STATUS" "$OUT" "$ERR" "$HOME"
[ "$STATUS" = 123 ] || show_last
check "... on the host afterwards: the user's plugin unchanged, nothing planted there" \
    bash -c 'cmp -s "$0" "$1" && [ ! -e "$2/plugin" ] && [ ! -e "$2/node_modules" ]' \
    "$HOME/.config/opencode/plugins/mine.js" "$T/mine.before" "$HOME/.config/opencode"

# Its cache directory, also writable: what OpenCode downloads there (npm plugins in packages/,
# language servers in bin/, skills) is code it runs later. The profile makes bin/ before the run
# (OpenCode makes it at every start: the real run above ended 0 with it read-only), so a tool
# cannot put a language server in it, and a package it plants is quarantined at exit.
run sbx --policy "$SRC/profiles/agents/opencode.json" -- sh -c 'printf "#!/bin/sh\necho pwned\n" > ~/.cache/opencode/bin/typescript-language-server || echo bin-refused
mkdir -p ~/.cache/opencode/packages/evil && echo "fetch(4)" > ~/.cache/opencode/packages/evil/index.js && echo planted'
check "opencode's cache: a language server refused in bin/, a planted package quarantined, exit 123 ($STATUS)" \
    bash -c '[ "$0" = 123 ] && grep -qx bin-refused <<<"$1" && grep -qx planted <<<"$1" &&
             grep -qF "planted: $3/.cache/opencode/packages " <<<"$2"' "$STATUS" "$OUT" "$ERR" "$HOME"
[ "$STATUS" = 123 ] || show_last
check "... on the host afterwards: neither is there" \
    bash -c '[ ! -e "$0/packages" ] && [ -d "$0/bin" ] && [ -z "$(ls -A "$0/bin")" ]' "$HOME/.cache/opencode"

finish
