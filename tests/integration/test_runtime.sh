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
# delete. A profile annotation narrows; a broken handler file refuses. Podman and containerd's
# ctr drive it with an image made here. As the unprivileged user: errors and features, and
# create refusing to start a container it cannot protect.
. "$(dirname "$0")/lib.sh"

BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1 || ! command -v crun >/dev/null; then
    echo "skip: needs crun and a static busybox (make deps: crun, busybox-static)"; exit 77
fi
RT_ROOT=$T/rt
H=$T/handlers
mkdir -p "$H"
# The handler's policy: container paths; /work writable, the rest read-only; /etc/secret masked.
cat > "$H/default.json" <<JSON
{
  "network": {"allowedDomains": ["allowed.test", "denied.test", "meta.test"], "deniedDomains": ["denied.test"],
              "rules": [{"host": "allowed.test", "readOnly": true}]},
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
        bash -c "[ $STATUS != 0 ] && grep -q 'egress holder' <<<\"\$1\"" _ "$ERR"
    finish
fi

# The bundle: a busybox root (no image pulled), crun's default config.
B=$T/bundle
mkdir -p "$B/rootfs/bin" "$B/rootfs/etc" "$B/rootfs/work" "$B/rootfs/data" "$T/work" "$T/data"
cp "$BB" "$B/rootfs/bin/busybox"
for a in sh sleep touch cat echo id true wget tty unshare grep nc printf head; do ln -s busybox "$B/rootfs/bin/$a"; done
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
# no_cgroups_of NAME...: no directory NAME (a container's id, or the last part of its cgroupsPath:
# crun and runsc name its cgroup so) in any hierarchy under /sys/fs/cgroup. A deleted container
# leaves none (the product's promise: nothing left behind); what is left is noted. An empty NAME
# (an id not learnt) fails: it would find nothing and prove nothing.
no_cgroups_of() {
    local n left=""
    for n in "$@"; do [ -n "$n" ] || { note "no name to look for"; return 1; }; done
    for n in "$@"; do left+=$(find /sys/fs/cgroup/ -mindepth 1 -type d -name "$n" -printf '%p ' 2>/dev/null); done
    [ -z "$left" ] || { note "cgroups left: $left"; return 1; }
}
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
    check "$name: no cgroup of the container left after delete" no_cgroups_of "$id"
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
    check "$name: no cgroup of the terminal's container left after delete --force" no_cgroups_of "$id-tty"
    cp "$T/config.orig" "$B/config.json"
}

# ends RT NAME: the other two ends of a container: its process exits on its own, then delete;
# delete --force while it runs. Neither leaves a cgroup of it.
ends() {
    local rt=$1 name=$2 id="end-$2-$$"
    python3 - "$T/config.orig" "$B/config.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["process"]["args"] = ["true"]
json.dump(s, open(sys.argv[2], "w"))
PY
    expect_status 0 "$rt" create --bundle "$B" "$id-exited"
    expect_status 0 "$rt" start "$id-exited"
    check "$name: a process that exits on its own: the container stops" wait_for 20 is_stopped "$rt" "$id-exited"
    expect_status 0 "$rt" delete "$id-exited"
    check "$name: ... no cgroup of it left after delete" no_cgroups_of "$id-exited"
    cp "$T/config.orig" "$B/config.json"
    expect_status 0 "$rt" create --bundle "$B" "$id-running"
    expect_status 0 "$rt" start "$id-running"
    expect_status 0 "$rt" delete --force "$id-running"
    check "$name: delete --force of a running container: no cgroup of it left" no_cgroups_of "$id-running"
    expect_fail "$rt" state "$id-running"
}

scenario plain_crun crun
scenario exg_rt exg
ends exg_rt exg
check "ours: kill of a stopped container says 'container not running'" grep -q "container not running" <<<"$KILL_ERR"
check "ours: state of a deleted container says 'does not exist'" grep -q "does not exist" <<<"$STATE_ERR"
expect_status 0 exg_rt delete --force nope
run exg_rt --log "$T/log.json" --log-format json state nope
check "errors are JSON lines in --log" python3 -c "
import json; l=json.loads(open('$T/log.json').readline()); assert l['level']=='error' and 'does not exist' in l['msg'] and l['time']"
expect_output_contains '"ociVersionMax"' exg_rt features
run exg_rt nonsense x
check "an unknown command: exit 1 and says so" bash -c "[ $STATUS = 1 ] && grep -q 'unknown command nonsense' <<<'$ERR'"
for v in checkpoint restore; do
    run exg_rt "$v" --image-path "$T/ckpt" --work-path "$T/ckpt" x
    check "$v (runc's, CRIU): exit 1, 'not supported' and why (Landlock is not saved)" bash -c '
        [ "$1" = 1 ] && grep -q "$2: not supported: CRIU does not save a process.s Landlock domain" <<<"$3" && [ ! -e "$4" ]' \
        _ "$STATUS" "$v" "$ERR" "$T/ckpt"
