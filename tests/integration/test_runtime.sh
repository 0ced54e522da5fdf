#!/usr/bin/env bash
# `exguardian runtime` (issue 17) as engines call it, against crun on the same bundle and
# scenario: create (pid-file, console socket), state, start, exec (argv and --process,
# --detach), ps, kill, delete, exit codes, the errors engines look for (in a JSON log).
# Then what only ours does: a write outside allowWrite refused (read-only bind, Landlock),
# capabilities gone, ExGuardian's seccomp stacked, denyRead masked, a pod's pause container
# left alone; and egress in a test world of network namespaces this script builds
# (egress_world.sh): only the container's own proxy reachable, allowed name reached, denied
# name and 169.254.169.254 refused with audit lines tagged with the container id, also in an
# engine's namespace that has a route out (nftables closes it); the proxy's holder goes with
# delete. As the unprivileged user: errors and features, and create refusing to start a
# container it cannot protect.
. "$(dirname "$0")/lib.sh"

BB=$(command -v busybox || true)
if [ -z "$BB" ] || ! file -L "$BB" 2>/dev/null | grep -q 'statically linked' || ! command -v crun >/dev/null; then
    skip "needs crun and a static busybox (Debian: busybox-static)"; echo "1 passed, 0 failed"; exit 0
fi
RT_ROOT=$T/rt
H=$T/handlers
mkdir -p "$H"
# The handler's policy: container paths; /work writable, the rest read-only; /etc/secret masked.
cat > "$H/default.json" <<JSON
{
  "network": {"allowedDomains": ["allowed.test", "denied.test", "meta.test"], "deniedDomains": ["denied.test"]},
  "filesystem": {"denyRead": ["/etc/secret"], "allowWrite": ["/work", "/tmp"], "denyWrite": []},
  "audit": {"log": "$T/audit.jsonl"}
}
JSON
exg_rt() { EXGUARDIAN_HANDLERS_DIR=$H timeout 30 "$EXG" runtime --root "$RT_ROOT" "$@"; }

if [ "$EXG_AS" != root ]; then
    expect_output_contains '"ociVersionMax"' exg_rt features
    run exg_rt --log "$T/log.json" --log-format json state nope
    check "state of an unknown container: exit 1, 'does not exist' in the JSON log" \
        bash -c "[ $STATUS = 1 ] && grep -q '\"level\":\"error\".*container \\\\\"nope\\\\\" does not exist' '$T/log.json'"
    mkdir -p "$T/b/rootfs"
    (cd "$T/b" && crun spec --rootless) >/dev/null
    run exg_rt create --bundle "$T/b" c-user
    check "create as an unprivileged user fails closed (no network namespace of its own)" \
        bash -c "[ $STATUS != 0 ] && grep -q 'egress holder' <<<'$ERR'"
    finish
fi

# The bundle: a busybox root (no image pulled), crun's default config.
B=$T/bundle
mkdir -p "$B/rootfs/bin" "$B/rootfs/etc" "$B/rootfs/work" "$B/rootfs/data" "$T/work" "$T/data"
cp "$BB" "$B/rootfs/bin/busybox"
for a in sh sleep touch cat echo id true wget tty unshare grep; do ln -s busybox "$B/rootfs/bin/$a"; done
echo top-secret > "$B/rootfs/etc/secret"
(cd "$B" && crun spec)
python3 - "$B/config.json" "$T" <<'PY'
import json, sys
p, t = sys.argv[1], sys.argv[2]
s = json.load(open(p))
s["process"]["terminal"] = False
s["process"]["args"] = ["sleep", "600"]
s["mounts"] += [{"destination": "/work", "type": "bind", "source": t + "/work", "options": ["rbind", "rw"]},
                {"destination": "/data", "type": "bind", "source": t + "/data", "options": ["rbind", "rw"]}]
json.dump(s, open(p, "w"), indent=1)
PY
cp "$B/config.json" "$T/config.orig"
cat > "$T/proc.json" <<'JSON'
{"terminal": false, "user": {"uid": 0, "gid": 0}, "cwd": "/", "env": ["PATH=/bin"],
 "args": ["sh", "-c", "echo detached > /work/detached"]}
