#!/usr/bin/env bash
# `exguardian serve` with E2B's code interpreter (issue 44, part 5; the port routing of part 4 it
# needs): the unmodified `@e2b/code-interpreter` SDK from npm (pinned) creates a sandbox of its
# default template code-interpreter-v1 and runs code in it (tests/e2b/code_interpreter.mjs: state
# kept between runCode calls, results, stdout/stderr, errors, env vars, contexts, the interrupt of a
# caller that left, a second tenant that never reaches the first one's port 49999, a web server on
# another port, the interpreter inside the sandbox's pid namespace and gone after the kill). One
# server, one sandbox per tenant; the curl-level and lifecycle checks of serve are test_serve.sh's.
# On the same server, tests/e2b/sdk_envd.mjs (the `e2b` SDK, pinned) checks envd's behaviour where
# E2B's own SDK tests expect it (issue 44, part 2: sorted listings, RemoveAll, symlink targets, gzip,
# recursive watches, list order and filters, metrics ranges, 501 for what is not served, a kill
# during a command).
# The server keeps one code-interpreter-v1 sandbox warm (--warm code-interpreter-v1=1): the SDK's
# first create takes it, its kernel started before the create (the server's log says so, and the
# kernel that answers the first runCode is that one), with the create's envVars handed to it then.
source "$(dirname "$0")/lib.sh"

CI_VERSION=2.8.0
E2B_VERSION=2.51.0  # as test_serve.sh: the SDK that tests/e2b/sdk_envd.mjs drives
need_source_tree tests/e2b/code_interpreter.mjs node npm curl python3 openssl

KEY_A=acme-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
KEY_B=other-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
cat > "$T/tenants.json" <<EOF
{"tenants": [{"id": "acme", "keys": ["$("$EXG" serve --hash-key "$KEY_A")"]},
             {"id": "other", "keys": ["$("$EXG" serve --hash-key "$KEY_B")"]}]}
EOF

# On another layer (run.sh ... container|gvisor; not in EXG_IT_LAYER_SCRIPTS, for make test's time):
# the templates file's own code-interpreter-v1 on that layer. gVisor's processes are its
# kernel's, not the host's: the host-side look at the interpreter is left out there.
TEMPLATES=()
if ! on_layer process; then
    echo "{\"templates\": {\"code-interpreter-v1\": {\"layer\": \"$EXG_LAYER\"}}}" > "$T/templates.json"
    TEMPLATES=(--templates "$T/templates.json")
fi
HOST_VIEW=1
DOMAIN=sandboxes.exg.test  # --domain: getHost(port)'s PORT-ID.DOMAIN (resolved to the server's loopback address by the script)
on_layer gvisor && HOST_VIEW=0
# start_server [extra options]: sets SERVER_PID and URL, or returns 1 (the log in $T/serve.log).
start_server() {
    "$EXG" serve --listen 127.0.0.1:0 --tenants "$T/tenants.json" --state-dir "$T/state" --warm 0 --warm code-interpreter-v1=1 --domain "$DOMAIN" "${TEMPLATES[@]}" "$@" > "$T/serve.log" 2>&1 &
    SERVER_PID=$!
    track_bg "$SERVER_PID"
    wait_for 20 bash -c "grep -q 'listening on 127.0.0.1:' '$T/serve.log' || ! kill -0 $SERVER_PID 2>/dev/null"
    grep -q 'listening on 127.0.0.1:' "$T/serve.log" || return 1
    URL=http://127.0.0.1:$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T/serve.log" | head -1)
}
# A user without cgroups it may write: the operator's explicit weaker mode (test_serve.sh checks the refusal).
if ! start_server; then
    wait "$SERVER_PID" 2>/dev/null
    if [ "$EXG_AS" != root ] && grep -q -- '--no-cgroup-limits' "$T/serve.log"; then
        note "as $EXG_AS without writable cgroups: --no-cgroup-limits"
        start_server --no-cgroup-limits || { fail "the server did not start: $(tail -3 "$T/serve.log")"; finish; }
    else
        fail "the server did not start: $(tail -3 "$T/serve.log")"; finish
    fi
fi

# The template's name as the SDK asks for it, without a templates file; a wrong one is still 404.
code=$(curl -s -o "$T/body" -w '%{http_code}' -X POST "$URL/sandboxes" -H "X-API-KEY: $KEY_A" -d '{"templateID": "code-interpreter-v2"}')
[ "$code" = 404 ] && ok "an unknown template is still 404" || fail "code-interpreter-v2: $code $(cat "$T/body")"

