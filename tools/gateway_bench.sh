#!/usr/bin/env bash
# Load test of examples/gateway: the same gateway policy with qjson and
# with lua-cjson (OpenResty's fork when tools/baselines.sh finds it), one
# after the other, each in its own nginx (one worker, loopback, bodies kept
# in memory), driven by wrk with two 1 MB chat requests: one whose model is
# routed (read, decoded, changed, re-encoded, proxied) and one that passes
# untouched (read, decoded, checked, proxied as received). The upstream
# runs in a separate nginx and only counts bytes. Two more runs measure
# what the JSON work is added to: "body" reads the body into Lua and does
# nothing else (the ceiling for any Lua JSON library), "proxy" has no
# access handler at all (plain proxy_pass).
#
# Then a streamed response: the upstream sends 200 chat.completion.chunk
# events and the gateway's body filter reads each event's delta and usage
# (qjson.sse, or a cjson.decode per event; "proxy": no filter), in events
# per second.
#
# The runs are paired as the Lua and native benchmarks pair theirs: every
# gateway runs at once, and each round runs wrk against each of them in
# turn (the order rotating from round to round), DURATION each; a req/s
# figure is the median of its rounds, and a ratio the median over the
# rounds of the two gateways' ratio in the same round, so that a slow
# spell of this shared machine slows both sides of a pair. (One run per
# gateway, 10 s each one after the other, put the routed row anywhere
# between 68% and 100% of the ceiling on the same code.)
#
# Usage: tools/gateway_bench.sh        (make bench-gateway)
# Environment: ROUNDS (default 5), DURATION (default 2s, per run and
#              round), CONNECTIONS (default 4), BODY_BYTES (default 1048576),
#              VARIANTS (default 256: distinct bodies sent in turn; wrk
#              holds them all, 256 MB at the default size).
# Prints req/s and p99 latency of each and the qjson/cjson and qjson/body
# ratios.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. tools/nginx-lib.sh

rounds=${ROUNDS:-5}
variants=${VARIANTS:-256}
duration=${DURATION:-2s}
connections=${CONNECTIONS:-4}
bytes=${BODY_BYTES:-1048576}

events=200
# OpenResty's lua-cjson fork, when there is a build of it.
baselines=$(tools/baselines.sh) || baselines=""
cjson_name="Debian's lua-cjson"
if [ -n "$baselines" ]; then
    cjson_name="OpenResty's lua-cjson fork"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/qjson-gateway-bench.XXXXXX")
