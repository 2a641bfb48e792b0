#!/usr/bin/env bash
# `make sanitize`: the Rust tests under AddressSanitizer, once per kernel
# this CPU runs, then the unit tests under Miri (which runs the scalar
# kernel only: it has no SIMD intrinsics, and reports no AVX2, so the
# kernel loops of the tests skip avx2 by themselves). Installs the nightly
# toolchain, rust-src and Miri if they are missing. Each tool builds into
# its own target directory so the release library `make test` uses is
# left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
rustup component add --toolchain nightly rust-src miri

kernels=(scalar)
if grep -qw avx2 /proc/cpuinfo && grep -qw pclmulqdq /proc/cpuinfo; then
    kernels+=(avx2)
fi
host=$(rustc -vV | awk '/^host:/ { print $2 }')

for k in "${kernels[@]}"; do
    echo "sanitize: AddressSanitizer, QJSON_KERNEL=$k"
    # Debug build: overflow checks and debug assertions on as well.
    QJSON_KERNEL=$k RUSTFLAGS="-Zsanitizer=address" ASAN_OPTIONS=detect_leaks=1 \
        cargo +nightly test --quiet --target "$host" --target-dir target/asan --lib --tests
done

echo "sanitize: Miri (scalar kernel)"
MIRIFLAGS="-Zmiri-strict-provenance" cargo +nightly miri test --quiet --lib
echo "sanitize: no finding"
