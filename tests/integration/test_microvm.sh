#!/usr/bin/env bash
# The microVM layer (`exguardian run --layer microvm`): the command on its own guest kernel
# (Debian's, built into EXG_BUILD_DIR/microvm by `make`) under qemu's microvm machine, qemu
# jailed by the process layer, the Plan's view over 9p.
#
# TCG (software emulation) here: each guest boot is 3-5 s on an idle 2-core host, up to ~10 s
# on a loaded one; the script boots 14 guests: about 50-110 s per run (root, then exgtest).
# Skipped (77) when qemu-system-x86_64 or the guest image is missing.
here=$(cd "$(dirname "$0")" && pwd)
EXG_LAYER=microvm  # (for the summary line; this script calls --layer microvm itself)
. "$here/lib.sh"

image=${EXG_BUILD_DIR:-}/microvm
if ! command -v qemu-system-x86_64 >/dev/null; then
    echo "skip: the microvm layer needs qemu-system-x86_64 (make deps installs qemu-system-x86)"; exit 77
fi
if [ ! -s "$image/vmlinux" ] || [ ! -s "$image/initramfs.cpio" ]; then
    echo "skip: no guest image in $image (built by \`make\`: CMake target microvm-guest)"; exit 77
fi
# run.sh copies exguardian elsewhere: point it at the build tree's guest image.
export EXG_MICROVM_IMAGE_DIR=$image
MVM=("$EXG" run --layer microvm)
mvm() { (cd "$WS" && exec timeout -k 5 120 "${MVM[@]}" "$@"); }

new_workspace || finish
plant_canaries

# 1. Exit status, stdout and stderr are the command's; the guest is another kernel.
run mvm -- sh -c 'echo out-line; echo err-line >&2; exit 7'
if [ "$STATUS" -eq 7 ] && grep -qx out-line <<<"$OUT" && grep -qx err-line <<<"$ERR"; then
    ok "exit status 7, stdout and stderr reach the host"
else fail "status/stdout/stderr of the guest command"; show_last; fi

want_kernel=$(cat "$image/kernel-version")
run mvm -- sh -c 'uname -r; hostname; id -u; cat /proc/1/cmdline | tr "\0" " "'
kernel=$(sed -n 1p <<<"$OUT") host=$(sed -n 2p <<<"$OUT") uid=$(sed -n 3p <<<"$OUT") init=$(sed -n 4p <<<"$OUT")
if [ "$STATUS" -eq 0 ] && [ "$kernel" = "$want_kernel" ] && [ "$kernel" != "$(uname -r)" ] && [ "$host" = exguardian ] \
   && [ "$uid" != 0 ] && [ "$init" = "/init " ]; then
    ok "own guest kernel ($kernel, host $(uname -r)), hostname exguardian, uid $uid, pid 1 is our /init"
    SANDBOX_OK=1
else fail "guest identity (kernel '$kernel' want '$want_kernel', host '$host', uid '$uid', init '$init')"; show_last; fi

