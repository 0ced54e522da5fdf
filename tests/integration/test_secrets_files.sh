#!/usr/bin/env bash
# Secrets on the sandbox's side, no network needed (issue 5): a secret from the
# environment and one from a file, a credential file seen as a masked copy (ours
# and srt's credentials.files), the trust bundle mounted read-only over the
# system bundle with our CA in it, the CA variables; the real values found
# nowhere inside (environment, /proc/*/environ, files); bad policies exit 125
# with one clear error. The end-to-end HTTPS test is test_egress_sandbox_secrets.sh.
source "$(dirname "$0")/lib.sh"

new_workspace
V_ENV="exgsecret-env-$(rnd)"
V_NPM="exgsecret-npm-$(rnd)"
V_GH="exgsecret-gh-$(rnd)"
mkdir -p "$HOME/.config/gh"
printf '%s\n' "$V_NPM" > "$HOME/.npm-token"
printf 'registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=%s\nalways-auth=true\n' "$V_NPM" \
    > "$HOME/.npmrc"
printf 'github.com:\n    oauth_token: %s\n    user: exg\n' "$V_GH" > "$HOME/.config/gh/hosts.yml"
chmod 644 "$HOME/.npm-token" "$HOME/.npmrc" "$HOME/.config/gh/hosts.yml"
chmod 755 "$HOME/.config" "$HOME/.config/gh"
export GITHUB_TOKEN=$V_ENV
export ALSO_GH_TOKEN=$V_ENV   # the same value under another name, passed with env.allow

POL=$T/secrets.json
cat > "$POL" <<EOF
{
  "network": {"allowedDomains": ["api.github.com", "*.githubusercontent.com", "registry.npmjs.org"],
              "tlsTerminate": {}},
  "env": {"allow": ["ALSO_GH_TOKEN"]},
  "secrets": [
    {"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com", "*.githubusercontent.com"]},
    {"name": "NPM_TOKEN", "from": "file:~/.npm-token", "hosts": ["registry.npmjs.org"]}
  ],
  "secretFiles": [{"path": "~/.npmrc", "secrets": ["NPM_TOKEN"]}],
  "credentials": {
    "files": [{"path": "~/.config/gh/hosts.yml", "mode": "mask", "extract": "oauth_token:\\\\s*(\\\\S+)",
               "injectHosts": ["api.github.com"]}]
  }
}
EOF

require_sandbox || finish

# ---- what the sandbox sees --------------------------------------------------------------------
INSIDE='
echo "GITHUB_TOKEN=$GITHUB_TOKEN"
echo "NPM_TOKEN=$NPM_TOKEN"
echo "ALSO_GH_TOKEN=$ALSO_GH_TOKEN"
for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO; do echo "CAVAR $v=${!v}"; done
echo "--npmrc"; cat ~/.npmrc
echo "--hosts.yml"; cat ~/.config/gh/hosts.yml
echo "--token-file"; cat ~/.npm-token 2>&1 | head -c 200; echo
echo "--ls-gh"; ls ~/.config/gh 2>&1 | head -c 200; echo
echo "--writes"
( echo x >> ~/.npmrc ) 2>/dev/null && echo "WROTE npmrc"
( echo x >> "$SSL_CERT_FILE" ) 2>/dev/null && echo "WROTE bundle"
chmod 666 ~/.npmrc 2>/dev/null && echo "CHMOD npmrc"
echo "--mounts"
grep -E " (/etc/ssl/certs/ca-certificates.crt|$HOME/.npmrc|$HOME/.config/gh/hosts.yml) " /proc/self/mountinfo | awk "{print \$5, \$6}"
echo "--end"
'
run sbx --no-policy-files --policy "$POL" -- bash -c "$INSIDE"
if [ "$STATUS" -ne 0 ]; then fail "sandbox with secrets ran"; show_last; finish; fi
ok "sandbox with secrets ran"
ph_gh=$(sed -n 's/^GITHUB_TOKEN=//p' <<<"$OUT")
ph_npm=$(sed -n 's/^NPM_TOKEN=//p' <<<"$OUT")
if [[ "$ph_gh" =~ ^exg_ph_GITHUB_TOKEN_[0-9a-f]{32}$ ]]; then ok "GITHUB_TOKEN inside is a placeholder ($ph_gh)"
else fail "GITHUB_TOKEN inside is '$ph_gh'"; fi
if [[ "$ph_npm" =~ ^exg_ph_NPM_TOKEN_[0-9a-f]{32}$ ]]; then ok "NPM_TOKEN (from a file) inside is a placeholder"
else fail "NPM_TOKEN inside is '$ph_npm'"; fi
if grep -qxF "ALSO_GH_TOKEN=$ph_gh" <<<"$OUT"; then ok "the value under another name became the placeholder too"
else fail "ALSO_GH_TOKEN inside: $(grep ALSO_GH <<<"$OUT")"; fi
if grep -qF "//registry.npmjs.org/:_authToken=$ph_npm" <<<"$OUT" && grep -qF "always-auth=true" <<<"$OUT"; then
    ok "~/.npmrc is a copy with the placeholder in place of the value"
