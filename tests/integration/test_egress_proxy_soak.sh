#!/usr/bin/env bash
# The egress proxy under a crowd (issue 19, part 4), in the test world of egress_world.sh:
# 1,000 concurrent CONNECT tunnels (each proven by an echo), slowloris clients holding their
# heads open, malformed and oversized heads, clients that vanish (RST) mid-download. A
# well-behaved client's requests succeed throughout and after; the proxy's RSS stays bounded
# and returns after; its descriptors return exactly to where they were. Then the connection
# cap: past --max-connections a client gets a 503 that says why, and an audit line.
# bench/proxy_soak.sh runs the same with a bigger crowd (SOAK_* variables).
source "$(dirname "$0")/lib.sh"

if [ "$EXG_AS" != root ]; then
    echo "# skip - the proxy soak runs as root (the test world needs network namespaces)"
    exit 0
fi
here=$(dirname "$0")
src=""
if [ -n "${EXG_BUILD_DIR:-}" ] && [ -f "$EXG_BUILD_DIR/CMakeCache.txt" ]; then
    src=$(sed -n 's/^exguardian_SOURCE_DIR:STATIC=//p' "$EXG_BUILD_DIR/CMakeCache.txt")/tests/integration
fi
find_lib() { local f; for f in "$here/$1" "$src/$1"; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 1; }
world_lib=$(find_lib egress_world.sh) && SOAK_PY=$(find_lib proxy_soak.py) && ECHO_PY=$(find_lib echo_server.py) ||
    { echo "# skip - egress_world.sh, proxy_soak.py or echo_server.py not found"; exit 0; }
source "$world_lib"

world_up || { fail "the test world could not be built"; finish; }
ok "test world up ($EGW_NS_C, $EGW_NS_S)"
cp "$SOAK_PY" "$ECHO_PY" "$T/"
in_server python3 "$T/echo_server.py" 203.0.113.10 9000 </dev/null >"$T/echo.err" 2>&1 &
world_track $!
echo_up() { in_client python3 -c 'import socket; socket.create_connection(("203.0.113.10", 9000), timeout=1).close()' 2>/dev/null; }
wait_for 10 echo_up && ok "echo server on allowed.test:9000" || { fail "echo server did not come up"; finish; }

POLICY=$T/policy.json
AUDIT=$T/audit.log
echo '{"network": {"allowedDomains": ["allowed.test"], "deniedDomains": []}}' > "$POLICY"
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$TOKEN" > "$T/token"
chmod 600 "$T/token"
: > "$AUDIT"

# ---- the crowd ---------------------------------------------------------------------------------
in_client_bg "$EXG" proxy --listen 127.0.0.1:3128 --policy "$POLICY" --audit-log "$AUDIT" --token-file "$T/token" \
    --header-timeout 2 </dev/null >"$T/proxy.out" 2>"$T/proxy.err"