# 1b. The snapshot fast path, in a template directory of this test's own: the first run boots
# cold and saves the template (after reading a marker file of its workspace: the template holds
# nothing of it), the next two are restored from it and each gets its own boot id, RNG and clock
# (pushed in at restore); the template file is read-only to the sandbox and unchanged by it.
snap=$T/snapshots
mkdir -p "$snap" && chmod 755 "$snap"
snap_marker="exg-snapshot-marker-$$-$RANDOM"
echo "$snap_marker" > "$WS/snap-marker.txt"
snaprun() { (cd "$WS" && EXG_MICROVM_SNAPSHOT_DIR=$snap exec timeout -k 5 120 "${MVM[@]}" "$@"); }
probe='cat snap-marker.txt >/dev/null; cat /proc/sys/kernel/random/boot_id; head -c 16 /dev/urandom | od -An -tx1 | tr -d " "; date +%s'
run snaprun -v -- sh -c "$probe"
cold_out=$OUT cold_err=$ERR cold_status=$STATUS
state=$(ls "$snap"/*.state 2>/dev/null | head -1)
if [ "$cold_status" -eq 0 ] && grep -q 'microvm: cold boot, template saved to' <<<"$cold_err" && [ -n "$state" ]; then
    ok "first run boots cold and saves the template ($(du -m "$state" | cut -f1) MB)"
else fail "template save on the first run"; STATUS=$cold_status OUT=$cold_out ERR=$cold_err show_last; fi
if [ -n "$state" ] && ! grep -qaF "$snap_marker" "$state" && [ "$(stat -c %a "$state")" = 644 ] \
   && [ "$(stat -c %u "$state")" = "$(id -u)" ]; then
    ok "template: mode 644, owned by the runner, holds nothing the sandbox read"
else fail "template file ($state): mode/owner or the sandbox's marker inside"; fi
sum_before=$(sha256sum "$state" 2>/dev/null | cut -d' ' -f1)
run snaprun -v -- sh -c "$probe"
r1_out=$OUT r1_err=$ERR r1_status=$STATUS
# (--scratch-disk 0: the same template as the unprivileged runs; a guest with a scratch disk has
# a template of its own, and its /var/lib is its own copy-on-write: test_egress_sandbox_microvm_privileged.sh)
run snaprun -v --microvm-root --scratch-disk 0 -- sh -c "$probe; id -u; echo x >> $state 2>&1 && echo WROTE-TEMPLATE; true"
r2_out=$OUT r2_err=$ERR r2_status=$STATUS
host_boot=$(cat /proc/sys/kernel/random/boot_id) now=$(date +%s)
b0=$(sed -n 1p <<<"$cold_out") b1=$(sed -n 1p <<<"$r1_out") b2=$(sed -n 1p <<<"$r2_out")
u0=$(sed -n 2p <<<"$cold_out") u1=$(sed -n 2p <<<"$r1_out") u2=$(sed -n 2p <<<"$r2_out")
t1=$(sed -n 3p <<<"$r1_out") t2=$(sed -n 3p <<<"$r2_out")
if [ "$r1_status" -eq 0 ] && [ "$r2_status" -eq 0 ] && grep -q 'microvm: restored from the template' <<<"$r1_err" \
   && grep -q 'microvm: restored from the template' <<<"$r2_err"; then
    ok "next runs are restored from the template"
    if [ -n "$b1" ] && [ "$b1" != "$b2" ] && [ "$b1" != "$b0" ] && [ "$b1" != "$host_boot" ] && [ "$b2" != "$host_boot" ] \
       && [ ${#u1} -eq 32 ] && [ "$u1" != "$u2" ] && [ "$u1" != "$u0" ]; then
        ok "each restored guest has its own boot id and RNG output (reseeded at restore)"
    else fail "restored guests share boot id or RNG ($b0 $b1 $b2 / $u0 $u1 $u2)"; fi
    # The guest's clock is the host's (set at restore), not the template's.
    if [ $((now - t1)) -ge 0 ] && [ $((now - t1)) -lt 300 ] && [ $((now - t2)) -lt 300 ]; then
        ok "restored guests' clock is the host's (set at restore)"
    else fail "restored guest clock ($t1 $t2, host $now)"; fi
    if [ "$(sed -n 4p <<<"$r2_out")" = 0 ] && ! grep -qx WROTE-TEMPLATE <<<"$r2_out" \
       && [ "$(sha256sum "$state" | cut -d' ' -f1)" = "$sum_before" ]; then
        ok "root in a restored guest cannot write the template; it is unchanged"
    else fail "template written from a guest"; STATUS=$r2_status OUT=$r2_out ERR=$r2_err show_last; fi
else fail "restore from the template"; grep "microvm" <<<"$r1_err$r2_err" | sed "s/^/#      /"; STATUS=$r1_status OUT=$r1_out ERR=$r1_err show_last; STATUS=$r2_status OUT=$r2_out ERR=$r2_err show_last; fi
# The same template serves a sandbox with egress (the egress port is in every configuration's
# device set; the boot frame, sent after the restore, says to serve it) and its own env and cwd.
run snaprun -v --allow-domain example.com --env EXG_SNAP_ENV=per-sandbox -- bash -c \
    '(exec 3<>/dev/tcp/127.0.0.1/3128) 2>&1 && echo PROXY-OPEN; echo "env=$EXG_SNAP_ENV"'
if [ "$STATUS" -eq 0 ] && grep -q 'microvm: restored from the template' <<<"$ERR" && grep -qx PROXY-OPEN <<<"$OUT" \
   && grep -qx 'env=per-sandbox' <<<"$OUT"; then
    ok "a restored guest serves egress and gets its own env (boot frame after the restore)"
else fail "restore with egress and env"; show_last; fi
rm -f "$WS/snap-marker.txt"

# 1c. The walls the guest's init puts around the command (restored guests, as every later run):
# the process layer's seccomp rules in place (errno-only: the guest's filter answers itself),
# Landlock (a world-writable directory of a read-only part of the view: the guest's Landlock says
# EACCES before the host's read-only mount could say EROFS), and -v says what was applied.
ll_dir=$O/exg-landlock-probe
mkdir -p "$ll_dir" && chmod 777 "$ll_dir"
run snaprun -v -- sh -c 'grep -E "^(Seccomp|NoNewPrivs):" /proc/self/status;
  /run/exguardian/exguardian probe unshare-newuser; /run/exguardian/exguardian probe keyctl;
  touch '"$ll_dir"'/from-guest 2>&1 && echo WROTE-RO-DIR; true'
if [ "$STATUS" -eq 0 ] && grep -qP '^Seccomp:\t2$' <<<"$OUT" && grep -qP '^NoNewPrivs:\t1$' <<<"$OUT" \
   && grep -qx 'unshare-newuser: as expected: refused: EPERM' <<<"$OUT" && grep -qx 'keyctl: as expected: refused: EPERM' <<<"$OUT" \
   && grep -q "microvm: in the guest: seccomp: ExGuardian's filter, errno-only" <<<"$ERR"; then
    ok "guest: the seccomp filter is in place (Seccomp 2); unshare(CLONE_NEWUSER) and keyctl refused, EPERM"
else fail "the seccomp filter in the guest"; show_last; fi
if grep -q 'microvm: in the guest: landlock: ABI [0-9]' <<<"$ERR"; then
    if grep -q 'Permission denied' <<<"$OUT" && ! grep -qx WROTE-RO-DIR <<<"$OUT" && [ ! -e "$ll_dir/from-guest" ]; then
        ok "guest: Landlock applied ($(grep -o 'landlock: ABI [0-9]*' <<<"$ERR" | head -1)): a write outside the writable trees is EACCES"
    else fail "guest: Landlock reported but the write was not refused by it"; show_last; fi
elif grep -q 'microvm: in the guest: landlock: not in this kernel: not applied' <<<"$ERR"; then
    ok "guest: no Landlock in this guest kernel, and -v says so"
else fail "guest: what about Landlock"; show_last; fi
rm -rf "$ll_dir"

# 1d. Writable trees other than the workspace, and a readable path inside a denied one, through
# the 9p view: the HOME layer and an --allow-write directory outside /tmp take writes (the guest's
# Landlock rules hold their inodes only while pid 1 pins the dentries: before, every write there
# was EACCES), the rest of $O still refuses them, and --allow-read inside --deny-read reads
# (qemu's 9p server has to open the mask to walk it) while the denied file stays gone.
aw_dir=$O/exg-allow-write
mkdir -p "$aw_dir" "$O/vault/public"
echo vault-public > "$O/vault/public/readme.txt"
echo vault-secret > "$O/vault/secret.txt"
run snaprun --allow-write "$aw_dir" --deny-read "$O/vault" --allow-read "$O/vault/public" -- sh -c '
  echo h > "$HOME/exg-home-file" && echo HOME-WROTE; echo a > '"$aw_dir"'/from-guest && echo AW-WROTE
  touch '"$O"'/not-allowed 2>&1 && echo WROTE-O; cat '"$O"'/vault/public/readme.txt; cat '"$O"'/vault/secret.txt 2>&1; true'
if [ "$STATUS" -eq 0 ] && grep -qx HOME-WROTE <<<"$OUT" && grep -qx AW-WROTE <<<"$OUT" && [ "$(cat "$aw_dir/from-guest" 2>/dev/null)" = a ]; then
    ok "guest: HOME's layer and an --allow-write directory outside /tmp take writes; the file is on the host"
else fail "guest: writes to HOME or to --allow-write $aw_dir"; show_last; fi
if ! grep -qx WROTE-O <<<"$OUT" && [ ! -e "$O/not-allowed" ] && grep -q 'not-allowed.*Permission denied' <<<"$OUT"; then
    ok "guest: beside them, a write elsewhere is still refused (EACCES)"
else fail "guest: a write outside the writable trees was not refused"; show_last; fi
if grep -qx vault-public <<<"$OUT" && ! grep -q vault-secret <<<"$OUT" && grep -q 'secret.txt: No such file' <<<"$OUT"; then
    ok "guest: --allow-read inside --deny-read reads; the denied file is not there"
else fail "guest: --allow-read inside --deny-read"; show_last; fi
rm -rf "$aw_dir" "$O/vault"

# A fork bomb is contained by the guest's pids limit (its own cgroup) and reported from the guest.
run snaprun --pids 64 --timeout 5s -- bash -c 'bomb() { bomb | bomb & }; bomb; sleep 100'
if [ "$STATUS" -eq 124 ] && grep -q 'exguardian: pids limit 64 reached in the guest: [0-9]* forks refused' <<<"$ERR" \
   && grep -q 'killed: timeout 5s' <<<"$ERR"; then
    ok "guest: a fork bomb under --pids 64 is contained and reported ($(grep -o '[0-9]* forks refused' <<<"$ERR"))"
else fail "fork bomb in the guest"; show_last; fi
# A template that does not restore (here cut in half) is dropped and the run boots cold, saving
# a new one (root only: one cold boot more).
if [ "$EXG_AS" = root ] && [ -n "$state" ]; then
    full=$(stat -c %s "$state")
    truncate -s $((full / 2)) "$state"
    run snaprun -v -- sh -c 'echo after-bad-template'
    if [ "$STATUS" -eq 0 ] && grep -qx after-bad-template <<<"$OUT" && grep -q 'booting cold' <<<"$ERR" \
       && grep -q 'template saved to' <<<"$ERR" && [ "$(stat -c %s "$state")" -gt $((full / 2)) ]; then
        ok "a template that does not restore is dropped: the run boots cold and saves a new one"
    else fail "damaged template"; show_last; fi
fi

# stdin (a pipe) reaches the command; its EOF too.
run bash -c "cd '$WS' && printf 'abc\ndef\n' | timeout -k 5 120 $(printf '%q ' "${MVM[@]}") -- tr a-z A-Z"
if [ "$STATUS" -eq 0 ] && [ "$OUT" = $'ABC\nDEF' ]; then ok "stdin piped into the guest command, EOF delivered"
else fail "stdin relay"; show_last; fi

[ "$SANDBOX_OK" = 1 ] || finish

# 2. Files: the workspace is writable and the write is on the host; the rest is not; masks hold.
rm -f "$WS/from-guest" "$O/outside"
run mvm -- sh -c 'echo guest-data > from-guest;
  echo x > '"$O"'/outside 2>&1 && echo WROTE-OUTSIDE;
  echo x > /etc/exg-microvm-probe 2>&1 && echo WROTE-ETC;
  echo x > /exg-root-probe 2>&1 && echo WROTE-ROOT;
  cat ~/.ssh/id_ed25519 ~/.aws/credentials 2>&1; cat ~/notes.txt'
if [ "$STATUS" -eq 0 ] && [ "$(cat "$WS/from-guest" 2>/dev/null)" = guest-data ]; then
    ok "workspace write from the guest is on the host"
else fail "workspace write from the guest"; show_last; fi
if ! grep -Eqx 'WROTE-(OUTSIDE|ETC|ROOT)' <<<"$OUT" && [ ! -e "$O/outside" ] && [ ! -e /etc/exg-microvm-probe ] \
   && grep -Eq 'Permission denied|Read-only file system' <<<"$OUT"; then
    ok "writes outside the workspace refused (host dir, /etc, /), nothing created on the host"
else fail "write outside the workspace"; show_last; fi
if ! grep -qF "$CANARY" <<<"$OUT$ERR" && grep -q EXGHOMEOK <<<"$OUT"; then
    ok "credential files masked in the guest's view (control file readable)"
else fail "credential masks in the guest"; show_last; fi

# E2B's sandbox as serve makes it (--workspace-at /home/user --user-name user): the workspace is the
# guest's /home/user (HOME, cwd, the passwd line), the user's name `user`, a write there on the host.
rm -f "$WS/at-home"
run mvm --workspace-at /home/user --user-name user -- sh -c 'pwd; echo "$HOME"; whoami; echo "$USER";
  grep "^user:" /etc/passwd | cut -d: -f6; ls /home; echo at-home > /home/user/at-home && echo WROTE'
if [ "$STATUS" -eq 0 ] && [ "$OUT" = $'/home/user\n/home/user\nuser\nuser\n/home/user\nuser\nWROTE' ] &&
   [ "$(cat "$WS/at-home" 2>/dev/null)" = at-home ]; then
    ok "--workspace-at /home/user --user-name user: pwd, HOME and the passwd line /home/user, whoami and USER user, /home holds only it, the write on the host"
else fail "--workspace-at /home/user in the guest"; show_last; fi
rm -f "$WS/at-home"

# 3. Root inside the guest (--microvm-root): still no host files, processes or network. Without
# the scratch disk here: with it /var/lib (where $O is) is the guest's own overlay, checked with
# the disk in test_egress_sandbox_microvm_privileged.sh.
marker="exg-host-marker-$$-$RANDOM"
bash -c "exec -a $marker sleep 120" &
marker_pid=$!
run mvm --microvm-root --scratch-disk 0 -- sh -c 'id -u;
  echo x > '"$O"'/outside-root 2>&1 && echo WROTE-OUTSIDE;
  echo x > /etc/exg-microvm-probe 2>&1 && echo WROTE-ETC;
  cat /etc/shadow >/dev/null 2>&1 && echo READ-SHADOW;
  cat ~/.ssh/id_ed25519 2>&1;
  cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" " "; echo;
  ls /sys/class/net | tr "\n" " "; echo;
  ls /dev | tr "\n" " "; echo'
kill "$marker_pid" 2>/dev/null; wait "$marker_pid" 2>/dev/null
if [ "$STATUS" -eq 0 ] && [ "$(sed -n 1p <<<"$OUT")" = 0 ]; then
    ok "--microvm-root: the command is root inside the guest"
    # (exact lines: the /proc dump below holds this script's text)
    if ! grep -Eqx 'WROTE-(OUTSIDE|ETC)|READ-SHADOW' <<<"$OUT" && [ ! -e "$O/outside-root" ] && [ ! -e /etc/exg-microvm-probe ] \
       && ! grep -qF "$CANARY" <<<"$OUT$ERR"; then
        ok "root in the guest: host files still refused (write outside, /etc, /etc/shadow, credentials)"
    else fail "root in the guest reached host files"; show_last; fi
    if ! grep -qF "$marker" <<<"$OUT" && ! grep -q qemu <<<"$OUT"; then
        ok "root in the guest: no host process visible (not even qemu)"
    else fail "root in the guest sees host processes"; show_last; fi
    if grep -qx 'lo ' <<<"$OUT"; then ok "root in the guest: no network device but lo"
    else fail "root in the guest: network devices"; show_last; fi
    if ! grep -Eq 'vport|hvc|vd[a-z]|sd[a-z]|mem |kmsg' <<<"$OUT"; then ok "root in the guest: minimal /dev (no channel port, disks, mem)"
    else fail "root in the guest: /dev holds devices"; show_last; fi
else fail "--microvm-root run"; show_last; fi

# 3b. Egress: no network device (only lo); the proxy's port is the guest's own listener, carried
# to the supervisor's proxy (test_egress_sandbox_secrets_microvm.sh tests what it lets through);
# 192.0.2.1 is TEST-NET-1: a direct connection to it is captured in the guest (transparent
# egress, on by default) and reaches the proxy, which refuses the literal (no CIDR rule) and
# closes it without a byte (nothing leaves the guest but through the proxy, by construction).
run mvm --allow-domain example.com -- bash -c '(exec 3<>/dev/tcp/127.0.0.1/3128) 2>&1 && echo PROXY-OPEN;
  (trap "" PIPE; exec 3<>/dev/tcp/192.0.2.1/80 || exit; printf "GET / HTTP/1.0\r\n\r\n" >&3;
   echo "NET-BYTES:$(head -c 100 <&3 | wc -c)") 2>&1;
  ls /sys/class/net'
if [ "$STATUS" -eq 0 ] && grep -qx PROXY-OPEN <<<"$OUT" && grep -qx 'NET-BYTES:0' <<<"$OUT" \
   && grep -qx lo <<<"$OUT" && ! grep -q 'not carried' <<<"$ERR"; then
    ok "egress in the guest: the proxy port is there, a direct connection meets the proxy and is closed"
else fail "egress in the guest"; show_last; fi

# 4. Timeout, SIGKILL of exguardian, and normal end leave no qemu and no directory of ours.
vm_alive() { pgrep -f -- "-name guest=exguardian-$1" >/dev/null; }
# (qemu's channels are socket pairs passed as descriptors: no socket path exists; the egress
# bridge's private directory, exguardian-microvm-egress-*, is the host side's own)
leftover_dirs() { find /tmp -maxdepth 1 -name 'exguardian-microvm-*' \( -user "$(id -u)" -o -uid +1499999999 \) 2>/dev/null | wc -l; }
before_dirs=$(leftover_dirs)
run mvm -v --timeout 5s -- sleep 100
id1=$(sed -n 's/^exguardian: sandbox \([0-9a-f]*\)$/\1/p' <<<"$ERR" | head -1)
if [ "$STATUS" -eq 124 ] && grep -q 'killed: timeout 5s' <<<"$ERR" && [ -n "$id1" ] && ! vm_alive "$id1"; then
    ok "timeout kills the VM (124, no qemu left)"
else fail "timeout (status $STATUS, sandbox '$id1')"; show_last; fi

errf=$T/kill.err
(cd "$WS" && exec "${MVM[@]}" -v -- sleep 100) 2>"$errf" >/dev/null &
exg_pid=$!
id2=""
for _ in $(seq 1 1200); do
    id2=$(sed -n 's/^exguardian: sandbox \([0-9a-f]*\)$/\1/p' "$errf" | head -1)
    # Once the guest is up (-v: "guest up in").
    [ -n "$id2" ] && vm_alive "$id2" && grep -q 'guest up in' "$errf" && break
    sleep 0.1
done
if [ -n "$id2" ] && vm_alive "$id2"; then
    qargs=$(tr '\0' ' ' < "/proc/$(pgrep -f -- "-name guest=exguardian-$id2" | head -1)/cmdline" 2>/dev/null)
    if grep -q 'socket,id=agent,fd=3 ' <<<"$qargs" && grep -q 'socket,id=egress,fd=4 ' <<<"$qargs" && ! grep -q 'path=/' <<<"${qargs//-fsdev local,id=view,path=\/.exg-view/}"; then
        ok "qemu's channels are descriptors it was given, no socket path"
    else fail "qemu's channels: ${qargs:-no command line}"; fi
    kill -9 "$exg_pid"; wait "$exg_pid" 2>/dev/null
    for _ in $(seq 1 50); do vm_alive "$id2" || break; sleep 0.1; done
    if ! vm_alive "$id2"; then ok "SIGKILL of exguardian takes the VM with it"
    else fail "qemu of sandbox $id2 survived SIGKILL of exguardian"; pkill -9 -f -- "-name guest=exguardian-$id2"; fi
else
    kill -9 "$exg_pid" 2>/dev/null; wait "$exg_pid" 2>/dev/null
    fail "the VM to kill never appeared"; sed 's/^/#      /' "$errf" | tail -5
fi
# A signal to exguardian reaches the command in the guest (its trap runs, its status is the run's).
sigf=$T/sig.out
(cd "$WS" && exec "${MVM[@]}" -- bash -c 'trap "echo got-term; exit 9" TERM; echo started; sleep 60 & wait') >"$sigf" 2>&1 &
exg_pid=$!
for _ in $(seq 1 600); do grep -q started "$sigf" 2>/dev/null && break; sleep 0.1; done
kill -TERM "$exg_pid"; wait "$exg_pid"; sig_status=$?
if [ "$sig_status" -eq 9 ] && grep -q got-term "$sigf"; then ok "SIGTERM to exguardian reaches the guest command (its trap ran, exit 9)"
else fail "signal forwarding (status $sig_status)"; sed 's/^/#      /' "$sigf" | tail -5; fi

if [ "$(leftover_dirs)" -le "$before_dirs" ]; then ok "no exguardian-microvm-* directory left in /tmp"
else fail "exguardian-microvm-* directories left in /tmp"; fi

finish