mkdir -p "$T/node"
cp "$SRC/tests/e2b/code_interpreter.mjs" "$SRC/tests/e2b/sdk_envd.mjs" "$SRC/tests/e2b/sdk_tls.mjs" "$SRC/tests/e2b/checks.mjs" "$T/node/"
if npm_pinned "$T/node" "@e2b/code-interpreter@$CI_VERSION" "e2b@$E2B_VERSION"; then
    ok "npm install @e2b/code-interpreter@$CI_VERSION e2b@$E2B_VERSION"
    # The pool's sandbox up, its kernel running, before the SDK's first create (waited for, not timed).
    wait_for 120 grep -q '"event":"pool_kernel_ready"' "$T/serve.log"
    grep -q '"event":"pool_kernel_ready"' "$T/serve.log" && ok "the pool's code-interpreter-v1 sandbox is ready, its kernel up" \
        || { fail "no pool_kernel_ready in the server's log"; tail -5 "$T/serve.log" | sed 's/^/#   /'; }
    run env E2B_API_URL="$URL" E2B_SANDBOX_URL="$URL" E2B_API_KEY="$KEY_A" OTHER_KEY="$KEY_B" HOST_VIEW=$HOST_VIEW SANDBOX_DOMAIN=$DOMAIN NO_PROXY='*' no_proxy='*' \
        timeout 300 node "$T/node/code_interpreter.mjs"
    printf '%s\n' "$OUT" | grep -E '^(ok|FAIL|skip) ' | sed 's/^/#   sdk: /'
    if [ "$STATUS" -eq 0 ] && grep -q '^[0-9]* passed, 0 failed' <<<"$OUT"; then ok "the code interpreter SDK: $(tail -1 <<<"$OUT")"
    else fail "the code interpreter SDK (status $STATUS): $(tail -1 <<<"$OUT")"; show_last; fi
    # The first create was served from the pool: its sandbox's kernel was up (logged) before the
    # create (logged after), and the kernel that ran the first runCode is that kernel.
    read -r _ _ SB_ID _ KPID < <(grep '^info sandbox ' <<<"$OUT")
    ready_at=$(grep -n "\"event\":\"pool_kernel_ready\".*\"sandbox\":\"$SB_ID\".*\"kernel_pid\":$KPID[,}]" "$T/serve.log" | head -1 | cut -d: -f1)
    create_at=$(grep -n "\"event\":\"create\".*\"sandbox\":\"$SB_ID\".*\"warm\":true" "$T/serve.log" | head -1 | cut -d: -f1)
    if [ -n "$SB_ID" ] && [ -n "$ready_at" ] && [ -n "$create_at" ] && [ "$ready_at" -lt "$create_at" ]; then
        ok "a create from the pool: sandbox $SB_ID's kernel (pid $KPID inside) started before the create (log lines $ready_at < $create_at) ran the first runCode"
    else
        fail "the pool's kernel: sandbox '$SB_ID' kernel '$KPID', pool_kernel_ready at line '$ready_at', create at '$create_at'"
        grep -E 'pool_kernel|"create"' "$T/serve.log" | head -5 | sed 's/^/#   /'
    fi
    # envd's behaviour as E2B's own SDK tests expect it (issue 44, part 2), on the same server.
    run env E2B_API_URL="$URL" E2B_SANDBOX_URL="$URL" E2B_API_KEY="$KEY_A" OTHER_KEY="$KEY_B" NO_PROXY='*' no_proxy='*' \
        timeout 300 node "$T/node/sdk_envd.mjs"
    printf '%s\n' "$OUT" | grep -E '^(ok|FAIL|skip) ' | sed 's/^/#   envd: /'
    if [ "$STATUS" -eq 0 ] && grep -q '^[0-9]* passed, 0 failed' <<<"$OUT"; then ok "envd as E2B's SDK tests expect it: $(tail -1 <<<"$OUT")"
    else fail "envd as E2B's SDK tests expect it (status $STATUS): $(tail -1 <<<"$OUT")"; show_last; fi

    # TLS on the listener (--tls-cert/--tls-key): a certificate made here for 127.0.0.1, DOMAIN
    # and *.DOMAIN; a second server on loopback; the SDK with https:// everywhere trusts it
    # through NODE_EXTRA_CA_CERTS (tests/e2b/sdk_tls.mjs).
    mkdir -p "$T/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$DOMAIN" \
        -addext "subjectAltName=IP:127.0.0.1,DNS:$DOMAIN,DNS:*.$DOMAIN" -keyout "$T/tls/key.pem" -out "$T/tls/cert.pem" 2>"$T/tls/openssl.log"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=other" \
        -keyout "$T/tls/other-key.pem" -out "$T/tls/other-cert.pem" 2>>"$T/tls/openssl.log"
    # Bad files: the server does not start (125), and says which file and why.
    bad_tls=""
    for pair in "$T/tls/key.pem $T/tls/key.pem --tls-cert" "$T/tls/cert.pem $T/tls/missing.pem --tls-key" \
                "$T/tls/cert.pem $T/tls/other-key.pem --tls-key" "$T/tenants.json $T/tls/key.pem --tls-cert"; do
        set -- $pair
        "$EXG" serve --listen 127.0.0.1:0 --tenants "$T/tenants.json" --state-dir "$T/state-badtls" --warm 0 --no-cgroup-limits \
            --tls-cert "$1" --tls-key "$2" > "$T/tls/bad.log" 2>&1 &
        bad_pid=$!; track_bg "$bad_pid"
        wait_for 20 bash -c "! kill -0 $bad_pid 2>/dev/null"
        kill "$bad_pid" 2>/dev/null; wait "$bad_pid"; st=$?
        [ "$st" = 125 ] && grep -q -- "serve: $3 $1\\|serve: $3 $2" "$T/tls/bad.log" && ! grep -q 'listening on' "$T/tls/bad.log" \
            || bad_tls="$bad_tls [$(basename "$1") $(basename "$2"): $st $(tail -1 "$T/tls/bad.log")]"
    done
    [ -z "$bad_tls" ] && ok "TLS: a certificate or key that is not one, missing, or not the pair: exit 125 naming the file" \
        || fail "TLS with bad files:$bad_tls"
    "$EXG" serve --listen 127.0.0.1:0 --tenants "$T/tenants.json" --state-dir "$T/state-tls" --warm 0 --domain "$DOMAIN" \
        --tls-cert "$T/tls/cert.pem" --tls-key "$T/tls/key.pem" "${TEMPLATES[@]}" $(grep -q -- '--no-cgroup-limits' "$T/serve.log" && echo --no-cgroup-limits) \
        > "$T/serve-tls.log" 2>&1 &
    TLS_PID=$!; track_bg "$TLS_PID"
    wait_for 20 bash -c "grep -q 'listening on 127.0.0.1:' '$T/serve-tls.log' || ! kill -0 $TLS_PID 2>/dev/null"
    TLS_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) (TLS).*/\1/p' "$T/serve-tls.log" | head -1)
    if [ -z "$TLS_PORT" ]; then
        fail "the TLS server did not start: $(tail -2 "$T/serve-tls.log")"
    else
        code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$T/tls/cert.pem" "https://127.0.0.1:$TLS_PORT/health")
        plain=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$TLS_PORT/health")
        [ "$code" = 200 ] && [ "$plain" != 200 ] && ok "TLS: /health over https verified against the test's certificate; plain HTTP on that port is not answered ($plain)" \
            || fail "TLS: https /health $code, plain http $plain"
        run env E2B_API_URL="https://127.0.0.1:$TLS_PORT" E2B_SANDBOX_URL="https://127.0.0.1:$TLS_PORT" E2B_API_KEY="$KEY_A" \
            NODE_EXTRA_CA_CERTS="$T/tls/cert.pem" SANDBOX_DOMAIN=$DOMAIN NO_PROXY='*' no_proxy='*' timeout 180 node "$T/node/sdk_tls.mjs"
        printf '%s\n' "$OUT" | grep -E '^(ok|FAIL|skip) ' | sed 's/^/#   tls: /'
        if [ "$STATUS" -eq 0 ] && grep -q '^[0-9]* passed, 0 failed' <<<"$OUT"; then ok "the SDK over TLS, getHost(port) over https: $(tail -1 <<<"$OUT")"
        else fail "the SDK over TLS (status $STATUS): $(tail -1 <<<"$OUT")"; show_last; fi
        kill -TERM "$TLS_PID"; wait "$TLS_PID"
    fi
