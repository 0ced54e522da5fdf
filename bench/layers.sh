#!/usr/bin/env bash
# The container and gVisor layers against the runtimes they wrap, on one rootfs, side by side in
# interleaved rounds per workload (bench/interleave.py; WORKLOADS="startup" for one, EXG_BEFORE=BIN adds its rows):
#   startup   `true`
#   statloop  stat + open + read + close of every file of a tree, 3 rounds (bench/statloop.c)
#   find      `find /usr/include -type f | wc -l` over ~22k files (FIND_TREE=small: 760 files)
# Rows: chroot (no isolation), exguardian --layer container|gvisor --rootfs R, plain crun, runc,
# runsc (ptrace platform, --network=none, --ignore-cgroups; also with exguardian's seccomp profile and
# --oci-seccomp) and podman (runc) on the same rootfs R,
# plus exguardian's process layer (host root) as a reference.
# Ratios: exguardian container / plain crun, exguardian gvisor / plain runsc (target <= 1.2).
#
# The rootfs R (ROOTFS=DIR to use your own, e.g. a debootstrap): built here in a second from
# busybox-static, the shared libraries of the exguardian binary (its init runs inside), statloop
# (static) and /usr/include hard-linked (no copy). Writes bench/results/layers-*.json and
# bench/results/layers.md. Usage (as root): EXG=build/exguardian bash bench/layers.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
results=$root/bench/results
startup_runs=${RUNS:-30}
work_runs=${WORK_RUNS:-5}
mkdir -p "$results"

[ "$(id -u)" = 0 ] || { echo "bench: layers.sh runs as root (plain runtimes with their default rootful setup)" >&2; exit 1; }
for tool in python3 gcc unshare chroot; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
[ -x "$EXG" ] || { echo "bench: no exguardian binary at $EXG (run make build)" >&2; exit 1; }

dir=$(mktemp -d /tmp/exg-layers.XXXXXX)
chmod 755 "$dir"
holder_pid=""
# podman leaves libpod_parent cgroups behind: remove them (when empty) unless they were there before.
libpod_before=$(ls -d /sys/fs/cgroup/*/libpod_parent 2>/dev/null || true)
cleanup() {
    [ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null
    rm -rf --one-file-system "$dir"
    if [ -z "$libpod_before" ]; then
        find /sys/fs/cgroup/*/libpod_parent -depth -type d -exec rmdir {} + 2>/dev/null || true
    fi
}
trap cleanup EXIT
ws=$dir/ws state=$dir/state
mkdir -p "$ws" "$state/crun" "$state/runc" "$state/runsc" "$dir/podman"/{root,runroot,tmp}
chmod 755 "$ws"

# ---- the rootfs -----------------------------------------------------------------------------
gcc -O2 -static -o "$dir/statloop" "$root/bench/statloop.c"
if [ -n "${ROOTFS:-}" ]; then
    R=$(readlink -f "$ROOTFS")
    [ -x "$R/bin/sh" ] || { echo "bench: ROOTFS=$R has no /bin/sh" >&2; exit 1; }
    [ -d "$R/usr/include" ] || { echo "bench: ROOTFS=$R has no /usr/include to walk (install libc6-dev in it)" >&2; exit 1; }
    cp "$dir/statloop" "$ws/statloop"   # the workspace is bound into every row
    statloop=$ws/statloop
else
    command -v busybox >/dev/null || { echo "bench: busybox is missing (apt-get install busybox-static)" >&2; exit 1; }
    R=$dir/rootfs
    mkdir -p "$R"/{bin,etc,proc,sys,dev,tmp,run,home,root,var/tmp,usr/bin}
    chmod 1777 "$R/tmp" "$R/var/tmp"
    cp "$(command -v busybox)" "$R/bin/busybox"
    for a in sh true false find wc cat ls env id hostname sleep stat; do ln -s busybox "$R/bin/$a"; done
    cp "$dir/statloop" "$R/bin/statloop"
    statloop=/bin/statloop
    printf 'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n' > "$R/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$R/etc/group"
    # exguardian's own binary is its container's init: its libraries at the same paths.
    for lib in $(ldd "$EXG" | grep -oE '/[^ ]+'); do
        mkdir -p "$R$(dirname "$lib")"
        cp -L "$lib" "$R$lib"
    done
    # /usr/include without copying 300 MB: hard links when on the same filesystem.
    if [ "${FIND_TREE:-big}" = big ] && cp -al /usr/include "$R/usr/include" 2>/dev/null; then :
    else rm -rf "$R/usr/include"; mkdir -p "$R/usr/include"; cp -a /usr/include/linux "$R/usr/include/linux"; fi
fi
nfiles=$(find "$R/usr/include" -type f | wc -l)
stat_tree=/usr/include/linux
[ -d "$R$stat_tree" ] || stat_tree=/usr/include

