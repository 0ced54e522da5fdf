#!/usr/bin/env bash
# Credential injection benchmark: what terminating TLS costs. One nginx HTTPS origin (own test
# CA) answers for b.test and c.test; the standalone `exguardian proxy` has a secret for b.test
# (intercepted: TLS to both sides, placeholder swapped, response masked) and none for c.test
# (tunnelled with splice). Compared: direct, tunnelled, intercepted, for bulk download
# throughput (best of 3), 1,000 small requests on one kept-alive connection, and 100 new
# connections (one curl each). Everything runs in a private network + mount namespace.
#
#   sudo EXG=/path/to/exguardian bash bench/secrets.sh
#
# Environment: EXG (default build/exguardian), SIZE_MIB (bulk file, 512), REQS (1000), CONNS (100).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
if [ "${EXG_BENCH_INNER:-}" != 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "bench: run as root (it makes a network namespace)" >&2; exit 1; }
    EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
    [ -x "$EXG" ] || { echo "bench: no exguardian binary at $EXG" >&2; exit 1; }
    [ -x /usr/sbin/nginx ] || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light >/dev/null
    D=$(mktemp -d /tmp/exg-bench-secrets.XXXXXX)
    chmod 755 "$D"  # nginx's workers read the files as www-data
    trap 'rm -rf "$D"' EXIT
    EXG=$EXG D=$D EXG_BENCH_INNER=1 unshare -n -m --propagation private bash "$0"
    exit $?
fi

cd "$D"
SIZE_MIB=${SIZE_MIB:-512} REQS=${REQS:-1000} CONNS=${CONNS:-100}
ip link set lo up
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=bench origin CA" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout leaf.key -out leaf.csr \
    -subj /CN=b.test 2>/dev/null
printf 'subjectAltName=DNS:b.test,DNS:c.test\nextendedKeyUsage=serverAuth\n' > leaf.ext
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile leaf.ext \
    -out leaf.pem 2>/dev/null
# The origin's CA joins this namespace's host trust store (what the proxy verifies against).
cat /etc/ssl/certs/ca-certificates.crt ca.pem > bundle.crt
mount --bind bundle.crt /etc/ssl/certs/ca-certificates.crt
printf '127.0.0.1 localhost\n127.0.0.1 b.test\n127.0.0.1 c.test\n' > hosts
mount --bind hosts /etc/hosts
mkdir www && head -c $((SIZE_MIB * 1024 * 1024)) /dev/zero > www/big && echo hi > www/small
cat > nginx.conf <<EOF
worker_processes 1;
pid $D/nginx.pid;
error_log $D/nginx.err;
events { worker_connections 1024; }
http {
  access_log off;
  server {
    listen 127.0.0.1:8443 ssl;
    ssl_certificate $D/leaf.pem;
    ssl_certificate_key $D/leaf.key;
    root $D/www;
    keepalive_requests 100000;
  }
}
EOF
/usr/sbin/nginx -c "$D/nginx.conf"
cat > policy.json <<'EOF'
{"network": {"allowedDomains": ["b.test", "c.test"], "allowedCidrs": ["127.0.0.1/32"]},
 "secrets": [{"name": "TOK", "from": "env:TOK", "hosts": ["b.test"]}]}
EOF
echo "bench-$RANDOM$RANDOM" > token
TOK=bench-value-0123456789 "$EXG" proxy --listen 127.0.0.1:3999 --policy policy.json --token-file token \
    --ca-cert-out pca.pem --placeholders-out ph 2>proxy.err &
proxy=$!
# Under set -e a failing kill in the trap would end it early (exit 1, nginx left running):
# every step here may fail without stopping the rest.
stop_all() {
    kill "$(cat "$D/nginx.pid" 2>/dev/null)" 2>/dev/null || true
    kill "$proxy" 2>/dev/null || true
}
trap stop_all EXIT
for _ in $(seq 50); do [ -s ph ] && break; sleep 0.1; done
PH=$(sed -n 's/^TOK=//p' ph)
cat ca.pem pca.pem > clientca.pem
PX="http://exguardian:$(cat token)@127.0.0.1:3999"
C=(curl -sS --fail --cacert clientca.pem -H "Authorization: Bearer $PH")

bulk() {  # HOST CURL-ARGS...: best MiB/s of 3
    local h=$1; shift
    for _ in 1 2 3; do "${C[@]}" "$@" -o /dev/null -w "%{speed_download}\n" "https://$h:8443/big"; done |
        sort -g | tail -1 | awk '{printf "%.0f", $1 / 1048576}'
}
keepalive() {  # HOST CURL-ARGS...: microseconds per request, REQS on one connection
    local h=$1; shift
    local urls=() s e
    for i in $(seq "$REQS"); do urls+=("https://$h:8443/small"); done
    s=$(date +%s%N)
    "${C[@]}" "$@" "${urls[@]}" -o /dev/null >/dev/null
    e=$(date +%s%N)
    echo $(((e - s) / 1000 / REQS))
}
newconn() {  # HOST CURL-ARGS...: microseconds per new connection (one curl each)
    local h=$1; shift
    local s e
    s=$(date +%s%N)
    for _ in $(seq "$CONNS"); do "${C[@]}" "$@" -o /dev/null "https://$h:8443/small"; done
    e=$(date +%s%N)
    echo $(((e - s) / 1000 / CONNS))
}

echo "| path | bulk ${SIZE_MIB} MiB (MiB/s, best of 3) | ${REQS} requests kept alive (us each) | new connection, one curl (us) |"
echo "|---|---|---|---|"
echo "| direct | $(bulk b.test) | $(keepalive b.test) | $(newconn b.test) |"
echo "| tunnelled (no secret) | $(bulk c.test --proxy "$PX") | $(keepalive c.test --proxy "$PX") | $(newconn c.test --proxy "$PX") |"
echo "| intercepted (secret) | $(bulk b.test --proxy "$PX") | $(keepalive b.test --proxy "$PX") | $(newconn b.test --proxy "$PX") |"
kill $proxy
wait $proxy || true
tail -n1 proxy.err
