#!/usr/bin/env bash
# Runs busted specs under valgrind memcheck with the JIT off, one process
# per spec file, TAP on stdout. Any memcheck error or definite leak makes
# that spec's run exit 99.
#
# Usage: tools/memcheck.sh [spec files...]   (default: every spec but the JIT's)
#
# - `luajit -joff`: memcheck follows the interpreter; machine code the JIT
#   writes at run time would only add noise. busted gets --ignore-lua so
#   it runs its specs in this process instead of re-executing itself.
# - LD_PRELOAD of libqjson.so: LuaJIT dlcloses libraries it loaded with
#   ffi.load when the state closes, before memcheck's leak scan; the pool
#   of parked documents, reachable only from the library's statics, would
#   then be reported as "definitely lost". Preloading keeps the library
#   mapped, so those blocks show as still reachable, which they are.
# - QJSON_MEMCHECK=1 makes spec/limits_spec.lua take its small samples.
# - tools/valgrind.supp: one suppression, for LuaJIT's own number
#   formatting (explained there).
set -uo pipefail
cd "$(dirname "$0")/.."

lib=$PWD/target/release/libqjson.so
busted=$(command -v busted)
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
    # All but jit_spec.lua, which asserts that code compiles: it cannot
    # hold with the JIT off.
    for spec in spec/*_spec.lua; do
        [ "$spec" = spec/jit_spec.lua ] || specs+=("$spec")
    done
fi

# valgrind cannot run AVX-512 (its CPUID reports none): pin the best
# kernel it can, whatever QJSON_KERNEL the caller set.
kernel=scalar
if grep -qw avx2 /proc/cpuinfo && grep -qw pclmulqdq /proc/cpuinfo; then
    kernel=avx2
fi

status=0
for spec in "${specs[@]}"; do
    echo "# memcheck: $spec (QJSON_KERNEL=$kernel)"
    QJSON_KERNEL=$kernel QJSON_MEMCHECK=1 LD_PRELOAD=$lib valgrind --tool=memcheck -q --error-exitcode=99 \
        --leak-check=full --errors-for-leak-kinds=definite \
        --suppressions=tools/valgrind.supp \
        luajit -joff "$busted" --ignore-lua -o TAP "$spec" || status=1
done
exit $status