done

# The egress holder keeps none of the engine's descriptors (here a file as fd 7): an engine
# waiting for the end of one would otherwise wait for the container's end.
cp "$T/config.orig" "$B/config.json"
exg_rt create --bundle "$B" "fds-$$" 7>"$T/fd7"
holder=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["holder"].split()[0])' \
    "$RT_ROOT/exguardian/fds-$$/state.json" 2>/dev/null)
check "the egress holder ($holder) runs and holds none of the runtime's descriptors" \
    bash -c "[ -n '$holder' ] && [ -d /proc/$holder ] && ! ls -l /proc/$holder/fd | grep -q '$T/fd7'"
exg_rt delete --force "fds-$$"

# The same probes in a container of each: what ExGuardian adds.
PROBE='mkdir -p /work/sub && echo planted > /work/sub/.envrc; echo "touch /tmp/pwned" >> /work/tools/fsmon.sh; touch /work/w && echo work-ok; touch /data/d || echo data-refused; echo x > /dev/shm/s || echo shm-refused
grep CapEff /proc/self/status; unshare -U true || echo userns-refused; cat /etc/secret; echo end'
probe() {
    local rt=$1 id="p-$2-$$"
    cp "$T/config.orig" "$B/config.json"
    rm -rf "$T/work/w" "$T/data/d" "$T/work/sub" "$T/work/tools" "$T/work/.git"
    # /work is a repository whose core.fsmonitor runs tools/fsmon.sh at the host's next `git status`.
    mkdir -p "$T/work/tools" && printf '#!/bin/sh\nexit 1\n' > "$T/work/tools/fsmon.sh"
    git init -q "$T/work" && git -C "$T/work" config core.fsmonitor tools/fsmon.sh
    "$rt" create --bundle "$B" "$id" && "$rt" start "$id" || return 1
    run "$rt" exec "$id" sh -c "$PROBE"
    "$rt" kill "$id" KILL; wait_for 10 is_stopped "$rt" "$id"; "$rt" delete --force "$id"
}
probe plain_crun crun
CRUN_OUT=$OUT$ERR
cp "$T/work/tools/fsmon.sh" "$T/fsmon.crun" 2>/dev/null
check "crun alone: the planted .envrc stays in /work" test -f "$T/work/sub/.envrc"
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
check "ours: the .envrc planted in /work was swept into the quarantine when the container ended" \
    wait_for 10 test -f "$T/quarantine/p-exg-$$/0/sub/.envrc"
check "ours: ... and is gone from the host's /work" test ! -e "$T/work/sub/.envrc"
check "ours: ... with an audit line" grep -q '"event":"planted".*"path":"sub/.envrc".*"sandbox":"p-exg-'"$$"'"' "$T/audit.jsonl"
check "crun alone: the script core.fsmonitor names was rewritten (the attack works there)" \
    grep -q pwned "$T/fsmon.crun"
check "ours: the script core.fsmonitor names, rewritten, was swept into the quarantine (what a protected config runs)" \
    grep -q pwned "$T/quarantine/p-exg-$$/0/tools/fsmon.sh"
check "ours: ... and the host's /work/tools/fsmon.sh does not hold it" bash -c "! grep -qs pwned '$T/work/tools/fsmon.sh'"
check "ours: ... with an audit line" grep -q '"event":"planted".*"path":"tools/fsmon.sh"' "$T/audit.jsonl"
check "ours: /etc/secret (denyRead) masked" bash -c "$(declare -f has); has end \"\$1\" && ! has top-secret \"\$1\$2\"" _ "$OUT" "$ERR"