proxy_pid=$EGW_BG_PID
proxy_up() { in_client bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128' 2>/dev/null; }
if wait_for 10 proxy_up; then ok "proxy listening (pid $proxy_pid)"
else fail "proxy did not come up"; sed 's/^/#      /' "$T/proxy.err"; finish; fi

: "${SOAK_TUNNELS:=1000}" "${SOAK_SLOW:=200}" "${SOAK_BAD:=100}" "${SOAK_VANISH:=100}" "${SOAK_HOLD:=1}"
export SOAK_TUNNELS SOAK_SLOW SOAK_BAD SOAK_VANISH SOAK_HOLD
# The clients' own descriptors: every tunnel, slow and vanishing client holds one.
run in_client bash -c 'ulimit -n 20000 2>/dev/null || ulimit -n 8192; exec python3 "$@"' _ \
    "$T/proxy_soak.py" "$proxy_pid" 3128 "$TOKEN" allowed.test:9000 "$T/soak.json"
[ "$STATUS" = 0 ] || { fail "the soak driver failed (exit $STATUS)"; show_last; }
if [ -s "$T/soak.json" ]; then
    r() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/soak.json" "$1"; }
    note "driver took $(r seconds) s; proxy RSS before/during/after: $(r rss_before_kib)/$(r rss_during_kib)/$(r rss_after_kib) KiB;" \
         "fds $(r fds_before)/$(r fds_during)/$(r fds_after)"
    python3 -c 'import json, sys; [print("#      client saw:", e) for e in json.load(open(sys.argv[1]))["errors"][:8]]' "$T/soak.json"
    check "$SOAK_TUNNELS tunnels at once, each proven by an echo ($(r tunnels_ok) ok)" test "$(r tunnels_ok)" = "$SOAK_TUNNELS"
    check "  all of them open together: the proxy held >= 2 fds each ($(r fds_during))" \
        test "$(r fds_during)" -ge $((2 * SOAK_TUNNELS))
    check "$SOAK_SLOW slowloris clients: every one cut by the header timeout ($(r slow_cut))" test "$(r slow_cut)" = "$SOAK_SLOW"
    check "$SOAK_BAD malformed or oversized heads: every one answered 4xx and closed ($(r bad_refused))" \
        test "$(r bad_refused)" = "$SOAK_BAD"
    check "$SOAK_VANISH clients that reset mid-download got their bytes first ($(r vanish_ok))" test "$(r vanish_ok)" = "$SOAK_VANISH"
    check "the well-behaved client: every request answered by the origin throughout ($(r well_behaved_ok) ok, $(r well_behaved_bad) not)" \
        test "$(r well_behaved_bad)" = 0 -a "$(r well_behaved_ok)" -gt 0
    check "  and after ($(r after_ok) ok, $(r after_bad) not)" test "$(r after_bad)" = 0 -a "$(r after_ok)" -gt 0
    check "no descriptor leaked: $(r socket_fds_after) but pipes after, $(r socket_fds_before) before" \
        test "$(r socket_fds_after)" = "$(r socket_fds_before)"
    pipes_after=$(( $(r fds_after) - $(r socket_fds_after) ))
    check "  pipes: $pipes_after ends after, the pool's bound (64 pipes, 128 ends) or fewer" test "$pipes_after" -le 128
    # Bounded: at most 64 KiB per connection the crowd held (peers use 19-31 KiB per idle tunnel).
    crowd=$((SOAK_TUNNELS + SOAK_SLOW))
    grew=$(( $(r rss_during_kib) - $(r rss_before_kib) ))
    check "memory bounded: +$grew KiB for $crowd connections (at most 64 KiB each)" test "$grew" -le $((64 * crowd))
    # Returned: what stays after is at most a quarter of what the crowd took, plus 4 MiB.
    kept=$(( $(r rss_after_kib) - $(r rss_before_kib) ))
    check "memory returned: +$kept KiB after (at most ${grew}/4 + 4096)" test "$kept" -le $(( grew / 4 + 4096 ))
fi
check "the proxy is still running" kill -0 "$proxy_pid"
refused_lines=$(grep -c '"decision":"refused"' "$AUDIT" || true)
slow_lines=$(grep -c '"rule":"header_timeout' "$AUDIT" || true)
note "audit refusals by rule: $(grep -o '"rule":"[^"]*"' "$AUDIT" | sort | uniq -c | sort -rn | head -6 | tr -s ' \n' ' ')"
note "malformed, by reason: $(grep '"rule":"malformed request"' "$AUDIT" | grep -o '"reason":"[^"]*"' | sort | uniq -c | sort -rn | head -8 | tr -s ' \n' ' ')"
check "every malformed head and every slowloris client has an audit refusal ($refused_lines >= $((SOAK_BAD + SOAK_SLOW)))" \
    test "${refused_lines:-0}" -ge $((SOAK_BAD + SOAK_SLOW))
check "  the slowloris ones name the header timeout ($slow_lines >= $SOAK_SLOW)" test "${slow_lines:-0}" -ge "$SOAK_SLOW"
kill "$proxy_pid" 2>/dev/null
wait "$proxy_pid" 2>/dev/null

# ---- the connection cap ------------------------------------------------------------------------
CAP=50
: > "$AUDIT"
in_client_bg "$EXG" proxy --listen 127.0.0.1:3129 --policy "$POLICY" --audit-log "$AUDIT" --token-file "$T/token" \
    --max-connections "$CAP" --header-timeout 60 </dev/null >"$T/proxy2.out" 2>"$T/proxy2.err"
cap_pid=$EGW_BG_PID
cap_up() { in_client bash -c 'exec 3<>/dev/tcp/127.0.0.1/3129' 2>/dev/null; }
wait_for 10 cap_up || { fail "the capped proxy did not come up"; finish; }
cat > "$T/cap.py" <<'PY'
import base64, socket, sys, time
cap, token = int(sys.argv[1]), sys.argv[2]
auth = b"Proxy-Authorization: Basic " + base64.b64encode(b"exguardian:" + token.encode()) + b"\r\n"
def get(n):
    s = socket.create_connection(("127.0.0.1", 3129), timeout=10)
    s.sendall(b"GET http://allowed.test/cap-%d HTTP/1.1\r\nHost: allowed.test\r\n" % n + auth + b"\r\n")
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            return out
        out += b
# cap connections holding an unfinished head (the cap_up probe may still count: wait it out)
time.sleep(0.5)
held = []
for i in range(cap):
    s = socket.create_connection(("127.0.0.1", 3129), timeout=10)
    s.sendall(b"GET http://allowed.test/held HTTP/1.1\r\n")
    held.append(s)
time.sleep(0.5)
over = get(1)
print("over:", over.split(b"\r\n")[0].decode(), "|", over.split(b"\r\n\r\n", 1)[-1].decode().strip())
for s in held:
    s.close()
time.sleep(1.0)
again = get(2)
print("again:", again.split(b"\r\n")[0].decode())
PY
run in_client python3 "$T/cap.py" "$CAP" "$TOKEN"
check "connection $((CAP + 1)) past --max-connections $CAP: 503 saying why" \
    grep -q '^over: HTTP/1.1 503 .*| exguardian: too many connections' <<<"$OUT"
check "  with an audit line naming the cap" grep -q "\"rule\":\"max_connections $CAP\"" "$AUDIT"
check "  and once they are gone, the next request succeeds" grep -q '^again: HTTP/1.1 200' <<<"$OUT"
[ "$STATUS" = 0 ] || show_last
kill "$cap_pid" 2>/dev/null
wait "$cap_pid" 2>/dev/null

# Bad values are refused with one line.
run "$EXG" proxy --listen 127.0.0.1:3130 --policy "$POLICY" --max-connections 0
check "--max-connections 0: refused (exit $STATUS) naming the option" \
    bash -c '[ "$1" != 0 ] && grep -q -- "--max-connections" <<<"$2"' _ "$STATUS" "$ERR"

finish