else fail "~/.npmrc inside"; show_last; fi
if grep -qE "^    oauth_token: exg_ph_FILE_HOSTS_YML_[0-9a-f]{32}$" <<<"$OUT" && grep -qF "    user: exg" <<<"$OUT"; then
    ok "srt credentials.files mask: hosts.yml is a copy with a placeholder for the extracted token"
else fail "hosts.yml inside"; show_last; fi
tokfile=$(sed -n '/^--token-file$/,/^--ls-gh$/p' <<<"$OUT")
# gVisor opens the mask (/dev/null on a nodev mount) anyway: it reads as empty there.
if { grep -q "Permission denied" <<<"$tokfile" || { on_layer gvisor && [ "$(grep -vc '^--' <<<"$tokfile")" -le 1 ]; }; } &&
   ! grep -qF "$V_NPM" <<<"$tokfile"; then
    ok "the file a secret was read from is unreadable inside"
else fail "~/.npm-token inside: $tokfile"; fi
lsgh=$(sed -n '/^--ls-gh$/,/^--writes$/p' <<<"$OUT")
# gVisor's statx fails here (EINVAL, plain runsc too): ls says "Invalid argument" and lists nothing.
# In a microVM the mask is listable (qemu's 9p server must read what it walks): only the copy's name.
if on_layer microvm; then
    if [ "$(sed '1d;/^--writes$/d;/^$/d' <<<"$lsgh")" = hosts.yml ]; then ok "~/.config/gh lists only the masked copy (microVM view)"
    else fail "ls ~/.config/gh inside: $lsgh"; fi
elif grep -q "Permission denied" <<<"$lsgh" || { on_layer gvisor && grep -q "Invalid argument" <<<"$lsgh"; }; then ok "~/.config/gh stays unlistable (only the masked copy is reachable)"
else fail "ls ~/.config/gh inside: $lsgh"; fi
writes=$(sed -n '/^--writes$/,/^--mounts$/p' <<<"$OUT")
if ! grep -qE "WROTE|CHMOD" <<<"$writes"; then ok "masked copy and trust bundle are not writable"
else fail "writes inside: $writes"; fi
bundle_path=/etc/ssl/certs/ca-certificates.crt
cavars=$(grep -c "^CAVAR [A-Z_]*=$bundle_path$" <<<"$OUT")
if [ -f "$bundle_path" ] && [ "$cavars" -eq 5 ]; then ok "the five CA variables point at $bundle_path"
elif [ ! -f "$bundle_path" ]; then skip "no $bundle_path on this host"
else fail "CA variables: $(grep CAVAR <<<"$OUT")"; fi
mounts=$(sed -n '/^--mounts$/,/^--end$/p' <<<"$OUT")
ro=$(grep -c " ro," <<<"$mounts")
if [ "$ro" -ge 3 ]; then ok "bundle, ~/.npmrc and hosts.yml are read-only mounts"
elif on_layer gvisor && [ "$ro" -ge 2 ] && ! grep -q ca-certificates <<<"$mounts"; then
    # The bundle's bind is made by the runtime host below gVisor's read-only root (one gofer
    # mount fewer), so gVisor lists no mount of its own there; its being read-only is checked above.
    ok "~/.npmrc and hosts.yml are read-only mounts, the bundle is part of the read-only root"
