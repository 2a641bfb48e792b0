# qjson: the two commands that do everything on a fresh machine are
#   make test    install what is missing, build, run every test and lint
#   make bench   install what is missing, build, run the benchmarks
export PATH := $(HOME)/.cargo/bin:$(PATH)
# The shared JSONTestSuite and corpus files (override with QJSON_DATA=...).
export QJSON_DATA ?= $(abspath $(firstword $(wildcard ../shared/data /work/shared/data)))

LIB := target/release/libqjson.so

.PHONY: all build deps deps-bench deps-cross test bench clean

all: build

deps:
	tools/deps.sh test

deps-bench:
	tools/deps.sh bench

# The aarch64 cross build and emulator; without them make test and make
# bench skip their aarch64 parts and say why.
deps-cross:
	tools/deps.sh cross || echo "deps: no aarch64 cross build here"

build: deps
	cargo build --release --quiet

$(LIB): build

test: build deps-cross
	tools/test.sh

bench: deps-bench deps-cross build
	tools/bench.sh

# make bench, then rewrite docs/benchmarks.md's generated part and its chart.
.PHONY: bench-report
bench-report: deps-bench build
	REPORT=1 tools/bench.sh

# examples/gateway under load with wrk: qjson vs cjson, 1 MB requests.
.PHONY: bench-gateway
bench-gateway: deps-bench build
	tools/gateway_bench.sh

# Each fuzz target (fuzz/, tools/fuzz_encode.lua) for FUZZ_SECONDS (600);
# docs/reliability.md has the last run's figures.
FUZZ_SECONDS ?= 600
.PHONY: fuzz
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) tools/fuzz.sh

# The Rust tests under AddressSanitizer (each kernel) and Miri (scalar).
.PHONY: sanitize
sanitize: deps
	tools/sanitize.sh

# Long checks: 100 000 parses of 1 MB documents three ways with RSS
# bounded, every single-byte truncation of the corpus, and every spec under
# valgrind memcheck. Takes about an hour; docs/reliability.md has figures.
.PHONY: soak
soak: deps build
	luajit tools/soak.lua memory
	luajit tools/soak.lua burst
	luajit tools/soak.lua truncations
	tools/memcheck.sh

# Every spec under valgrind memcheck with the JIT off.
.PHONY: memcheck
memcheck: deps build
	tools/memcheck.sh

# make install [PREFIX=/usr/local] [DESTDIR=...] [LUA_DIR=...] [LIB_DIR=...]:
# the Lua modules into LUA_DIR and libqjson.so into LIB_DIR, where
# package.cpath (and so lua/qjson/ffi.lua) finds it. Needs only cargo, no
# apt-get: it is also the rockspecs' install step.
PREFIX ?= /usr/local
LUA_DIR ?= $(PREFIX)/share/lua/5.1
LIB_DIR ?= $(PREFIX)/lib/lua/5.1

.PHONY: install
# QJSON_PREBUILT=path/libqjson.so installs that library instead of
# building one (tools/rock.sh packs binary rocks this way).
install:
ifeq ($(QJSON_PREBUILT),)
	cargo build --release --quiet
endif
	install -d '$(DESTDIR)$(LUA_DIR)/qjson' '$(DESTDIR)$(LIB_DIR)'
	install -m 644 lua/qjson.lua '$(DESTDIR)$(LUA_DIR)/'
	install -m 644 lua/qjson/*.lua '$(DESTDIR)$(LUA_DIR)/qjson/'
	install -m 755 $(or $(QJSON_PREBUILT),$(LIB)) '$(DESTDIR)$(LIB_DIR)/libqjson.so'

# Binary rocks with a prebuilt libqjson.so (glibc 2.17 and later), for
# machines without Rust: target/rocks/qjson-<version>.linux-<arch>.rock.
.PHONY: rock
rock: deps
	tools/rock.sh

clean:
	cargo clean