else
    fail "npm install @e2b/code-interpreter@$CI_VERSION e2b@$E2B_VERSION"; sed 's/^/#   /' "$T/node/npm.log" | tail -5
fi

# A warm kernel that ended is not handed out: its sandbox ends (pool_kernel_ended) and the pool
# starts another, which the next create gets. The pool's sandbox now is the one started after the
# SDK's first create took the first; its kernel is killed from the host (its interpreter's child).
unclaimed_pool_id() {
    local id
    for id in $(sed -n 's/.*"event":"pool_kernel_ready".*"sandbox":"\([a-z0-9]*\)".*/\1/p' "$T/serve.log"); do
        grep -q "\"sandbox\":\"$id\".*\"reason\"\|\"event\":\"create\".*\"sandbox\":\"$id\"" "$T/serve.log" || echo "$id"
    done | tail -1
}
wait_for 120 bash -c "[ -n \"\$(sed -n 's/.*\"event\":\"pool_kernel_ready\".*\"sandbox\":\"\([a-z0-9]*\)\".*/\1/p' '$T/serve.log' | sed -n 2p)\" ]"
POOL_ID=$(unclaimed_pool_id)
KERNEL=""
if [ "$HOST_VIEW" = 1 ] && [ -n "$POOL_ID" ]; then
    for p in $(pgrep -f -- "--sandbox $POOL_ID"); do KERNEL=$(pgrep -P "$p" | head -1); [ -n "$KERNEL" ] && break; done