JSON
hybrid=0
mountpoint -q /sys/fs/cgroup/unified 2>/dev/null && hybrid=1
plain_crun() {
    if [ $hybrid = 1 ]; then
        timeout 30 unshare -m --propagation private sh -c 'umount /sys/fs/cgroup/unified && exec crun "$@"' crun \
            --root "$T/crun-root" "$@"
    else timeout 30 crun --root "$T/crun-root" "$@"; fi
}
status_of() { "$1" state "$2" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null; }
is_stopped() { [ "$(status_of "$1" "$2")" = stopped ]; }
# console RT ID: create with a terminal, the pty master received on a console socket; prints
# what the container wrote on its terminal.
cat > "$T/console.py" <<'PY'
import array, os, socket, sys
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); srv.bind(path); srv.listen(1)
open(path + ".ready", "w").close()
srv.settimeout(20)
conn, _ = srv.accept()
msg, fds, _, _ = socket.recv_fds(conn, 1024, 1)
out = b""
while b"console-ok" not in out:
    try: d = os.read(fds[0], 4096)
    except OSError: break
    if not d: break
    out += d
print(out.decode(errors="replace"))
PY

# scenario RT NAME: the lifecycle engines drive, the same on both runtimes.
scenario() {
    local rt=$1 name=$2 id="c-$2-$$"
    cp "$T/config.orig" "$B/config.json"
    expect_status 0 "$rt" create --bundle "$B" --pid-file "$T/$name.pid" "$id"
    check "$name: pid-file holds a live pid" bash -c "[ -d /proc/\$(cat '$T/$name.pid') ]"
    check "$name: state says created" test "$(status_of "$rt" "$id")" = created
    run "$rt" state "$id"
    check "$name: state has the OCI fields" python3 -c "import json,sys; s=json.loads(sys.argv[1]); assert s['id']=='$id' and s['pid']==int(open('$T/$name.pid').read()) and s['bundle']" "$OUT"
    expect_status 0 "$rt" start "$id"
    check "$name: state says running" test "$(status_of "$rt" "$id")" = running
    expect_status 0 "$rt" exec "$id" true
    expect_status 3 "$rt" exec "$id" sh -c 'exit 3'
    expect_output_contains "uid=0" "$rt" exec "$id" id
    rm -f "$T/work/detached"
    expect_status 0 "$rt" exec --process "$T/proc.json" --detach --pid-file "$T/$name.exec.pid" "$id"
    check "$name: exec --detach wrote its pid-file" test -s "$T/$name.exec.pid"
    check "$name: the exec'd process ran" wait_for 10 test -s "$T/work/detached"
    run "$rt" ps --format json "$id"
    check "$name: ps --format json lists the init" python3 -c "import json,sys; assert int(open('$T/$name.pid').read()) in json.loads(sys.argv[1])" "$OUT"
    expect_status 0 "$rt" kill "$id" KILL
    check "$name: stopped after SIGKILL" wait_for 10 is_stopped "$rt" "$id"
    expect_fail "$rt" kill "$id" KILL
    KILL_ERR=$ERR
    expect_fail "$rt" exec "$id" true
    expect_status 0 "$rt" delete "$id"
    expect_fail "$rt" state "$id"
    STATE_ERR=$ERR
    expect_fail "$rt" delete "$id"
    # Console socket: a terminal for the container's process, its master sent to the engine.
    local sock=$T/$name.console
    python3 - "$T/config.orig" "$B/config.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); p = sys.argv[2]
s["process"]["terminal"] = True
s["process"]["args"] = ["sh", "-c", "tty >/dev/null && echo console-ok; sleep 2"]
json.dump(s, open(p, "w"))
PY
    python3 "$T/console.py" "$sock" > "$T/$name.console.out" 2>&1 &
    local cpid=$!
    wait_for 10 test -e "$sock.ready"
    expect_status 0 "$rt" create --bundle "$B" --console-socket "$sock" "$id-tty"
    expect_status 0 "$rt" start "$id-tty"
    wait "$cpid"
    check "$name: the console socket got the terminal, the process wrote on it" grep -q console-ok "$T/$name.console.out"
    "$rt" kill "$id-tty" KILL 2>/dev/null; wait_for 10 is_stopped "$rt" "$id-tty"
    expect_status 0 "$rt" delete --force "$id-tty"
    cp "$T/config.orig" "$B/config.json"
}

