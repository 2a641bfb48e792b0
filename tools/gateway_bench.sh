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
# Usage: tools/gateway_bench.sh        (make bench-gateway)
# Environment: DURATION (default 10s), CONNECTIONS (default 4),
#              BODY_BYTES (default 1048576).
# Prints req/s and p99 latency of each and the qjson/cjson ratio.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
. tools/nginx-lib.sh

duration=${DURATION:-10s}
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
prefix=""
cleanup() {
    if [ -n "$prefix" ]; then nginx_stop "$prefix"; fi
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
declare -A want=([routed-qjson]=${lengths[0]} [routed-cjson]=${lengths[1]})
for codec in qjson cjson body proxy; do
    want[untouched-$codec]=$size
done
want[routed-body]=$(stat -c %s "$work/routed.json")
want[routed-proxy]=${want[routed-body]}
cat >"$work/post.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.body = f:read("*a")
f:close()
EOF

# Fixed ports would collide with a parallel run; nginx_free_port is racy
# but a collision fails loudly here.
upstream_port=$(nginx_free_port)
mkdir -p "$work/upstream"
nginx_gateway_conf "$work/upstream" 0 "$upstream_port" 2m qjson false "paths.conf upstream.conf"
nginx_start "$work/upstream"

declare -A rps p99
for codec in qjson cjson body proxy; do
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
    url="http://127.0.0.1:$port/v1/chat/completions"
    for kind in untouched routed; do
        run=$kind-$codec
        # Verify the answer before timing it.
        got=$(curl -sS -H 'Expect:' --data-binary @"$work/$kind.json" "$url")
        if ! [[ $got == *"\"bytes\":${want[$run]}"* ]]; then
            echo "gateway-bench: $run answered $got, expected bytes ${want[$run]}" >&2
            exit 1
        fi
        BODY_FILE="$work/$kind.json" wrk -t1 -c"$connections" -d"$duration" --latency \
            -s "$work/post.lua" "$url" | tee "$work/$run.txt"
        rps[$run]=$(awk '/^Requests\/sec:/ { print $2 }' "$work/$run.txt")
        p99[$run]=$(awk '$1 == "99%" { print $2 }' "$work/$run.txt")
        errors=$(grep -E 'Non-2xx|Socket errors' "$work/$run.txt" || true)
        if [ -n "$errors" ]; then
            echo "gateway-bench: $run: $errors" >&2
            exit 1
        fi
    done
    if [ "$codec" != body ]; then
        run=stream-$codec
        url="http://127.0.0.1:$port/v1/stream?events=$events"
        got=$(curl -sS "$url" | tail -c 200)
        if [ "$codec" != proxy ] && ! [[ $got == *": gateway events=$events "* ]]; then
            echo "gateway-bench: $run ended with $got, expected events=$events" >&2
            exit 1
        fi
        wrk -t1 -c"$connections" -d"$duration" --latency "$url" | tee "$work/$run.txt"
        rps[$run]=$(awk '/^Requests\/sec:/ { print $2 }' "$work/$run.txt")
        p99[$run]=$(awk '$1 == "99%" { print $2 }' "$work/$run.txt")
    fi
    nginx_stop "$prefix"
    prefix=""
done

echo
echo "nginx gateway, $size-byte chat requests, 1 worker, $connections connections, $duration each;"
echo "cjson: $cjson_name; body: the body read into Lua, no JSON; proxy: no Lua at all"
printf '%-10s %-6s %12s %10s\n' request gateway req/s p99
for kind in untouched routed; do
    for codec in qjson cjson body proxy; do
        printf '%-10s %-6s %12s %10s\n' "$kind" "$codec" "${rps[$kind-$codec]}" "${p99[$kind-$codec]}"
    done
    awk -v k="$kind" -v q="${rps[$kind-qjson]}" -v c="${rps[$kind-cjson]}" -v b="${rps[$kind-body]}" \
        'BEGIN { printf "%s: qjson/cjson req/s %.1fx, qjson/body %.0f%%\n", k, q / c, 100 * q / b }'
done
echo
echo "streamed responses of $events events, metered by the body filter"
printf '%-10s %-6s %12s %12s %10s\n' response gateway req/s events/s p99
for codec in qjson cjson proxy; do
    awk -v c="$codec" -v r="${rps[stream-$codec]}" -v n="$events" -v p="${p99[stream-$codec]}" \
        'BEGIN { printf "%-10s %-6s %12s %12.0f %10s\n", "stream", c, r, r * n, p }'
done
awk -v q="${rps[stream-qjson]}" -v c="${rps[stream-cjson]}" \
    'BEGIN { printf "stream: qjson/cjson events/s %.1fx\n", q / c }'
