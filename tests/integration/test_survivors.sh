#!/usr/bin/env bash
# Nothing is left behind: after a normal exit, a timeout and `kill -9` of exguardian itself, no
# sandboxed process survives (also double-forked, setsid'd, signal-ignoring ones), and no mount,
# temporary directory or file of the sandbox remains on the host.
source "$(dirname "$0")/lib.sh"

new_workspace

require_sandbox || finish

mount_count() { wc -l < /proc/self/mountinfo; }
cgroup_dirs() { find /sys/fs/cgroup -mindepth 1 -maxdepth 4 -type d 2>/dev/null | grep -i exg | sort; }

tmp_before=$(host_tmp_listing)
mounts_before=$(mount_count)
cgroups_before=$(cgroup_dirs)

# A line that leaves processes behind in every way it can: background, double fork + setsid,
# ignoring SIGTERM/SIGHUP/SIGINT. Each carries MARKER in its argv so the host can find it.
spawner() {  # MARKER
    local m=$1
    printf '%s' "
        (exec -a $m-bg sleep 1000) </dev/null >/dev/null 2>&1 &
        setsid bash -c '(exec -a $m-setsid sleep 1000) & ' </dev/null >/dev/null 2>&1
        (trap '' TERM HUP INT; exec -a $m-ignoring sleep 1000) </dev/null >/dev/null 2>&1 &
        sleep 0.3
        echo spawned"
}

# (a function, not `bash -c`: a helper process would carry MARKER in its own argv)
_none_left() { ! pgrep -f -- "$1" >/dev/null; }
_some_left() { pgrep -f -- "$1" >/dev/null; }
# no_survivors MARKER DESC: polls up to 5 s for host processes with MARKER in argv.
no_survivors() {
    local m=$1 desc=$2 left
    if wait_for 5 _none_left "$m"; then
        ok "no survivors after $desc"
    else
        left=$(pgrep -af -- "$m")
        fail "processes survived $desc:"; printf '%s\n' "$left" | sed 's/^/#      /'
        for p in $(pgrep -f -- "$m"); do kill -9 "$p" 2>/dev/null; done
    fi
}

# 1. normal exit
m=exg-surv-$$-$RANDOM-exit
expect_output_contains spawned sh_in "$(spawner "$m")"
no_survivors "$m" "a normal exit"

# 2. timeout
m=exg-surv-$$-$RANDOM-timeout
expect_status 124 sbx --timeout 2s -- bash -c "$(spawner "$m"); sleep 100"
no_survivors "$m" "a timeout"

# 3. kill -9 of exguardian itself
m=exg-surv-$$-$RANDOM-kill9
: > "$T/kill9.out"
(cd "$WS" && exec "${EXG_RUN[@]}" -- bash -c "$(spawner "$m"); sleep 100") > "$T/kill9.out" 2>&1 &
exgpid=$!
track_bg "$exgpid"
if wait_for 10 grep -q spawned "$T/kill9.out"; then
    check "sandboxed processes are running before the kill (control)" _some_left "$m-ignoring"
    kill -9 "$exgpid"
    wait "$exgpid" 2>/dev/null
    no_survivors "$m" "kill -9 of exguardian"
else
    fail "kill -9 test: the command never started"; sed 's/^/#      /' "$T/kill9.out"
fi

# 4. a signal to exguardian (SIGTERM) while such processes run
m=exg-surv-$$-$RANDOM-term
: > "$T/term.out"
(cd "$WS" && exec "${EXG_RUN[@]}" -- bash -c "$(spawner "$m"); sleep 100") > "$T/term.out" 2>&1 &
exgpid=$!
track_bg "$exgpid"
if wait_for 10 grep -q spawned "$T/term.out"; then
    kill -TERM "$exgpid"
    wait "$exgpid" 2>/dev/null
    no_survivors "$m" "SIGTERM to exguardian"
else
    fail "SIGTERM test: the command never started"; sed 's/^/#      /' "$T/term.out"
fi

# Host state afterwards: give a supervisor that is still cleaning up a moment.
sleep 0.5
ours=$(host_tmp_left "$tmp_before")
check "no entries left in /tmp, /var/tmp, /dev/shm ${ours:+(left: $ours)}" test -z "$ours"
check "no mounts left on the host (mountinfo lines $mounts_before -> $(mount_count))" test "$(mount_count)" = "$mounts_before"
check "no mount of the workspace on the host" bash -c "! grep -qF -- '$WS' /proc/self/mountinfo"
# Only new directories count: one present before and gone after is a stale cgroup of an earlier
# run that this one's launch swept, or another sandbox that ended meanwhile.
new_cgroups=$(comm -13 <(echo "$cgroups_before") <(cgroup_dirs))
if [ -z "$new_cgroups" ]; then ok "no exguardian cgroups left"
else fail "cgroups left:"; printf '%s\n' "$new_cgroups" | sed 's/^/#      /'; fi

finish