# ---- plain OCI bundles: the same hardening a user would ask for ----------------------------
# One bundle per workload (config.json carries the argv); crun, runc and runsc share it.
make_bundle() {  # NAME ARGV-JSON [SECCOMP-JSON-FILE]
    local b=$dir/bundle-$1
    mkdir -p "$b"
    python3 - "$b/config.json" "$R" "$ws" "$2" "${3:-}" <<'PY'
import json, sys
path, rootfs, ws, argv, seccomp = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
caps = []
spec = {
  "ociVersion": "1.0.2",
  "process": {"terminal": False, "user": {"uid": 65534, "gid": 65534}, "args": argv,
              "env": ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp"],
              "cwd": ws, "noNewPrivileges": True,
              "capabilities": {k: caps for k in ("bounding", "effective", "inheritable", "permitted", "ambient")},
              "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]},
  "root": {"path": rootfs, "readonly": True},
  "hostname": "plain",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
    {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
    {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
    {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
    {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
    {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]},
    {"destination": ws, "type": "bind", "source": ws, "options": ["rbind", "rw"]},
  ],
  "linux": {
    "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
    "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
                    "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
    "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
  },
}
if seccomp:
    spec["linux"]["seccomp"] = json.load(open(seccomp))["linux"]["seccomp"]
json.dump(spec, open(path, "w"), indent=1)
PY
}

# exguardian's seccomp profile for runsc (from `exguardian oci-spec`): plain runsc with it too, to
# tell the cost of gVisor's in-sentry filter from the rest of the layer.
seccomp_json=""
if "$EXG" oci-spec --runtime runsc -- true > "$dir/exg-spec.json" 2>/dev/null &&
   python3 -c 'import json,sys; json.load(open(sys.argv[1]))["linux"]["seccomp"]' "$dir/exg-spec.json" 2>/dev/null; then
    seccomp_json=$dir/exg-spec.json
fi

# crun refuses hybrid cgroups (v1 controllers + an empty v2 mount) unless the v2 mount is hidden
# in a private mount namespace: a holder process keeps one such namespace for the whole bench, and
# crun enters it with nsenter (one exec; the unshare+umount happens once, not per run).
crun_prefix=""
if command -v crun >/dev/null && mountpoint -q /sys/fs/cgroup/unified 2>/dev/null && [ -d /sys/fs/cgroup/memory ]; then
    unshare -m --propagation private sh -c 'umount /sys/fs/cgroup/unified && exec sleep infinity' &
    holder_pid=$!
    for _ in $(seq 50); do
        ! grep -q ' /sys/fs/cgroup/unified ' "/proc/$holder_pid/mountinfo" 2>/dev/null && break
        sleep 0.05
    done
    crun_prefix="nsenter --mount=/proc/$holder_pid/ns/mnt"
fi

runsc_flags="--root=$state/runsc --network=none --platform=ptrace --ignore-cgroups"
podman_cmd="podman --root $dir/podman/root --runroot $dir/podman/runroot --tmpdir $dir/podman/tmp --cgroup-manager cgroupfs --events-backend file --runtime runc"
podman_run="run --rm --network none --read-only --user 65534:65534 --cap-drop ALL --security-opt no-new-privileges --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 -v $ws:$ws -w $ws --rootfs $R"

# Rows for one workload: "name<TAB>command" lines, only those that work here; the rest are
# reported as not available, with why.
tab=$'\t'
declare -A unavailable
rows=()
add_row() {  # NAME COMMAND
    local out
    if out=$(cd "$ws" && eval "$2" 2>&1 </dev/null); then
        rows+=("$1"$'\t'"$2")
    else
        unavailable[$1]=$(printf '%s' "$out" | grep -v '^$' | tail -n 1 | cut -c1-160)
        [ -n "${unavailable[$1]}" ] || unavailable[$1]="exit status non-zero"
    fi
}

bench_one() {  # WORKLOAD RUNS WARMUP ARGV-JSON SHELL-LINE
    local name=$1 runs=$2 warmup=$3 argv=$4 line=$5
    make_bundle "$name" "$argv"
    [ -n "$seccomp_json" ] && make_bundle "$name-seccomp" "$argv" "$seccomp_json"
    local b=$dir/bundle-$name
    rows=()
    unavailable=()
    add_row chroot "chroot $R $line"
    # (the process layer runs on the host's root: a reference for start-up only)
    [ "$name" = startup ] && add_row "exguardian process (host root)" "$EXG run -- $line"
    add_row "exguardian container" "$EXG run --layer container --rootfs $R -- $line"
    add_row "exguardian gvisor" "$EXG run --layer gvisor --rootfs $R -- $line"
    if [ -n "${EXG_BEFORE:-}" ]; then  # an older binary side by side (before/after figures)
        add_row "exguardian container (before)" "$(readlink -f "$EXG_BEFORE") run --layer container --rootfs $R -- $line"
        add_row "exguardian gvisor (before)" "$(readlink -f "$EXG_BEFORE") run --layer gvisor --rootfs $R -- $line"
    fi
    command -v crun >/dev/null && add_row crun "$crun_prefix crun --root $state/crun run --bundle $b bench-crun"
    command -v runc >/dev/null && add_row runc "runc --root $state/runc run --bundle $b bench-runc"
    command -v runsc >/dev/null && add_row "runsc (ptrace)" "runsc $runsc_flags run --bundle $b bench-runsc"
    command -v runsc >/dev/null && [ -n "$seccomp_json" ] &&
        add_row "runsc (ptrace) + exguardian's seccomp" "runsc $runsc_flags --oci-seccomp run --bundle $b-seccomp bench-runsc-sc"
    command -v podman >/dev/null && add_row "podman (runc)" "$podman_cmd $podman_run $line"
    local args=() r
    for r in "${rows[@]}"; do args+=(--command-name "${r%%"$tab"*}" "${r#*"$tab"}"); done
    cd "$ws"
    # Interleaved rounds (bench/interleave.py), so a change of the machine's load hits every row alike.
    local pairs=() i
    for ((i = 0; i < ${#args[@]}; i += 3)); do pairs+=("${args[i + 1]}" "${args[i + 2]}"); done
    python3 "$root/bench/interleave.py" --warmup "$warmup" --runs "$runs" \
        --export-json "$results/layers-$name.json" "${pairs[@]}" >/dev/null 2>"$dir/hyperfine.err" ||
        { echo "bench: timing failed for $name:" >&2; cat "$dir/hyperfine.err" >&2; exit 1; }
    local na=""
    for k in "${!unavailable[@]}"; do na+="$k"$'\t'"${unavailable[$k]}"$'\n'; done
    python3 - "$results/layers-$name.json" "$name" "$na" <<'PY' | tee -a "$results/layers.md"
import json, sys
d = json.load(open(sys.argv[1]))
name, na = sys.argv[2], [l.split("\t", 1) for l in sys.argv[3].splitlines() if l]
med = {r["command"]: r["median"] * 1000 for r in d["results"]}
sd = {r["command"]: r["stddev"] * 1000 for r in d["results"]}
runs = len(d["results"][0]["times"])
print(f"\n### {name} ({runs} runs, median)\n")
p90 = {r["command"]: r.get("p90", 0) * 1000 for r in d["results"]}
print("| command | median (ms) | p90 (ms) | sd (ms) |")
print("|---|---|---|---|")
for r in d["results"]:
    print(f"| {r['command']} | {med[r['command']]:.1f} | {p90[r['command']]:.1f} | {sd[r['command']]:.1f} |")
for k, why in na:
    print(f"| {k} | not available | {why} |")
def ratio(a, b, label):
    if a in med and b in med:
        x = med[a] / med[b]
        print(f"\n{label}: {x:.2f} x {'(target <= 1.2: met)' if x <= 1.2 else '(target <= 1.2: MISSED)'}")
    else:
        print(f"\n{label}: not available ({a if a not in med else b} did not run)")
ratio("exguardian container", "crun", "exguardian container / plain crun")
ratio("exguardian gvisor", "runsc (ptrace)", "exguardian gvisor / plain runsc")
if "runsc (ptrace) + exguardian's seccomp" in med:
    ratio("exguardian gvisor", "runsc (ptrace) + exguardian's seccomp", "exguardian gvisor / plain runsc with the same seccomp profile")
PY
}

{
    echo "## exguardian layers vs plain runtimes ($(date -u +%Y-%m-%d), kernel $(uname -r), $(nproc) cores)"
    echo
    echo "rootfs: ${ROOTFS:-busybox + the libraries of exguardian + /usr/include}, $nfiles files under /usr/include;"
    echo "crun: ${crun_prefix:+entered with nsenter into a mount namespace where the empty cgroup v2 mount is hidden (hybrid host); }"
    echo "runsc: $runsc_flags; podman: runc, --rootfs"
} > "$results/layers.md"
cat "$results/layers.md"
workloads=" ${WORKLOADS:-startup statloop find} "   # WORKLOADS="startup": only that one
[[ $workloads == *" startup "* ]] && bench_one startup "$startup_runs" 3 '["/bin/true"]' "/bin/true"
[[ $workloads == *" statloop "* ]] && bench_one statloop "$work_runs" 1 "[\"$statloop\", \"$stat_tree\", \"3\"]" "$statloop $stat_tree 3"
[[ $workloads == *" find "* ]] && bench_one find "$work_runs" 1 '["/bin/sh", "-c", "find /usr/include -type f | wc -l"]' "/bin/sh -c 'find /usr/include -type f | wc -l'"
echo
echo "results: $results/layers.md and layers-*.json"