scenario plain_crun crun
scenario exg_rt exg
check "ours: kill of a stopped container says 'container not running'" grep -q "container not running" <<<"$KILL_ERR"
check "ours: state of a deleted container says 'does not exist'" grep -q "does not exist" <<<"$STATE_ERR"
expect_status 0 exg_rt delete --force nope
run exg_rt --log "$T/log.json" --log-format json state nope
check "errors are JSON lines in --log" python3 -c "
import json; l=json.loads(open('$T/log.json').readline()); assert l['level']=='error' and 'does not exist' in l['msg'] and l['time']"
expect_output_contains '"ociVersionMax"' exg_rt features
run exg_rt nonsense x
check "an unknown command: exit 1 and says so" bash -c "[ $STATUS = 1 ] && grep -q 'unknown command nonsense' <<<'$ERR'"

# The same probes in a container of each: what ExGuardian adds.
PROBE='touch /work/w && echo work-ok; touch /data/d || echo data-refused; echo x > /dev/shm/s || echo shm-refused
grep CapEff /proc/self/status; unshare -U true || echo userns-refused; cat /etc/secret; echo end'
probe() {
    local rt=$1 id="p-$2-$$"
    cp "$T/config.orig" "$B/config.json"
    rm -f "$T/work/w" "$T/data/d"
    "$rt" create --bundle "$B" "$id" && "$rt" start "$id" || return 1
    run "$rt" exec "$id" sh -c "$PROBE"
    "$rt" kill "$id" KILL; wait_for 10 is_stopped "$rt" "$id"; "$rt" delete --force "$id"
}
probe plain_crun crun
CRUN_OUT=$OUT$ERR
check "crun alone: /data and /dev/shm writable, capabilities, user namespaces, /etc/secret readable" \
    bash -c "! grep -q refused <<<\"\$1\" && grep -q top-secret <<<\"\$1\" && ! grep -q 'CapEff:.0000000000000000' <<<\"\$1\"" _ "$CRUN_OUT"
probe exg_rt exg
note "$(tr '\n' ' ' <<<"$OUT$ERR")"
has() { grep -q -- "$1" <<<"$2"; }
check "ours: /work (allowWrite) writable, the write landed" has work-ok "$OUT"
check "ours: ... and it landed on the host" test -e "$T/work/w"
check "ours: a write to /data (the engine's rw bind, not in allowWrite) refused: read-only" \
    bash -c "$(declare -f has); has data-refused \"\$1\" && has 'touch: /data/d: Read-only file system' \"\$2\"" _ "$OUT" "$ERR"
check "ours: ... nothing written on the host" test ! -e "$T/data/d"
check "ours: a write to /dev/shm (a tmpfs of the engine's, not in allowWrite) refused by Landlock" \
    bash -c "$(declare -f has); has shm-refused \"\$1\" && has '/dev/shm/s: Permission denied' \"\$2\"" _ "$OUT" "$ERR"
check "ours: no capabilities" has 'CapEff:.0000000000000000' "$OUT"
check "ours: a user namespace refused (ExGuardian's seccomp filter)" has userns-refused "$OUT"
check "ours: /etc/secret (denyRead) masked" bash -c "$(declare -f has); has end \"\$1\" && ! has top-secret \"\$1\$2\"" _ "$OUT" "$ERR"

# A pod's pause container: left as the engine wrote it.
python3 - "$T/config.orig" "$B/config.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["annotations"] = {"io.kubernetes.cri.container-type": "sandbox"}
json.dump(s, open(sys.argv[2], "w"))
PY
cp "$B/config.json" "$T/pause.json"
expect_status 0 exg_rt create --bundle "$B" "pause-$$"
check "pause container: config.json untouched" cmp -s "$B/config.json" "$T/pause.json"
exg_rt delete --force "pause-$$"

check "no egress holder left after the deletes" bash -c "! pgrep -f -- '[-]-root $RT_ROOT create' >/dev/null"

finish
