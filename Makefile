# ExGuardian: `make demo` and `make test` work on a fresh Debian 12 machine as root.
SHELL := /bin/bash
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
EXG := $(BUILD_DIR)/exguardian
PREFIX ?= /usr/local
DESTDIR ?=
DEB_DIR ?= $(BUILD_DIR)

DEB_PACKAGES := build-essential cmake pkg-config nlohmann-json3-dev libcli11-dev \
  libseccomp-dev libgtest-dev googletest git python3 gcc libc6-dev util-linux passwd \
  procps psmisc bubblewrap hyperfine iproute2 expect \
  jq libbenchmark-dev libidn2-dev libunistring-dev libre2-dev libboost-dev libssl-dev curl openssl python3-pip ca-certificates \
  python3-requests crun runc runsc podman uidmap python3-jsonschema busybox-static dpkg-dev man-db zlib1g-dev libcap2-bin nodejs \
  clang-16 libclang-rt-16-dev lld qemu-system-x86 ccache nftables containerd python3-yaml apparmor \
  containernetworking-plugins python3-grpcio e2fsprogs fuse-overlayfs socat ripgrep

.PHONY: all deps build build-checks test test-asan fuzz demo bench clean install install-built deb deb-built

all: build

# apt-get runs only when a package is missing, so repeated runs are fast and work offline.
# npm (test_serve installs the e2b SDK with it): Debian's package, unless a nodejs that carries its own is there.
deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -z "$$missing" ]; then echo "deps: all packages present"; exit 0; fi; \
	echo "deps: missing:$$missing"; \
	if [ "$$(id -u)" -ne 0 ]; then echo "deps: run as root to install them" >&2; exit 1; fi; \
	apt-get update && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(DEB_PACKAGES)

# ccache: a rebuild of the same sources (another checkout, a worktree, CI's fresh clone on a
# machine that built them before) compiles only what changed. Paths under the checkout are
# hashed relative to it, and the working directory not at all, so any clone hits the same cache.
# Looked for when the recipe runs, not when make reads this file: on a fresh machine `deps`
# installs ccache in the same `make` run, and the first build is the one that fills the cache.
CCACHE_LAUNCHER = $$(c=$$(command -v ccache) && echo "-DCMAKE_CXX_COMPILER_LAUNCHER=$$c")
CONFIGURE = cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CCACHE_LAUNCHER)
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE ?= 8G
build: deps
	$(CONFIGURE) && cmake --build $(BUILD_DIR) -j$$(nproc)

# What `make test` runs besides the build: the fuzz targets (clang, BUILD_DIR/fuzz;
# ctest's fuzz.smoke) and the unit tests under ASan/UBSan (BUILD_DIR/asan;
# asan.unit_tests), whose build runs at nice 19 on the core the one-at-a-time suite
# leaves idle (tests/make_test.sh), then, after the suite, the integration tests of
# the supervisor and the proxy (test_process, test_egress_proxy) with that build's
# exguardian. TEST_ASAN=0 leaves them out; `make test-asan` runs more of them.
TEST_ASAN ?= 1
build-checks: build
	cmake --build $(BUILD_DIR) --target exg_fuzz

test: build-checks
	bash tests/make_test.sh $(BUILD_DIR) $(TEST_ASAN) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CCACHE_LAUNCHER)

# Each fuzz target for FUZZ_SECONDS after replaying its seeds and regressions
# (fuzz/run.sh; findings in BUILD_DIR/fuzz/fuzz-artifacts/TARGET/). FUZZ_TARGETS: a subset.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
fuzz: build
	cmake --build $(BUILD_DIR) --target exg_fuzz
	bash fuzz/run.sh $(BUILD_DIR)/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# ASan and UBSan: the unit tests, then the integration tests of the supervisor and
# the proxy (process layer, as root and as a user) with an exguardian built with them.
ASAN_BUILD_DIR ?= $(BUILD_DIR)/asan
ASAN_IT_TESTS := test_process test_egress_proxy test_egress_sandbox test_egress_sandbox_secrets_echo \
  test_session test_limits test_survivors
test-asan: deps
	cmake -S . -B $(ASAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DEXG_SANITIZE=ON
	cmake --build $(ASAN_BUILD_DIR) -j$$(nproc) --target exg_unit_tests exguardian
	bash tests/asan/run_unit_tests.sh $(ASAN_BUILD_DIR)
	cd $(ASAN_BUILD_DIR) && ctest --output-on-failure -j1 --timeout 300 \
	  -R '^it\.($(subst $(eval) ,|,$(strip $(ASAN_IT_TESTS))))\.(root|user)$$'

# The seed's escape lines, then the full escape test on every layer present
# (process, container, gVisor) with its reports. It needs exguardian alone (its pid 1
# is embedded in it): not the unit tests, the test helpers or the microVM guest
# (`--layer all` leaves the microVM out), which `make build` adds.
demo: deps
	$(CONFIGURE) && cmake --build $(BUILD_DIR) -j$$(nproc) --target exguardian
	EXG=$(abspath $(EXG)) bash demo/demo.sh
	$(EXG) escape-test --layer all --json $(BUILD_DIR)/escape-test.json --html $(BUILD_DIR)/escape-test.html
	@echo "reports: $(abspath $(BUILD_DIR))/escape-test.html and escape-test.json"

bench: build
	EXG=$(abspath $(EXG)) bash bench/startup.sh
	EXG=$(abspath $(EXG)) bash bench/syscalls.sh
	BUILD=$(abspath $(BUILD_DIR)) bash bench/sweep.sh
	EXG=$(abspath $(EXG)) bash bench/secrets.sh
	EXG=$(abspath $(EXG)) bash bench/layers.sh
	EXG=$(abspath $(EXG)) bash bench/serve.sh
	EXG=$(abspath $(EXG)) bash bench/proxy_soak.sh
	EXG=$(abspath $(EXG)) bash bench/transparent.sh

# bin/exguardian (its static pid 1 embedded), lib/exguardian/exguardian-init,
# share/man/man1/exguardian.1 and share/doc/exguardian under DESTDIR/PREFIX.
# The -built variants take BUILD_DIR as it is, without building (tests).
install: build
	@$(MAKE) --no-print-directory install-built
install-built:
	DESTDIR="$(DESTDIR)" bash packaging/install.sh $(BUILD_DIR) "$(PREFIX)"

# DEB_DIR/exguardian_VERSION_ARCH.deb, built with dpkg-deb (packaging/make-deb.sh).
deb: build
	@$(MAKE) --no-print-directory deb-built
deb-built:
	bash packaging/make-deb.sh $(BUILD_DIR) $(DEB_DIR)

clean:
	rm -rf $(BUILD_DIR)
