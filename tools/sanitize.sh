#!/usr/bin/env bash
# `make sanitize`: the Rust tests under AddressSanitizer, once per kernel
# this CPU runs, then the unit tests under Miri (which runs the scalar
# kernel only: Miri reports no AVX2, so the kernel loops of the tests skip
# avx2 and avx512 by themselves), then the kernel oracle tests under Miri
# again with the SIMD kernels' features enabled, so that they run too.
# Installs the nightly toolchain, rust-src and Miri if they are missing.
# Each tool builds into its own target directory so the release library
# `make test` uses is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
rustup component add --toolchain nightly rust-src miri

has_flags() {
    local flag
    for flag in "$@"; do
        grep -qw "$flag" /proc/cpuinfo || return 1
    done
}
kernels=(scalar)
if has_flags avx2 pclmulqdq popcnt bmi1; then
    kernels+=(avx2)
fi
if has_flags avx512f avx512bw avx512vbmi avx512_vbmi2 pclmulqdq popcnt bmi1; then
    kernels+=(avx512)
fi
host=$(rustc -vV | awk '/^host:/ { print $2 }')

for k in "${kernels[@]}"; do
    echo "sanitize: AddressSanitizer, QJSON_KERNEL=$k"
    # Debug build: overflow checks and debug assertions on as well.
    QJSON_KERNEL=$k RUSTFLAGS="-Zsanitizer=address" ASAN_OPTIONS=detect_leaks=1 \
        cargo +nightly test --quiet --target "$host" --target-dir target/asan --lib --tests
done

# Miri interprets every step, about a million times slower than native:
# the exhaustive and randomized sweeps below would take hours, so Miri
# runs every other unit test (the guard-page tests are ignored under Miri,
# which cannot mprotect) and the sweeps run under AddressSanitizer above.
sweeps=(
    every_byte_in_every_position_and_room random_text_matches_the_reference
    every_three_byte_sequence_inside_a_string inputs_of_4_gib_are_rejected_before_reading
    multibyte_characters_at_every_offset
    quotes_and_backslash_runs_at_every_offset_around_block_boundaries
    random_json_matches_the_oracle random_texts_match_the_oracle
    tables_agree_with_core_on_every_sequence_of_up_to_three_bytes
    tables_agree_with_core_on_four_byte_sequences
    verdicts_match_the_reference_on_mutated_documents depth_verdicts_match_the_reference
    nesting_limit_is_exact_and_configurable integers_are_exact_across_the_whole_range
    garbage_never_panics comparison_without_decoding_agrees_with_decoding
    escaped_bits_on_random_masks escaped_bits_matches_naive_on_backslash_runs_across_blocks
    doubles_round_correctly sequential_and_random_element_access_agree
    classes_are_exact_for_every_byte_in_every_lane specials_at_every_offset_of_a_long_string
    specials_in_long_non_ascii_text an_escape_carried_into_a_skipped_block
    long_texts_across_runs_and_a_tail_after_a_full_run blocks_of_every_density
    the_window_agrees_with_the_byte_reader
    errors_match_the_reference_on_mutated_documents
    frees_documents_that_hold_much_memory plain_numbers_are_whole_numbers
    any_bytes_as_the_parser_reads_them dyadic_values_round_exactly
    near_halfway_between_doubles numbers_are_checked_alike_at_every_length
    every_way_of_checking_finds_the_first_repeat
    agrees_with_validation_on_generated_and_mutated_texts
    strings_of_every_length_around_the_simd_check_agree_on_utf8
    escapes_agree_with_validation_at_every_offset_around_the_chunks
    runs_of_escapes_decode_as_validation_and_reads_do long_strings_end_where_validation_ends_them
    keys_chosen_to_collide_cost_linear_work
    blocks_decode_as_one_at_a_time an_escape_at_every_offset_of_a_block
    runs_escaped_throughout_decode_by_groups_and_blocks
)
skip=()
for t in "${sweeps[@]}"; do skip+=(--skip "$t"); done
echo "sanitize: Miri (scalar kernel)"
MIRIFLAGS="-Zmiri-strict-provenance" cargo +nightly miri test --lib -- "${skip[@]}"

# Miri also runs the SIMD kernels, emulating their instructions, when
# their target features are enabled at compile time (is_x86_feature_detected!
# is then true at once): this is how the avx512 kernel runs on a CPU
# without AVX-512. Oracle tests that compare every kernel with the
# byte-at-a-time reference, a few minutes under Miri.
simd_features=+avx2,+pclmulqdq,+popcnt,+bmi1,+avx512f,+avx512bw,+avx512vbmi,+avx512vbmi2
echo "sanitize: Miri, the avx2 and avx512 kernels emulated ($simd_features)"
RUSTFLAGS="-C target-feature=$simd_features" MIRIFLAGS="-Zmiri-strict-provenance" \
    CARGO_TARGET_DIR=target/miri-simd cargo +nightly miri test --lib -- --exact \
    scan::tests::the_machine_runs_a_simd_kernel_when_it_has_one scan::tests::small_documents \
    scan::tests::random_texts_match_the_oracle scan::tests::random_json_matches_the_oracle \
    scan::tests::blocks_of_every_density
echo "sanitize: no finding"