fi
if [ -z "$POOL_ID" ] || [ -z "$KERNEL" ] || ! kill -KILL "$KERNEL" 2>/dev/null; then
    skip "a pool's kernel killed from the host (pool sandbox '$POOL_ID', kernel '$KERNEL': not found or not ours to kill here)"
else
    wait_for 60 grep -q "\"event\":\"pool_kernel_ended\".*\"sandbox\":\"$POOL_ID\"" "$T/serve.log"
    wait_for 120 bash -c "sed -n '/\"event\":\"pool_kernel_ended\".*\"sandbox\":\"$POOL_ID\"/,\$p' '$T/serve.log' | grep -q '\"event\":\"pool_kernel_ready\"'"
    code=$(curl -s -o "$T/body" -w '%{http_code}' -X POST "$URL/sandboxes" -H "X-API-KEY: $KEY_A" -d '{"templateID": "code-interpreter-v1"}')
    NEW_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("sandboxID", ""))' "$T/body" 2>/dev/null)
    if grep -q "\"event\":\"pool_kernel_ended\".*\"sandbox\":\"$POOL_ID\"" "$T/serve.log" && [ "$code" = 201 ] && [ -n "$NEW_ID" ] &&
        [ "$NEW_ID" != "$POOL_ID" ] && grep -q "\"event\":\"create\".*\"sandbox\":\"$NEW_ID\".*\"warm\":true" "$T/serve.log"; then
        ok "a warm sandbox whose kernel was killed is not handed out: replaced, the next create gets the new one ($NEW_ID, warm)"
    else
        fail "the killed kernel's pool sandbox $POOL_ID: create $code $(head -c 200 "$T/body"); new '$NEW_ID'"
        grep -E 'pool_kernel|"create"|"gone"' "$T/serve.log" | tail -6 | sed 's/^/#   /'
    fi
    [ -n "$NEW_ID" ] && curl -s -o /dev/null -X DELETE "$URL/sandboxes/$NEW_ID" -H "X-API-KEY: $KEY_A"
    wait_for 30 bash -c "[ ! -e '$T/state/sandboxes/$NEW_ID' ]"
fi

# Nothing of the sandboxes is left once they are killed (the interpreter's process: the SDK script),
# but the pool's warm one (never created for anyone); nothing at all once the server has stopped.
left=()
for d in $(ls -A "$T/state/sandboxes" 2>/dev/null); do
    # (a tenant's has its create line; the pool's, ready or starting, have none)
    grep -q "\"event\":\"create\".*\"sandbox\":\"$d\"" "$T/serve.log" && left+=("$d")
done
[ ${#left[@]} -eq 0 ] && ok "every killed sandbox's state directory is gone (the pool's warm one is not a tenant's)" || fail "left: ${left[*]}"
kill -TERM "$SERVER_PID"; wait "$SERVER_PID"
[ -z "$(ls -A "$T/state/sandboxes" 2>/dev/null)" ] && ok "the server stopped: the pool's sandbox is gone too" || fail "left after the stop: $(ls -A "$T/state/sandboxes")"
finish
