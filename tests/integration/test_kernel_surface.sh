#!/usr/bin/env bash
# The kernel surface: no capabilities, no_new_privs, seccomp in filter mode; every refused
# syscall of the kernel-surface issue tried for real from inside (exguardian probe) and
# refused, each refusal in the audit log; ordinary work unaffected.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

PROBE=/run/exguardian/exguardian

run sh_in 'grep -E "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status'
for want in "CapEff:	0000000000000000" "CapPrm:	0000000000000000" "CapBnd:	0000000000000000" \
            "CapAmb:	0000000000000000" "NoNewPrivs:	1" "Seccomp:	2"; do
    check "/proc/self/status inside has '$want'" grep -qxF "$want" <<<"$OUT"
done

# Every probe, each as its own process inside one sandbox; the audit log must hold the refusals.
audit="$T/audit.jsonl"
names=$("$EXG" probe --list | awk '{print $1}')
check "there are probes to run" test "$(wc -l <<<"$names")" -gt 80
run sbx --audit-log "$audit" -- bash -c "for p in $(tr '\n' ' ' <<<"$names"); do $PROBE probe \$p; done"
for p in $names; do
    line=$(grep -m1 "^$p: " <<<"$OUT")
    case "$line" in
        "$p: as expected:"*) ok "$line" ;;
        *) fail "probe $p: ${line:-no output}" ;;
    esac
done

# The audit log: one JSON line per refusal, with name, pid and command.
check "audit log written" test -s "$audit"
for sc in ptrace bpf perf_event_open keyctl io_uring_setup mount unshare setns init_module kexec_load \
          pivot_root chroot open_by_handle_at personality ioctl socket reboot; do
    check "audit log has a refused $sc" grep -q "\"event\":\"syscall_refused\".*\"syscall\":\"$sc\"" "$audit"
done
check "audit lines carry pid and command" python3 -c "
import json, sys
lines = [json.loads(l) for l in open('$audit')]
assert lines and all(l['pid'] > 0 and l['command'] and l['sandbox'] and l['time'] for l in lines), lines[:2]"

# Nested user namespaces through the usual tool; a root shell inside must not appear.
expect_refused 'unshare: unshare failed: Operation not permitted' '' -- unshare -U -r true
run sbx -v -- bash -c 'echo ran; unshare -U -r id -u 2>/dev/null; exit 0'
check "-v reports the refusals at exit" grep -q "refused syscall.*unshare" <<<"$ERR"
# `id -u` prints a bare number: a root shell inside would print the line "0".
if [ "$STATUS" -eq 0 ] && grep -qx ran <<<"$OUT" && ! grep -qx 0 <<<"$OUT"; then ok "no root inside a nested namespace"
else fail "a nested namespace gave uid 0 (or the sandbox did not run)"; show_last; fi

# Ordinary work keeps working under the filter.
expect_output_contains make-ok sh_in 'printf "all:\n\t@echo make-ok\n" > Makefile && make'
expect_output_contains thread-ok sbx -- python3 -c 'import threading; t=threading.Thread(target=print, args=("thread-ok",)); t.start(); t.join()'
expect_output_contains sub-ok sbx -- python3 -c 'import subprocess; print(subprocess.run(["echo","sub-ok"],capture_output=True,text=True).stdout.strip())'
if command -v node >/dev/null; then
    expect_output_contains node-ok sbx -- node -e 'require("child_process").execSync("true"); console.log("node-ok")'
else
    skip "node not installed"
fi
expect_output_contains git-ok sh_in 'git log --oneline >/dev/null && git status --short >/dev/null && echo git-ok'

finish