# A profile named by the annotation narrows the handler's policy: /work is no longer writable.
echo '{"filesystem": {"allowWrite": ["/work/sub", "/etc"]}}' > "$H/strict.json"
python3 - "$T/config.orig" "$B/config.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["annotations"] = {"exguardian.dev/profile": "strict"}
json.dump(s, open(sys.argv[2], "w"))
PY
rm -f "$T/work/p"
exg_rt create --bundle "$B" "prof-$$" && exg_rt start "prof-$$"
run exg_rt exec "prof-$$" sh -c 'touch /work/p; touch /etc/p'
check "profile: /work (allowed by the handler, not by the profile) refused, /etc (not the handler's) too" \
    bash -c "grep -q 'touch: /work/p: Read-only file system' <<<\"\$1\" && grep -q 'touch: /etc/p: Read-only file system' <<<\"\$1\"" _ "$ERR"
check "profile: nothing landed on the host" test ! -e "$T/work/p"
exg_rt kill "prof-$$" KILL; exg_rt delete --force "prof-$$"
# update, as create: each limit the smaller of the one asked and the handler's, never above it
# (not refused: containerd re-sends a pod's original figures with every update), and an audit
# line saying what was held.
echo '{"filesystem": {"allowWrite": ["/tmp"]}, "resources": {"pids": 50, "memory": "64M"}, "audit": {"log": "'"$T"'/audit.jsonl"}}' > "$H/lim.json"
cp "$T/config.orig" "$B/config.json"
exg_rt --handler lim create --bundle "$B" "lim-$$"
pids_max_of() {  # ID: pids.max of the container's cgroup (v1 pids or v2)
    local pid line
    pid=$(exg_rt state "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
    line=$(grep -E '^[0-9]+:(pids)?:' "/proc/$pid/cgroup" | head -n 1)
    line=${line#*:}; case $line in pids:*) cat "/sys/fs/cgroup/pids/${line#pids:}/pids.max" ;; *) cat "/sys/fs/cgroup/${line#:}/pids.max" ;; esac
}
run exg_rt update --pids-limit 100 "lim-$$"
check "update --pids-limit 100 (above the handler's 50): done, held to 50, said on stderr" \
    bash -c '[ "$1" = 0 ] && [ "$2" = 50 ] && grep -q "held to the handler.s caps" <<<"$3"' _ "$STATUS" "$(pids_max_of "lim-$$")" "$ERR"
check "audit: the update held to the cap, the figure asked and the one applied" \
    audit_has "$T/audit.jsonl" "{\"sandbox\": \"lim-$$\", \"event\": \"resources_capped\", \"verb\": \"update\", \"handler\": \"lim\", \"changes\": [{\"field\": \"pids.limit\", \"asked\": 100, \"applied\": 50}]}"
echo '{"pids": {"limit": 1000}}' > "$T/res-up.json"
echo '{"pids": {"limit": 20}}' > "$T/res-down.json"
run exg_rt update --resources - "lim-$$" < "$T/res-down.json"
check "update --resources - lowering it to 20: applied as asked" bash -c '[ "$1" = 0 ] && [ "$2" = 20 ]' _ "$STATUS" "$(pids_max_of "lim-$$")"
run exg_rt update --resources - "lim-$$" < "$T/res-up.json"
check "update --resources - with pids.limit 1000: held to the handler's 50" bash -c '[ "$1" = 0 ] && [ "$2" = 50 ]' _ "$STATUS" "$(pids_max_of "lim-$$")"
run exg_rt update --resources - "lim-$$" <<<'{"pids": {"limit": -1}}'
check "update --resources - with pids.limit unlimited (-1): held to the handler's 50" bash -c '[ "$1" = 0 ] && [ "$2" = 50 ]' _ "$STATUS" "$(pids_max_of "lim-$$")"
# --memory-swap is memory and swap together: held to the handler's memory as well.
memsw_of() {  # ID: memory.memsw.limit_in_bytes of the container's cgroup (v1 with swap accounting), else ""
    local pid line
    pid=$(exg_rt state "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
    line=$(grep -E '^[0-9]+:memory:' "/proc/$pid/cgroup" | head -n 1)
    [ -n "$line" ] && cat "/sys/fs/cgroup/memory/${line#*:memory:}/memory.memsw.limit_in_bytes" 2>/dev/null
}
if [ -n "$(memsw_of "lim-$$")" ]; then
    run exg_rt update --memory-swap 1g "lim-$$"
    check "update --memory-swap 1g: held to the handler's 64M of memory and swap together" \
        bash -c '[ "$1" = 0 ] && [ "$2" = $((64 * 1024 * 1024)) ]' _ "$STATUS" "$(memsw_of "lim-$$")"
else
    note "no v1 swap accounting here: update --memory-swap not checked"
fi
exg_rt delete --force "lim-$$"

# A broken handler file: create refuses, names the file, leaves nothing.
echo '{"netwrk": {}}' > "$H/broken.json"
cp "$T/config.orig" "$B/config.json"
run exg_rt --handler broken create --bundle "$B" "broken-$$"
check "a broken handler: create fails and names the file and key" \
    bash -c "[ $STATUS = 1 ] && grep -q 'broken.json:1:2: unknown key \"netwrk\"' <<<\"\$1\"" _ "$ERR"
expect_fail exg_rt state "broken-$$"
check "a broken handler: config.json untouched" cmp -s "$B/config.json" "$T/config.orig"

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

# ----- Egress: a test world of network namespaces (egress_world.sh), built here. The runtime runs
# in its client namespace, where the world's servers are reachable; each container gets only its
# own proxy.
need_source_tree tests/integration/egress_world.sh ip nft
. "$SRC/tests/integration/egress_world.sh"
if ! world_up; then fail "the egress test world did not come up"; finish; fi
W_RT=$T/rt-world
world_rt() { EXGUARDIAN_HANDLERS_DIR=$H in_client timeout 30 "$EXG" runtime --root "$W_RT" "$@"; }
: > "$T/audit.jsonl"
cp "$T/config.orig" "$B/config.json"
EID=eg-$$
expect_status 0 world_rt create --bundle "$B" "$EID"
expect_status 0 world_rt start "$EID"
expect_output_contains "hello from 203.0.113.10" world_rt exec "$EID" wget -q -O - http://allowed.test/
# The handler's request rules are the container proxy's too (not only its domain lists).
# (A raw request: busybox wget sends --post-data as a GET here.)
run world_rt exec "$EID" sh -c 'printf "POST http://allowed.test/ HTTP/1.0\r\nHost: allowed.test\r\nContent-Length: 7\r\n\r\nplanted" | nc 127.0.0.1 3128 | head -1'
check "a POST to allowed.test refused by the handler's readOnly rule (403)" grep -q '^HTTP/1.[01] 403' <<<"$OUT"
run world_rt exec "$EID" wget -q -O - http://denied.test/
check "denied.test refused by the proxy (403)" bash -c "[ $STATUS != 0 ] && grep -q '403' <<<\"\$1\"" _ "$ERR"
run world_rt exec "$EID" wget -q -O - http://169.254.169.254/latest/meta-data/
check "169.254.169.254 refused by the proxy (403)" bash -c "[ $STATUS != 0 ] && grep -q '403' <<<\"\$1\"" _ "$ERR"
run world_rt exec "$EID" wget -q -O - http://meta.test/
check "meta.test (allowed by name, link-local address) refused after DNS (403)" \
    bash -c "[ $STATUS != 0 ] && grep -q '403' <<<\"\$1\"" _ "$ERR"
run world_rt exec "$EID" wget -Y off -q -O - http://203.0.113.10/
check "no way around the proxy: a direct connection finds no route" \
    bash -c "[ $STATUS != 0 ] && grep -q 'unreachable' <<<\"\$1\"" _ "$ERR"
check "the servers saw the allowed request only" bash -c \
    "grep -q '^203.0.113.10 GET / host=allowed.test' '$EGW_LOG' && ! grep -q -e '^169.254' -e 'host=denied' -e 'host=meta' -e ' POST ' '$EGW_LOG'"
audit_has() {  # ID HOST DECISION [HANDLER (default)]
    python3 - "$T/audit.jsonl" "$@" <<'PY'
import json, sys
path, cid, host, decision = sys.argv[1:5]
handler = sys.argv[5] if len(sys.argv) > 5 else "default"
for line in open(path):
    e = json.loads(line)
    if e.get("sandbox") == cid and e.get("host") == host and e.get("decision") == decision and e.get("handler") == handler:
        sys.exit(0)
sys.exit(1)
PY
}
check "audit: allowed.test allowed, tagged with the container id and handler" audit_has "$EID" allowed.test allowed
check "audit: denied.test denied" audit_has "$EID" denied.test refused
check "audit: the POST refused, naming the rule" grep -q '"rule":"network.rules\[0\] allowed.test"' "$T/audit.jsonl"
check "audit: 169.254.169.254 denied" audit_has "$EID" 169.254.169.254 refused
check "audit: meta.test denied" audit_has "$EID" meta.test refused
# A second container in the first one's network namespace (as containers of a pod share the
# pause container's): its own proxy on other ports, its own audit lines.
EPID=$(world_rt state "$EID" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
python3 - "$T/config.orig" "$B/config.json" "/proc/$EPID/ns/net" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for n in s["linux"]["namespaces"]:
    if n["type"] == "network": n["path"] = sys.argv[3]
json.dump(s, open(sys.argv[2], "w"))
PY
EID3=eg3-$$
expect_status 0 world_rt create --bundle "$B" "$EID3"
expect_status 0 world_rt start "$EID3"
run world_rt exec "$EID3" sh -c 'echo "$HTTP_PROXY"; wget -q -O - http://allowed.test/'
check "shared namespace: the second container's proxy is on another port, and works" \
    bash -c "! grep -q ':3128$' <<<\"\$1\" && grep -q 'http://127.0.0.1:[0-9]' <<<\"\$1\" && grep -q 'hello from 203.0.113.10' <<<\"\$1\"" _ "$OUT"
check "shared namespace: audit lines of the second container carry its id" audit_has "$EID3" allowed.test allowed
world_rt kill "$EID3" KILL
expect_status 0 world_rt delete --force "$EID3"
check "the container's egress holder is running" bash -c "pgrep -f -- \"\$1\" >/dev/null" _ "[-]-root $W_RT create --bundle $B $EID"
world_rt kill "$EID" KILL
expect_status 0 world_rt delete --force "$EID"
check "the egress holder went with the container" wait_for 5 bash -c "! pgrep -f -- '[-]-root $W_RT create --bundle $B $EID'"

# A gVisor handler ("layer": "gvisor"): the same walls and the same proxy, under runsc.
if command -v runsc >/dev/null; then
    sed 's/^{/{"layer": "gvisor",/' "$H/default.json" > "$H/gvisor.json"
    cp "$T/config.orig" "$B/config.json"
    GID=gv-$$
    expect_status 0 world_rt --handler gvisor create --bundle "$B" "$GID"
    expect_status 0 world_rt start "$GID"
    # (busybox wget fails reading replies under runsc's host network here; a raw request with nc
    # shows what the proxy answers.)
    REQ='printf "GET http://%s/ HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" "$0" | nc 127.0.0.1 3128 | head -1'
    run world_rt exec "$GID" sh -c "$REQ; touch /etc/g || echo etc-refused; grep CapEff /proc/self/status" allowed.test
    check "gVisor: allowed.test through the proxy, /etc read-only, no capabilities" bash -c \
        "grep -q '200 OK' <<<\"\$1\" && grep -q etc-refused <<<\"\$1\" && grep -q 'CapEff:.0000000000000000' <<<\"\$1\"" _ "$OUT"
    run world_rt exec "$GID" sh -c "$REQ" 169.254.169.254
    check "gVisor: 169.254.169.254 refused (403)" grep -q '403' <<<"$OUT"
    check "gVisor: audit lines tagged with the container id and handler" audit_has "$GID" 169.254.169.254 refused gvisor
    # `list` shows the containers of both wrapped runtimes (each keeps its own state).
    LID=ls-$$
    expect_status 0 world_rt create --bundle "$B" "$LID"
    run world_rt list --format json
    check "list --format json: the crun container (created) and the runsc one (running)" python3 -c '
import json, sys
by_id = {c["id"]: c["status"] for c in json.loads(sys.argv[1])}
assert by_id.get(sys.argv[2]) == "created" and by_id.get(sys.argv[3]) == "running", by_id' "$OUT" "$LID" "$GID"
    run world_rt list -q
    check "list -q: both ids" bash -c 'grep -qx "$1" <<<"$3" && grep -qx "$2" <<<"$3"' _ "$LID" "$GID" "$OUT"
    run world_rt list
    check "list: a table with both" bash -c 'head -1 <<<"$3" | grep -q "^ID " && grep -q "^$1 " <<<"$3" && grep -q "^$2 .* running " <<<"$3"' _ "$LID" "$GID" "$OUT"
    run world_rt list --format yaml
    check "list --format yaml: refused, naming the format" bash -c '[ "$1" != 0 ] && grep -q "yaml" <<<"$2"' _ "$STATUS" "$ERR"
    expect_status 0 world_rt delete --force "$LID"
    world_rt kill "$GID" KILL
    expect_status 0 world_rt delete --force "$GID"
    # runsc makes a cgroup named after the container (no cgroupsPath given) in every hierarchy.
    check "gVisor: no cgroup of the container left after delete --force" no_cgroups_of "$GID"
    gv_rt() { world_rt --handler gvisor "$@"; }
    ends gv_rt gVisor
else
    skip "runsc is not installed: the gVisor handler not tested"
fi

# An engine's own namespace with a route out (as podman's bridge or a pod's CNI network gives):
# it is joined as it is, and nftables leaves only lo (the proxy) open.
ENS=exgrt-$$
ip netns add "$ENS"
cleanup_netns() { ip netns del "$ENS" 2>/dev/null; }
trap 'cleanup_netns; _egw_exit' EXIT
ip link add "exgr$$a" type veth peer name "exgr$$b"
ip link set "exgr$$a" netns "$EGW_NS_C"; ip link set "exgr$$b" netns "$ENS"
ip -n "$EGW_NS_C" addr add 198.51.101.1/24 dev "exgr$$a"; ip -n "$EGW_NS_C" link set "exgr$$a" up
ip -n "$ENS" addr add 198.51.101.2/24 dev "exgr$$b"; ip -n "$ENS" link set "exgr$$b" up; ip -n "$ENS" link set lo up
ip -n "$ENS" route add default via 198.51.101.1
ip netns exec "$EGW_NS_C" sysctl -qw net.ipv4.ip_forward=1
ip -n "$EGW_NS_S" route add 198.51.101.0/24 via 198.51.100.2 dev "exgw$$s" 2>/dev/null ||
    ip -n "$EGW_NS_S" route add 198.51.101.0/24 dev "exgw$$s"
ip -n "$EGW_NS_S" route replace 198.51.101.0/24 via 198.51.100.1
expect_output_contains "hello from 203.0.113.10" ip netns exec "$ENS" "$BB" wget -q -O - http://203.0.113.10/
python3 - "$T/config.orig" "$B/config.json" "/run/netns/$ENS" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for n in s["linux"]["namespaces"]:
    if n["type"] == "network": n["path"] = sys.argv[3]
json.dump(s, open(sys.argv[2], "w"))
PY
EID2=eg2-$$
expect_status 0 world_rt create --bundle "$B" "$EID2"
expect_status 0 world_rt start "$EID2"
run world_rt exec "$EID2" wget -Y off -q -T 3 -O - http://203.0.113.10/
check "engine's namespace: a direct connection is dropped now" bash -c "[ $STATUS != 0 ] && ! grep -q hello <<<\"\$1\"" _ "$OUT"
expect_output_contains "hello from 203.0.113.10" world_rt exec "$EID2" wget -q -O - http://allowed.test/
run world_rt exec "$EID2" wget -q -O - http://169.254.169.254/
check "engine's namespace: 169.254.169.254 refused (403)" bash -c "[ $STATUS != 0 ] && grep -q '403' <<<\"\$1\"" _ "$ERR"
check "audit: tagged with the second container's id" audit_has "$EID2" 169.254.169.254 refused
world_rt kill "$EID2" KILL
expect_status 0 world_rt delete --force "$EID2"
cleanup_netns

# ----- podman --runtime: an image made here (podman import of the busybox root; nothing
# pulled), run, exec and stop through exguardian runtime, the policy enforced inside. Podman
# passes no environment of its own to the runtime: a wrapper names the handlers' directory.
if command -v podman >/dev/null; then
    PM=(podman --root "$T/pm/storage" --runroot "$T/pm/run" --tmpdir "$T/pm/tmp" --cgroup-manager cgroupfs
        --events-backend file --runtime "$T/exg-runtime")
    printf '#!/bin/sh\nexec env EXGUARDIAN_HANDLERS_DIR=%s %s runtime --root %s "$@"\n' "$H" "$EXG" "$T/rt-podman" \
        > "$T/exg-runtime"
    chmod 755 "$T/exg-runtime"
    PM_RUN=(run --network none --ulimit nofile=1024:1024 --ulimit nproc=4096:4096)
    tar -C "$B/rootfs" -cf "$T/rootfs.tar" . && expect_status 0 "${PM[@]}" import "$T/rootfs.tar" localhost/exg-bb
    expect_status 0 "${PM[@]}" "${PM_RUN[@]}" -d --name "pm-$$" -v "$T/work:/work" -v "$T/data:/data" localhost/exg-bb sleep 600
    rm -f "$T/work/pm" "$T/data/pm"
    run "${PM[@]}" exec "pm-$$" sh -c "touch /work/pm && echo work-ok; touch /data/pm; touch /etc/pm; $PROBE"
    check "podman exec: /work writable, the write landed" bash -c "grep -q work-ok <<<\"\$1\" && [ -e '$T/work/pm' ]" _ "$OUT"
    check "podman exec: /data (a volume outside allowWrite) and /etc refused" bash -c \
        "grep -q 'touch: /data/pm: Read-only file system' <<<\"\$1\" && grep -q 'touch: /etc/pm: Read-only file system' <<<\"\$1\" && [ ! -e '$T/data/pm' ]" _ "$ERR"
    check "podman exec: no capabilities, user namespaces refused, /etc/secret masked" bash -c \
        "grep -q 'CapEff:.0000000000000000' <<<\"\$1\" && grep -q userns-refused <<<\"\$1\" && ! grep -q top-secret <<<\"\$1\"" _ "$OUT"
    expect_status 0 "${PM[@]}" stop -t 1 "pm-$$"
    run "${PM[@]}" inspect -f '{{.State.Status}}' "pm-$$"
    check "podman stop: the container is stopped" grep -q exited <<<"$OUT"
    PM_FULL=$("${PM[@]}" inspect -f '{{.Id}}' "pm-$$" 2>/dev/null)
    expect_status 0 "${PM[@]}" rm "pm-$$"
    # (podman's cgroupfs cgroupsPath: libpod_parent/libpod-<full id>)
    check "podman rm: no cgroup of the container left" no_cgroups_of "${PM_FULL:+libpod-$PM_FULL}"
    # Egress through the container's proxy, podman run inside the world's client namespace.
    : > "$T/audit.jsonl"
    run in_client "${PM[@]}" "${PM_RUN[@]}" --rm --cidfile "$T/pm.cid" localhost/exg-bb sh -c '
        wget -q -O - http://allowed.test/; wget -q -O - http://denied.test/ || echo denied-refused
        wget -q -O - http://169.254.169.254/ || echo metadata-refused'
    check "podman run: allowed.test reached through the proxy" grep -q "hello from 203.0.113.10" <<<"$OUT"
    check "podman run: denied.test and 169.254.169.254 refused" bash -c \
        "grep -q denied-refused <<<\"\$1\" && grep -q metadata-refused <<<\"\$1\"" _ "$OUT"
    PM_ID=$(cat "$T/pm.cid" 2>/dev/null)
    check "podman run --rm: no cgroup of the container left" no_cgroups_of "${PM_ID:+libpod-$PM_ID}"
    check "podman run: audit lines tagged with podman's container id" bash -c "$(declare -f audit_has);
        audit_has '$PM_ID' allowed.test allowed && audit_has '$PM_ID' denied.test refused && audit_has '$PM_ID' 169.254.169.254 refused"
    "${PM[@]}" save --format oci-archive -o "$T/img.tar" localhost/exg-bb >/dev/null 2>&1
    "${PM[@]}" rmi -f localhost/exg-bb >/dev/null 2>&1
else
    skip "podman is not installed: podman --runtime not tested"
fi

# ----- containerd (Debian's) with `ctr run --runc-binary`: the runc v2 shim, the path Kubernetes
# takes through a RuntimeClass. Its own containerd on a socket of the test's, inside the egress
# world's client namespace; the image is the podman one, saved as an OCI archive.
if command -v containerd >/dev/null && command -v ctr >/dev/null && [ -s "$T/img.tar" ]; then
    mkdir -p "$T/ctd"
    cat > "$T/ctd/config.toml" <<TOML
version = 2
root = "$T/ctd/root"
state = "$T/ctd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$T/ctd/containerd.sock"
TOML
    in_client_bg containerd --config "$T/ctd/config.toml" </dev/null >"$T/ctd/log" 2>&1
    CTD_PID=$EGW_BG_PID
    CTR=(in_client timeout 60 ctr -a "$T/ctd/containerd.sock" -n "rt-it-$$")
    ctr_stopped() { ! "${CTR[@]}" task ls 2>/dev/null | grep -q "^$CID .*RUNNING"; }
    if wait_for 20 test -S "$T/ctd/containerd.sock" && "${CTR[@]}" images import "$T/img.tar" >/dev/null; then
        : > "$T/audit.jsonl"
        CID=ctr-$$
        expect_status 0 "${CTR[@]}" run -d --runc-binary "$T/exg-runtime" localhost/exg-bb:latest "$CID" sleep 600
        run "${CTR[@]}" task exec --exec-id probe "$CID" sh -c "$PROBE
            wget -q -O - http://allowed.test/; wget -q -O - http://denied.test/ || echo denied-refused
            wget -q -O - http://169.254.169.254/ || echo metadata-refused"
        check "ctr: no capabilities, user namespaces refused, /etc/secret masked" bash -c \
            "grep -q 'CapEff:.0000000000000000' <<<\"\$1\" && grep -q userns-refused <<<\"\$1\" && ! grep -q top-secret <<<\"\$1\"" _ "$OUT"
        check "ctr: /work (no mount here: the policy's tmpfs) writable, /dev/shm refused" bash -c \
            "grep -q work-ok <<<\"\$1\" && grep -q shm-refused <<<\"\$1\"" _ "$OUT"
        check "ctr: allowed.test reached, denied.test and 169.254.169.254 refused" bash -c \
            "grep -q 'hello from 203.0.113.10' <<<\"\$1\" && grep -q denied-refused <<<\"\$1\" && grep -q metadata-refused <<<\"\$1\"" _ "$OUT"
        check "ctr: audit lines tagged with the container id" bash -c "$(declare -f audit_has);
            audit_has '$CID' allowed.test allowed && audit_has '$CID' 169.254.169.254 refused"
        expect_status 0 "${CTR[@]}" task kill -s SIGKILL "$CID"
        check "ctr: the task stopped" wait_for 10 ctr_stopped
        expect_status 0 "${CTR[@]}" task rm -f "$CID"
        expect_status 0 "${CTR[@]}" container rm "$CID"
        check "ctr: no cgroup of the container left" no_cgroups_of "$CID"
        check "ctr: the egress holder went with the task" wait_for 5 bash -c "! pgrep -f -- '[-]-root .* create .*$CID' >/dev/null"
    else
        fail "containerd did not come up or the image did not import"; note "$(tail -5 "$T/ctd/log")"
    fi
    kill "$CTD_PID" 2>/dev/null
    rm -rf "/run/containerd/runc/rt-it-$$"  # the runc shim's --root for the test's namespace
    # containerd made a cgroup for the namespace in every hierarchy: empty once the shim is gone.
    gone_cgroups() {
        local d left=0
        for d in /sys/fs/cgroup/*/rt-it-$$ /sys/fs/cgroup/rt-it-$$; do
            [ -d "$d" ] || continue
            find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
            [ -d "$d" ] && left=1
        done
        return $left
    }
    wait_for 10 gone_cgroups || note "ctr: the namespace's cgroups rt-it-$$ could not all be removed"
else
    skip "containerd and ctr are not installed (Debian: containerd): ctr run --runc-binary not tested"
fi

check "no egress holder left after the deletes" bash -c "! pgrep -f -- '[-]-root $RT_ROOT create' >/dev/null"
# Every container of this script is named "...-$$" (containerd's namespace cgroup rt-it-$$ is not one).
no_cgroup_of_ours() {
    local left
    left=$(find /sys/fs/cgroup/ -mindepth 1 -type d \( -name "*-$$" -o -name "*-$$-*" \) \
        ! -path "*/rt-it-$$" ! -path "*/rt-it-$$/*" -printf '%p ' 2>/dev/null)
    [ -z "$left" ] || { note "cgroups left: $left"; return 1; }
}
check "no cgroup left of any container of this script" no_cgroup_of_ours

finish