elif on_layer microvm; then skip "per-file mounts: the guest sees one 9p view (that they are read-only is checked above)"
else fail "mounts: $mounts"; fi

# ---- the trust bundle: the host's bundle plus this sandbox's CA --------------------------------
if [ -f "$bundle_path" ]; then
    run sbx --no-policy-files --policy "$POL" -- cat "$bundle_path"
    printf '%s\n' "$OUT" > "$T/bundle1.pem"
    host_size=$(stat -c %s "$bundle_path")
    if cmp -s -n "$host_size" "$bundle_path" "$T/bundle1.pem"; then ok "the bundle starts with the host's bundle"
    else fail "the bundle inside does not start with the host's bundle"; fi
    tail -c +"$((host_size + 1))" "$T/bundle1.pem" > "$T/ca1.pem"
    if [ "$(grep -c 'BEGIN CERTIFICATE' "$T/ca1.pem")" -eq 1 ] &&
       openssl x509 -in "$T/ca1.pem" -noout -subject 2>/dev/null | grep -q "ExGuardian sandbox" &&
       openssl x509 -in "$T/ca1.pem" -noout -text 2>/dev/null | grep -q "CA:TRUE"; then
        ok "one certificate more: this sandbox's CA ($(openssl x509 -in "$T/ca1.pem" -noout -subject))"
    else fail "the extra part of the bundle is not our CA"; sed 's/^/#      /' "$T/ca1.pem" | head -5; fi
    if ! grep -q "PRIVATE KEY" "$T/bundle1.pem"; then ok "no private key in the bundle"
    else fail "a private key in the bundle"; fi
    run sbx --no-policy-files --policy "$POL" -- cat "$bundle_path"
    if [ "$(printf '%s\n' "$OUT" | sha256sum)" != "$(sha256sum < "$T/bundle1.pem")" ]; then
        ok "every sandbox gets its own CA"
    else fail "two sandboxes trusted the same CA"; fi
fi

# ---- the real values: nowhere inside ---------------------------------------------------------
# The values to look for come in on stdin (never in an argument or a file inside).
SEARCH='
patterns=$(cat)
env
cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" "\n"
cat ~/.npmrc ~/.config/gh/hosts.yml "$SSL_CERT_FILE"
while read -r p; do grep -rsIlF -e "$p" /etc /run /tmp /var/tmp /dev/shm "$HOME" "$PWD" 2>/dev/null | sed "s/^/FOUND-IN /"; done <<<"$patterns"
echo searched
'
run sbx --no-policy-files --policy "$POL" -- bash -c "$SEARCH" <<<"$V_ENV
$V_NPM
$V_GH"
if [ "$STATUS" -eq 0 ] && grep -q "^searched$" <<<"$OUT"; then
    ok "searched env, /proc/*/environ, /proc/*/cmdline, the masked files and /etc /run /tmp /var/tmp /dev/shm HOME workspace"
else fail "the search inside did not run"; show_last; fi
if ! grep -q "^FOUND-IN" <<<"$OUT"; then ok "no file inside holds a real value"
else fail "a real value in a file inside: $(grep FOUND-IN <<<"$OUT")"; fi
for v in "$V_ENV" "$V_NPM" "$V_GH"; do last_output_lacks "$v" "no real value in env, /proc, or the masked files"; done

# ---- --dry-run and -v name secrets, never values ---------------------------------------------
expect_output_contains "GITHUB_TOKEN -> api.github.com, *.githubusercontent.com" \
    sbx --no-policy-files --policy "$POL" --dry-run -- true
for v in "$V_ENV" "$V_NPM" "$V_GH"; do last_output_lacks "$v" "--dry-run shows no value"; done
run sbx --no-policy-files --policy "$POL" -v --audit-log "$T/audit.jsonl" -- true
if [ "$STATUS" -eq 0 ] && grep -q "secrets: GITHUB_TOKEN -> api.github.com" <<<"$ERR" &&
   grep -q "TLS interception for" <<<"$ERR"; then ok "-v narrates the secrets"
