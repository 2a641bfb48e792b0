#!/usr/bin/env bash
# Load test of examples/gateway: the same gateway policy with qjson and
# with lua-cjson, one after the other, each in its own nginx (one worker,
# loopback, bodies kept in memory), driven by wrk with a 1 MB chat request
# whose model is routed, so each request is read, decoded, changed,
# re-encoded and proxied. The upstream runs in a separate nginx and only
# counts bytes. A third run, the same gateway with its access handler
# removed (plain proxy_pass), measures what the JSON work is added to.
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

work=$(mktemp -d "${TMPDIR:-/tmp}/qjson-gateway-bench.XXXXXX")
prefix=""
cleanup() {
    if [ -n "$prefix" ]; then nginx_stop "$prefix"; fi
    nginx_stop "$work/upstream"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The request, and the length of the body each gateway must forward:
# qjson splices the routed model into the original bytes, cjson re-encodes
# the whole document (escaping every "/", among other differences).
luajit -e '
    package.path = "spec/?.lua;lua/?.lua;" .. package.path
    local cjson = require("cjson")
    local body = require("helper").chat_request('"$bytes"')
    body = body:gsub("\"model\":\"gpt%-4o\"", "\"model\":\"gpt-4o-mini\"", 1)
    local f = assert(io.open("'"$work"'/body.json", "wb"))
    f:write(body)
    f:close()
    local t = cjson.decode(body)
    t.model = "gpt-4o-mini-2024-07-18"
    io.write(#body + 11, " ", #cjson.encode(t), "\n")' >"$work/lengths"
read -r -a lengths <"$work/lengths"
declare -A want=([qjson]=${lengths[0]} [cjson]=${lengths[1]} [proxy]=$(stat -c %s "$work/body.json"))
cat >"$work/post.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.body = f:read("*a")
f:close()
EOF
size=$(stat -c %s "$work/body.json")

# Fixed ports would collide with a parallel run; nginx_free_port is racy
# but a collision fails loudly here.
upstream_port=$(nginx_free_port)
mkdir -p "$work/upstream"
nginx_gateway_conf "$work/upstream" 0 "$upstream_port" 2m qjson false "paths.conf upstream.conf"
nginx_start "$work/upstream"

declare -A rps p99
for codec in qjson cjson proxy; do
    prefix="$work/$codec"
    mkdir -p "$prefix"
    port=$(nginx_free_port)
    nginx_gateway_conf "$prefix" "$port" "$upstream_port" 2m "$codec" false "paths.conf gateway.conf"
    if [ "$codec" = proxy ]; then
        sed -i '/access_by_lua_block/d' "$prefix/nginx.conf"
    fi
    nginx_start "$prefix"
    url="http://127.0.0.1:$port/v1/chat/completions"
    # Verify the answer before timing it.
    got=$(curl -sS -H 'Expect:' --data-binary @"$work/body.json" "$url")
    if ! [[ $got == *"\"bytes\":${want[$codec]}"* ]]; then
        echo "gateway-bench: $codec gateway answered $got, expected bytes ${want[$codec]}" >&2
        exit 1
    fi
    BODY_FILE="$work/body.json" wrk -t1 -c"$connections" -d"$duration" --latency \
        -s "$work/post.lua" "$url" | tee "$work/$codec.txt"
    rps[$codec]=$(awk '/^Requests\/sec:/ { print $2 }' "$work/$codec.txt")
    p99[$codec]=$(awk '$1 == "99%" { print $2 }' "$work/$codec.txt")
    errors=$(grep -E 'Non-2xx|Socket errors' "$work/$codec.txt" || true)
    if [ -n "$errors" ]; then
        echo "gateway-bench: $codec: $errors" >&2
        exit 1
    fi
    nginx_stop "$prefix"
    prefix=""
done

echo
echo "nginx gateway, $size-byte chat request (model routed), 1 worker, $connections connections, $duration each"
printf '%-6s %12s %10s\n' gateway req/s p99
for codec in qjson cjson proxy; do
    printf '%-6s %12s %10s\n' "$codec" "${rps[$codec]}" "${p99[$codec]}"
done
awk -v q="${rps[qjson]}" -v c="${rps[cjson]}" 'BEGIN { printf "qjson/cjson req/s: %.1fx\n", q / c }'