codecs=(qjson qjson_str cjson body body_ptr proxy)
cleanup() {
    local codec
    for codec in "${codecs[@]}"; do nginx_stop "$work/$codec"; done
    nginx_stop "$work/upstream"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The requests, and the length of the body each gateway must forward for
# the routed one: qjson splices the routed model into the original bytes,
# cjson re-encodes the whole document (escaping every "/", among other
# differences). The untouched one arrives as sent.
luajit -e '
    package.path = "spec/?.lua;lua/?.lua;" .. package.path
    local cjson = require("cjson")
    local body = require("helper").chat_request('"$bytes"')
    local function write(name, text)
        local f = assert(io.open("'"$work"'/" .. name .. ".json", "wb"))
        f:write(text)
        f:close()
    end
    write("untouched", body)
    body = body:gsub("\"model\":\"gpt%-4o\"", "\"model\":\"gpt-4o-mini\"", 1)
    write("routed", body)
    local t = cjson.decode(body)
    t.model = "gpt-4o-mini-2024-07-18"
    io.write(#body + 11, " ", #cjson.encode(t), "\n")' >"$work/lengths"
read -r -a lengths <"$work/lengths"
size=$(stat -c %s "$work/untouched.json")
declare -A want=([routed-qjson]=${lengths[0]} [routed-qjson_str]=${lengths[0]} [routed-cjson]=${lengths[1]})
for codec in qjson qjson_str cjson body body_ptr proxy; do
    want[untouched-$codec]=$size
done
want[routed-body]=$(stat -c %s "$work/routed.json")
want[routed-proxy]=${want[routed-body]}
want[routed-body_ptr]=${want[routed-body]}
# wrk sends VARIANTS bodies in turn, each with other bytes at the start of
# its image (the same length, the same verdict), as a gateway's requests
# differ: a body sent again while its Lua string from an earlier request
# is still uncollected finds that string interned, where a new body costs
# LuaJIT a fresh allocation (about 0.7 ms for 1 MB here, mostly page
# faults: see "Encode in pieces" in docs/architecture.md). Strings outlive
# dozens of requests in a worker that allocates little else: with 32
# bodies the ceiling's worker found about half of them interned (420-445
# faults a request, against 585-600 with 256, where it finds none), a
# ceiling no gateway of distinct requests reaches.
cat >"$work/post.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
local body = f:read("*a")
f:close()
local DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local requests, sent = {}, 0
local function digit(d)
    return DIGITS:sub(d % 64 + 1, d % 64 + 1)
end
function init()
    for k = 0, tonumber(os.getenv("VARIANTS")) - 1 do
        local tag = digit(k) .. digit(math.floor(k / 64))
        local variant, found = body:gsub("base64,%+AAAAA", "base64," .. tag .. "AAAA", 1)
        assert(found == 1, "no image to vary in the body")
        requests[k + 1] = wrk.format(nil, nil, nil, variant)
    end
end
function request()
    sent = sent % #requests + 1
    return requests[sent]
end
EOF

# Fixed ports would collide with a parallel run; nginx_free_port is racy
# but a collision fails loudly here.
upstream_port=$(nginx_free_port)
mkdir -p "$work/upstream"
nginx_gateway_conf "$work/upstream" 0 "$upstream_port" 2m qjson false "paths.conf upstream.conf"
nginx_start "$work/upstream"

# Every gateway, started once and checked: each request's answer, and each
# stream's closing comment.
declare -A url
for codec in "${codecs[@]}"; do
    prefix="$work/$codec"
    mkdir -p "$prefix"
    port=$(nginx_free_port)
    nginx_gateway_conf "$prefix" "$port" "$upstream_port" 2m "$codec" false "paths.conf gateway.conf"
    if [ "$codec" = proxy ]; then
        sed -i -e '/access_by_lua_block/d' -e '/body_filter_by_lua_block/d' "$prefix/nginx.conf"
    fi
    if [ -n "$baselines" ]; then
        sed -i "s|lua_package_cpath \"|lua_package_cpath \"$baselines/?.so;|" "$prefix/nginx.conf"
    fi
    nginx_start "$prefix"
    for kind in untouched routed; do
        url[$kind-$codec]="http://127.0.0.1:$port/v1/chat/completions"
        got=$(curl -sS -H 'Expect:' --data-binary @"$work/$kind.json" "${url[$kind-$codec]}")
        if ! [[ $got == *"\"bytes\":${want[$kind-$codec]}"* ]]; then
            echo "gateway-bench: $kind-$codec answered $got, expected bytes ${want[$kind-$codec]}" >&2
            exit 1
        fi
    done
    if [ "$codec" != body ] && [ "$codec" != body_ptr ]; then
        url[stream-$codec]="http://127.0.0.1:$port/v1/stream?events=$events"
        got=$(curl -sS "${url[stream-$codec]}" | tail -c 200)
        if [ "$codec" != proxy ] && ! [[ $got == *": gateway events=$events "* ]]; then
            echo "gateway-bench: stream-$codec ended with $got, expected events=$events" >&2
            exit 1
        fi
    fi
done

# The minor page faults of the worker of the nginx in prefix $1 so far:
# a page of fresh memory faults when it is first written, which is most of
# what a new 1 MB string or body buffer costs.
worker_faults() {
    local worker
    worker=$(pgrep -P "$(cat "$1/nginx.pid")" | head -n 1)
    awk '{ print $10 }' "/proc/$worker/stat"
}

# One wrk run of $1 (kind-codec): appends its req/s, p99 (ms) and, for a
# request kind, its worker's page faults per request to the run's lists
# of rounds.
declare -A rps p99 faults
measure() {
    local run=$1 kind=${1%-*} codec=${1##*-} out errors before
    out="$work/$run.txt"
    if [ "$kind" = stream ]; then
        wrk -t1 -c"$connections" -d"$duration" --latency "${url[$run]}" >"$out"
    else
        before=$(worker_faults "$work/$codec")
        VARIANTS=$variants BODY_FILE="$work/$kind.json" wrk -t1 -c"$connections" -d"$duration" --latency \
            -s "$work/post.lua" "${url[$run]}" >"$out"
        faults[$run]+=" $(awk -v a="$before" -v b="$(worker_faults "$work/$codec")" \
            '/ requests in / { printf "%.1f", (b - a) / $1 }' "$out")"
    fi
    errors=$(grep -E 'Non-2xx|Socket errors' "$out" || true)
    if [ -n "$errors" ] && [ "$kind" != stream ]; then
        echo "gateway-bench: $run: $errors" >&2
        exit 1
    fi
    rps[$run]+=" $(awk '/^Requests\/sec:/ { print $2 }' "$out")"
    p99[$run]+=" $(awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
        print v * (u == "us" ? 0.001 : u == "s" ? 1000 : u == "m" ? 60000 : 1) }' "$out")"
}

for ((round = 0; round < rounds; round++)); do
    for kind in untouched routed stream; do
        if [ "$kind" = stream ]; then group=(qjson cjson proxy); else group=("${codecs[@]}"); fi
        for ((j = 0; j < ${#group[@]}; j++)); do
            measure "$kind-${group[(j + round) % ${#group[@]}]}"
        done
    done
    echo "gateway-bench: round $((round + 1)) of $rounds done" >&2
done

# median LIST: the median of space-separated numbers.
median() {
    tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 }
        END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# paired A B: the median over the rounds of run A's req/s over run B's.
paired() {
    median "$(awk -v a="${rps[$1]}" -v b="${rps[$2]}" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) printf "%s ", x[i] / y[i] }')"
}

echo
echo "nginx gateway, $size-byte chat requests ($variants distinct), 1 worker, $connections connections;"
# glibc's heap limits change what a new request body costs (docs/benchmarks.md,
# "Distinct bodies, and glibc's heap"): say which ones the nginx ran with.
echo "glibc malloc: ${GLIBC_TUNABLES:-default limits (GLIBC_TUNABLES not set)}"
echo "$rounds rounds of $duration per gateway, the gateways in turn; req/s and p99: medians of the rounds;"
echo "ratios: medians of each round's ratio"
echo "qjson: the body decoded where nginx keeps it (qjson.decode_body); qjson_str: from its Lua string"
echo "cjson: $cjson_name; body: the body read into a Lua string, no JSON; body_ptr: copied from"
echo "where nginx keeps it into a reused buffer, no JSON; proxy: no Lua at all"
echo "faults: the gateway worker's minor page faults per request (4 KB pages)"
printf '%-10s %-9s %12s %10s %8s\n' request gateway req/s p99 faults
for kind in untouched routed; do
    for codec in "${codecs[@]}"; do
        printf '%-10s %-9s %12.1f %8.2fms %8.1f\n' "$kind" "$codec" "$(median "${rps[$kind-$codec]}")" \
            "$(median "${p99[$kind-$codec]}")" "$(median "${faults[$kind-$codec]}")"
    done
    awk -v k="$kind" -v c="$(paired "$kind-qjson" "$kind-cjson")" -v b="$(paired "$kind-qjson" "$kind-body")" \
        -v s="$(paired "$kind-qjson_str" "$kind-body")" -v p="$(paired "$kind-qjson" "$kind-body_ptr")" \
        'BEGIN { printf "%s: qjson/cjson req/s %.1fx, qjson/body %.0f%%, qjson_str/body %.0f%%, qjson/body_ptr %.0f%%\n",
                 k, c, 100 * b, 100 * s, 100 * p }'
done
echo
echo "streamed responses of $events events, metered by the body filter"
printf '%-10s %-6s %12s %12s %10s\n' response gateway req/s events/s p99
for codec in qjson cjson proxy; do
    awk -v c="$codec" -v r="$(median "${rps[stream-$codec]}")" -v n="$events" -v p="$(median "${p99[stream-$codec]}")" \
        'BEGIN { printf "%-10s %-6s %12.1f %12.0f %8.2fms\n", "stream", c, r, r * n, p }'
done
awk -v q="$(paired stream-qjson stream-cjson)" 'BEGIN { printf "stream: qjson/cjson events/s %.1fx\n", q }'
