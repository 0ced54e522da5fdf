#!/usr/bin/env bash
# `exguardian mcp --server URL --api-key-file F` (issue 15, client mode): the MCP server whose
# tools are carried out by a running `exguardian serve`. The test starts one serve on
# 127.0.0.1 with a temporary tenants file, then the official MCP TypeScript SDK's client
# (@modelcontextprotocol/sdk from npm, pinned, installed into a temp dir) drives client mode
# over stdio (tests/mcp/sdk_remote_client.mjs): the same tools and schemas as standalone,
# create, commands (exit status, stdout/stderr apart, timeout), files, background commands,
# destroy, a bad key and a missing server as clear tool errors; afterwards nothing is left on
# the server. Then serve on a unix socket: client mode reaches it there too.
source "$(dirname "$0")/lib.sh"

SDK_VERSION=1.32.2
need_source_tree tests/mcp/sdk_remote_client.mjs node npm curl jq

KEY=mcp-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
printf '{"tenants": [{"id": "mcp", "keys": ["%s"]}]}\n' "$("$EXG" serve --hash-key "$KEY")" > "$T/tenants.json"
( umask 077; printf '%s\n' "$KEY" > "$T/key"; echo "wrong-$KEY" > "$T/bad-key" )
mkdir -m 700 "$T/mcp-state"

start_serve() {  # LISTEN LOG: sets SERVE_PID
    "$EXG" serve --listen "$1" --tenants "$T/tenants.json" --state-dir "$T/serve-state" > "$2" 2>&1 &
    SERVE_PID=$!
    track_bg "$SERVE_PID"
    wait_for 10 grep -q 'listening on' "$2" || { fail "serve did not start"; sed 's/^/#   /' "$2" | tail; finish; }
}
stop_serve() { kill -TERM "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; }

# ---- options: refused before anything runs ----
run "$EXG" mcp --server http://127.0.0.1:9
[ "$STATUS" = 125 ] && grep -q -- '--server: needs --api-key-file' <<<"$ERR" && ok "--server without --api-key-file: exit 125" || fail "no key file: $STATUS $ERR"
run "$EXG" mcp --server http://192.0.2.1:9 --api-key-file "$T/key"
[ "$STATUS" = 125 ] && grep -q 'not a loopback address' <<<"$ERR" && ok "--server on a non-loopback host: refused (the key would travel in clear)" || fail "non-loopback: $STATUS $ERR"
run "$EXG" mcp --server http://127.0.0.1:9 --api-key-file "$T/key" --layer container
[ "$STATUS" = 125 ] && grep -q -- '--layer: not with --server' <<<"$ERR" && ok "--layer with --server: refused, naming it" || fail "--layer: $STATUS $ERR"
run "$EXG" mcp --server http://127.0.0.1:9 --api-key-file "$T/no-such-file"
[ "$STATUS" = 125 ] && grep -q -- "--api-key-file $T/no-such-file" <<<"$ERR" && ok "a missing key file: exit 125 naming it" || fail "missing key file: $STATUS $ERR"

# ---- the SDK against serve on 127.0.0.1 ----
start_serve 127.0.0.1:0 "$T/serve.log"
URL=http://127.0.0.1:$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T/serve.log" | head -1)
left() { curl -s -H "X-API-KEY: $KEY" "$URL/v2/sandboxes" | jq length; }
mkdir -p "$T/node"
cp "$SRC/tests/mcp/sdk_remote_client.mjs" "$SRC/tests/mcp/sdk_checks.mjs" "$T/node/"
if npm_pinned "$T/node" "@modelcontextprotocol/sdk@$SDK_VERSION"; then
    ok "npm install @modelcontextprotocol/sdk@$SDK_VERSION"
    run env EXG="$EXG" SERVER="$URL" KEY_FILE="$T/key" BAD_KEY_FILE="$T/bad-key" KEY="$KEY" STATE="$T/mcp-state" \
        timeout 240 node "$T/node/sdk_remote_client.mjs"
    printf '%s\n' "$OUT" | grep -E '^(ok|FAIL) ' | sed 's/^/#   sdk: /'
    if [ "$STATUS" -eq 0 ] && grep -q '^[0-9]* passed, 0 failed' <<<"$OUT"; then ok "the MCP SDK client in client mode: $(tail -1 <<<"$OUT")"
    else fail "the MCP SDK client (status $STATUS): $(tail -1 <<<"$OUT")"; show_last; fi
    LEFT=$(sed -n 's/^left_running //p' <<<"$OUT")
    no_sandboxes() { [ "$(left)" = 0 ]; }
    if [ -n "$LEFT" ] && wait_for 20 no_sandboxes; then ok "the client's close destroyed the sandboxes it created ($LEFT among them): serve holds none"
    else fail "serve still holds: $(curl -s -H "X-API-KEY: $KEY" "$URL/v2/sandboxes")"; fi
    ! grep -q -- "$KEY" "$T/serve.log" && ok "the API key is not in serve's log" || fail "the API key is in serve's log"
else
    fail "npm install @modelcontextprotocol/sdk@$SDK_VERSION"; sed 's/^/#   /' "$T/node/npm.log" | tail -5
fi
stop_serve

# ---- serve on a unix socket: the same client, raw JSON-RPC lines ----
start_serve "unix:$T/serve.sock" "$T/serve-unix.log"
coproc UNIX_MCP { exec "$EXG" mcp --server "unix:$T/serve.sock" --api-key-file "$T/key" 2>"$T/unix-mcp.err"; }
track_bg "$UNIX_MCP_PID"
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_sandboxes","arguments":{}}}' >&"${UNIX_MCP[1]}"
line=""
read -t 60 -r line <&"${UNIX_MCP[0]}" && read -t 60 -r line <&"${UNIX_MCP[0]}"
jq -e 'select(.id == 2) | .result.isError == false and .result.structuredContent.sandboxes == []' <<<"$line" >/dev/null 2>&1 &&
    ok "unix:PATH: list_sandboxes through serve's unix socket" || fail "unix:PATH: ${line:0:300} $(tail -3 "$T/unix-mcp.err")"
kill -TERM "$UNIX_MCP_PID" 2>/dev/null
stop_serve
finish