else fail "-v narration"; show_last; fi
for v in "$V_ENV" "$V_NPM" "$V_GH"; do last_output_lacks "$v" "-v shows no value"; done
if grep -q '"event":"secrets"' "$T/audit.jsonl" && ! grep -qF -e "$V_ENV" -e "$V_NPM" -e "$V_GH" "$T/audit.jsonl"; then
    ok "the audit log names the secrets, without values"
else fail "audit log"; head -5 "$T/audit.jsonl" | sed 's/^/#      /'; fi

# ---- the host's files are untouched ----------------------------------------------------------
if grep -qF "_authToken=$V_NPM" "$HOME/.npmrc" && grep -qF "oauth_token: $V_GH" "$HOME/.config/gh/hosts.yml"; then
    ok "the host's credential files keep their values"
else fail "host credential files changed"; fi

# ---- bad policies: exit 125, one clear error ---------------------------------------------------
bad_policy() {  # DESC JSON EXPECTED-ERROR-SUBSTRING
    printf '%s\n' "$2" > "$T/bad.json"
    run sbx --no-policy-files --policy "$T/bad.json" -- true
    if [ "$STATUS" -eq 125 ] && grep -qF -- "$3" <<<"$ERR"; then ok "bad policy ($1): 125, '$3'"
    else fail "bad policy ($1): status $STATUS"; show_last; fi
}
bad_policy "host not allowed" \
    '{"network": {"allowedDomains": ["github.com"]}, "secrets": [{"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com"]}]}' \
    'secret GITHUB_TOKEN ('"$T"'/bad.json:1:61): host "api.github.com" is not allowed by network.allowedDomains'
bad_policy "unknown key" \
    '{"secrets": [{"name": "GITHUB_TOKEN", "form": "env:GITHUB_TOKEN", "hosts": ["a.com"]}]}' \
    'bad.json:1:39: unknown key "form" in secrets[0]'
bad_policy "missing variable" \
    '{"network": {"allowedDomains": ["a.com"]}, "secrets": [{"name": "T", "from": "env:EXG_NOT_SET_ANYWHERE", "hosts": ["a.com"]}]}' \
    'secret T ('"$T"'/bad.json:1:56): env:EXG_NOT_SET_ANYWHERE is not set'
bad_policy "undeclared secret in a secret file" \
    '{"secretFiles": [{"path": "~/.npmrc", "secrets": ["NPM_TOKEN"]}]}' \
    'names secret NPM_TOKEN, which no "secrets" entry declares'
bad_policy "srt mask without injectHosts" \
    '{"credentials": {"envVars": [{"name": "GITHUB_TOKEN", "mode": "mask"}]}}' \
    'mode "mask" needs injectHosts'
bad_policy "bad from" \
    '{"secrets": [{"name": "T", "from": "GITHUB_TOKEN", "hosts": ["a.com"]}]}' \
    'secrets[0].from: expected "env:NAME" or "file:PATH", got "GITHUB_TOKEN"'
# An extract pattern may come with a project (.exguardian.json), its source may be any file of up to
# 1 MiB: std::regex recursed once per character there (a crash) and backtracked (hours); RE2 answers
# at once. A file that fills a whole MiB with one line:
{ printf 'k='; head -c 1048000 /dev/zero | tr '\0' x; } > "$HOME/big-credential"
chmod 644 "$HOME/big-credential"
bad_policy "extract that once took a stack frame per character" \
    '{"network": {"allowedDomains": ["a.com"]}, "secrets": [{"name": "T", "from": "file:~/big-credential", "extract": "k=([^Z]*)Z", "hosts": ["a.com"]}]}' \
    'extract "k=([^Z]*)Z" finds nothing in its source'
bad_policy "extract that once backtracked for hours" \
    '{"network": {"allowedDomains": ["a.com"]}, "secrets": [{"name": "T", "from": "file:~/big-credential", "extract": "(x*x*x*x*)Z", "hosts": ["a.com"]}]}' \
    'extract "(x*x*x*x*)Z" finds nothing in its source'
bad_policy "extract with a back-reference" \
    '{"secrets": [{"name": "T", "from": "file:~/big-credential", "extract": "(x)\\1", "hosts": ["a.com"]}]}' \
    'no back-references, no look-ahead or look-behind'

finish
