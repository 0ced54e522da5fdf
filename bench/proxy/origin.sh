# The origin of the egress benchmarks (bench/proxy.sh, bench/transparent.sh), sourced inside
# their private network + mount namespace: ORIGIN (a name) on ORIGIN_IP (on lo) in a hosts file
# bound over /etc/hosts, no resolver, and nginx with sendfile serving $T/www/big (SIZE_MIB, paged
# in once) and $T/www/tiny, pinned to ORIGIN_CPU; its pid is added to the caller's pids array.
origin_up() {
    ip link set lo up
    ip addr add "$ORIGIN_IP/32" dev lo
    printf '127.0.0.1 localhost\n%s %s\n' "$ORIGIN_IP" "$ORIGIN" >"$T/hosts"
    echo 'nameserver 127.0.0.1' >"$T/resolv.conf"   # nothing listens: a lookup that misses the hosts file fails fast
    mount --bind "$T/hosts" /etc/hosts
    mount --bind "$T/resolv.conf" /etc/resolv.conf
    unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy NO_PROXY no_proxy

    # ---- Origin: nginx with sendfile, a SIZE_MIB file and a tiny one. ----
    mkdir -p "$T/www" "$T/nginx"
    fallocate -l "$((SIZE_MIB << 20))" "$T/www/big" 2>/dev/null ||
        dd if=/dev/zero of="$T/www/big" bs=1M count="$SIZE_MIB" status=none
    printf 'hello from origin\n' >"$T/www/tiny"
    cat >"$T/nginx/nginx.conf" <<EOF
    worker_processes 1;
    worker_rlimit_nofile 16384;
    pid $T/nginx/nginx.pid;
    error_log $T/nginx/error.log;
    events { worker_connections 16384; }
    http {
        access_log off;
        sendfile on;
        tcp_nopush on;
        tcp_nodelay on;
        keepalive_timeout 600s;
        keepalive_requests 100000;
        client_header_timeout 600s;
        client_body_temp_path $T/nginx/body;
        types { application/octet-stream big; text/plain tiny; }
        server {
            listen $ORIGIN_IP:80 backlog=4096;
            root $T/www;
            location / { }
        }
    }
EOF
    taskset -c "$ORIGIN_CPU" nginx -p "$T/nginx" -c "$T/nginx/nginx.conf" -g 'daemon off;' &
    pids+=($!)
    for _ in $(seq 100); do curl -sf -o /dev/null "http://$ORIGIN/tiny" && break; sleep 0.05; done
    curl -sf -o /dev/null "http://$ORIGIN/tiny" || { echo "bench: nginx origin did not come up" >&2; cat "$T/nginx/error.log" >&2; exit 1; }
    # Page the big file in once so every run reads it from the page cache.
    curl -s -o /dev/null "http://$ORIGIN/big"
}
