# qjson: the two commands that do everything on a fresh machine are
#   make test    install what is missing, build, run every test and lint
#   make bench   install what is missing, build, run the benchmarks
export PATH := $(HOME)/.cargo/bin:$(PATH)
# The shared JSONTestSuite and corpus files (override with QJSON_DATA=...).
export QJSON_DATA ?= $(abspath $(firstword $(wildcard ../shared/data /work/shared/data)))

LIB := target/release/libqjson.so

.PHONY: all build deps deps-bench test bench clean

all: build

deps:
	tools/deps.sh test

deps-bench:
	tools/deps.sh bench

build: deps
	cargo build --release --quiet

$(LIB): build

test: build
	tools/test.sh

bench: deps-bench build
	tools/bench.sh

clean:
	cargo clean
