#!/usr/bin/env bash
# The CRI test bed (test_cri.sh) again on the other containerd versions a node may have (issue 46):
# Debian's containerd of trixie (1.7) and of sid (2.x), each run whole as test_cri.sh runs
# Debian 12's 1.6 (its own containerd, CNI, images, pods on exguardian and exguardian-gvisor,
# configure.sh's configuration for that version: 1.7 in config.toml itself, 2.x a drop-in in
# conf.d imported by /etc/containerd/conf.d/*.toml, here under a version 3 config.toml).
# The packages come from Debian's archive through a private apt configuration of this test's
# (its own sources.list, state and cache directories: the machine's apt sources are not
# touched), `apt-get download`, and `dpkg -x` into /var/cache/exguardian-tests/containerd/VERSION
# (kept between runs: only a version not there yet is downloaded). Exit 77 only when the archive
# cannot be reached and nothing is cached. Root only, as test_cri.sh.
. "$(dirname "$0")/lib.sh"

if [ "$EXG_AS" != root ]; then
    echo "skip: containerd's CRI plugin, CNI and exguardian runtime run as root only (as test_cri.sh)"; exit 77
fi
need_source_tree tests/integration/test_cri.sh apt-get dpkg
CACHE=/var/cache/exguardian-tests/containerd
A=$T/apt
mkdir -p "$A/state/lists/partial" "$A/cache/archives/partial" "$A/parts" "$A/prefs" "$A/debs" "$CACHE"
: > "$A/state/status"
# The same archive this machine's apt already uses (the site its own release comes from; a
# mirror or proxy set up there is followed), with the newer suites.
MIRROR=$(apt-get indextargets --format '$(SITE) $(RELEASE) $(IDENTIFIER)' 2>/dev/null |
         awk -v rel="$(. /etc/os-release && echo "$VERSION_CODENAME")" '$2 == rel && $3 == "Packages" { print $1; exit }')
if [ -z "$MIRROR" ]; then
    echo "skip: this machine's apt names no Debian archive for its release (apt-get indextargets), so the newer suites have no site"
    exit 77
fi
cat > "$A/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR sid main
EOF
APT=(-o "Dir::Etc::SourceList=$A/sources.list" -o "Dir::Etc::SourceParts=$A/parts" -o "Dir::Etc::PreferencesParts=$A/prefs"
     -o "Dir::Etc::Preferences=$A/prefs/none" -o "Dir::State=$A/state" -o "Dir::State::status=$A/state/status"
     -o "Dir::Cache=$A/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
reachable=1
if ! timeout 300 apt-get "${APT[@]}" -q update > "$A/update.log" 2>&1 || grep -q '^[EW]: Failed to fetch' "$A/update.log"; then
    reachable=0
fi

# unpacked SUITE: the directory of the suite's containerd (its usr/bin), from the cache or
# downloaded now; empty when neither.
unpacked() {
    local suite=$1 v d
    if [ "$reachable" = 1 ]; then
        v=$(apt-cache "${APT[@]}" madison containerd | awk -v s="$suite/main" '$0 ~ s { print $3; exit }')
        [ -n "$v" ] || { note "$suite: no containerd in Debian's archive" >&2; return 0; }
        d=$CACHE/$v
        if [ ! -x "$d/usr/bin/containerd" ]; then
            (cd "$A/debs" && timeout 300 apt-get "${APT[@]}" -q download "containerd=$v") > "$A/download-$suite.log" 2>&1 &&
                rm -rf "$d.new" && dpkg -x "$A/debs/containerd_${v/*:/}_"*.deb "$d.new" && rm -rf "$d" && mv "$d.new" "$d" ||
                { note "$suite: containerd $v not unpacked: $(tail -n 2 "$A/download-$suite.log")" >&2; return 0; }
        fi
    else  # the newest cached of that series
        local series; [ "$suite" = trixie ] && series='1.*' || series='2.*'
        d=$(ls -d "$CACHE"/$series 2>/dev/null | sort -V | tail -n 1)
        [ -n "$d" ] || return 0
    fi
    echo "$d/usr/bin"
}
D17=$(unpacked trixie)
D2=$(unpacked sid)
if [ -z "$D17$D2" ]; then
    [ "$reachable" = 0 ] && { echo "skip: Debian's archive is not reachable and no containerd is cached in $CACHE"; tail -n 3 "$A/update.log"; exit 77; }
    fail "neither trixie nor sid has a containerd to unpack"; finish
fi

# test_cri.sh whole with each containerd; its lines indented, its count ours.
for d in $D17 $D2; do
    v=$("$d/containerd" --version | awk '{print $3}')
    note "containerd $v ($d): test_cri.sh"
    mkdir -p "$T/cri-$v"
    # (2.x with a version 3 config.toml, `containerd config migrate`'s: the drop-in deploy/ ships
    # for it; a version 2 one, as Debian's 2.x package has, gets 1.7's tables as a version 2
    # drop-in, test_containerd_config.sh)
    cv=""; case $v in 2.*) cv=3 ;; esac
    run env EXG_CRI_CONTAINERD="$d" EXG_CRI_CONFIG_VERSION="$cv" T="$T/cri-$v" bash "$SRC/tests/integration/test_cri.sh"
    printf '%s\n' "$OUT" | sed 's/^/    /'
    counts=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' <<<"$OUT" | tail -n 1)
    check "containerd $v: test_cri.sh passed (${counts% *} checks), none failed" \
        bash -c '[ "$1" = 0 ] && [ "${2#* }" = 0 ] && [ "${2% *}" -gt 0 ]' _ "$STATUS" "${counts:-0 1}"
done
[ -n "$D17" ] || skip "trixie's containerd (1.7) not run: none in the archive or the cache"
[ -n "$D2" ] || skip "sid's containerd (2.x) not run: none in the archive or the cache"
finish
