# Shell functions shared by the scripts that run Debian's nginx with the Lua
# module (tools/nginx-lua, tools/gateway-test, tools/gateway_bench.sh).
# Source it; it defines functions only.
#
# Every nginx started here lives in its own prefix directory: config, pid
# file, error log and all five *_temp_path directories are under it, it
# listens on 127.0.0.1 only, and nginx_stop ends it through its pid file.

# The load_module lines for the Lua module. Debian builds it against the NDK
# module, which must be loaded first. NGINX_MODULES overrides the directory.
nginx_load_modules() {
    local dir=${NGINX_MODULES:-/usr/lib/nginx/modules} mod
    for mod in ndk_http_module ngx_http_lua_module; do
        if [ ! -f "$dir/$mod.so" ]; then
            echo "nginx: $dir/$mod.so not found (apt-get install libnginx-mod-http-lua)" >&2
            return 1
        fi
        echo "load_module $dir/$mod.so;"
    done
}

# Main-context directives that keep nginx inside PREFIX. A root master
# would hand the worker to "nobody", which cannot read a build tree under
# /root; the worker keeps the caller's identity instead. nginx clears the
# environment of its workers; QJSON_* variables are passed through.
nginx_main_conf() {
    local prefix=$1 name
    nginx_load_modules || return 1
    echo "pid $prefix/nginx.pid;"
    echo "error_log $prefix/error.log ${NGINX_LOG_LEVEL:-warn};"
    if [ "$(id -u)" -eq 0 ]; then
        echo "user root;"
    fi
    for name in $(compgen -e | grep "^QJSON_"); do
        echo "env $name;"
    done
}

# http-context temp paths under PREFIX: nginx's compiled-in ones are under
# /var/lib/nginx, which a test must not touch.
nginx_temp_conf() {
    local prefix=$1 kind
    for kind in client_body proxy fastcgi uwsgi scgi; do
        echo "${kind}_temp_path $prefix/tmp/$kind;"
    done
    echo "access_log off;"
}

# A TCP port on 127.0.0.1 that nothing listens on right now. Another process
# may still take it first; nginx_start reports that so callers can retry.
nginx_free_port() {
    local port
    while :; do
        port=$((20000 + RANDOM % 40000))
        if ! ss -Htln "sport = :$port" | grep -q .; then
            echo "$port"
            return
        fi
    done
}

# nginx_start PREFIX: starts nginx with PREFIX/nginx.conf in the background
# (the config says "daemon off" so the worker's stdout and stderr stay the
# caller's) and waits until its pid file exists. Returns 2 when a port was
# taken (pick new ports and retry), 1 on any other failure.
nginx_start() {
    local prefix=$1 i
    mkdir -p "$prefix/tmp"
    rm -f "$prefix/nginx.pid"
    : >"$prefix/error.log"
    nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" &
    local pid=$!
    for i in $(seq 1 100); do
        if [ -s "$prefix/nginx.pid" ]; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            if grep -q 'Address already in use' "$prefix/error.log"; then
                return 2
            fi
            echo "nginx did not start:" >&2
            cat "$prefix/error.log" >&2
            return 1
        fi
        sleep 0.05
    done
    echo "nginx wrote no pid file in 5 s" >&2
    return 1
}

# nginx_stop PREFIX: asks the nginx whose pid file is in PREFIX to stop,
# waits up to 5 s, then kills it. Safe to call when nothing runs.
nginx_stop() {
    local prefix=$1 pid i
    [ -s "$prefix/nginx.pid" ] || return 0
    pid=$(cat "$prefix/nginx.pid")
    kill -QUIT "$pid" 2>/dev/null || return 0
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    return 0
}

# nginx_gateway_conf PREFIX PORT UPSTREAM_PORT BODY_BUFFER CODEC HASH [PARTS]:
# writes PREFIX/nginx.conf running examples/gateway with one worker; see
# gateway.conf for what each argument sets. PARTS: the files of
# examples/gateway/ to include (default "paths.conf gateway.conf upstream.conf").
nginx_gateway_conf() {
    local prefix=$1 port=$2 upstream_port=$3 buffer=$4 codec=$5 hash=$6
    local parts=${7:-paths.conf gateway.conf upstream.conf} repo part
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    {
        nginx_main_conf "$prefix" || return 1
        echo "daemon off;"
        echo "worker_processes 1;"
        echo "events { worker_connections 1024; }"
        echo "http {"
        nginx_temp_conf "$prefix"
        for part in $parts; do
            cat "$repo/examples/gateway/$part"
        done
        echo "}"
    } | sed -e "s|@REPO@|$repo|g" -e "s|@PORT@|$port|g" -e "s|@UPSTREAM_PORT@|$upstream_port|g" \
            -e "s|@BODY_BUFFER@|$buffer|g" -e "s|@CODEC@|$codec|g" -e "s|@UPSTREAM_HASH@|$hash|g" \
            >"$prefix/nginx.conf"
}

# nginx_gateway_start PREFIX BODY_BUFFER CODEC HASH: picks two free ports,
# writes the config and starts it, retrying when a port was taken. Sets
# GATEWAY_PORT and UPSTREAM_PORT.
nginx_gateway_start() {
    local prefix=$1 attempt rc
    for attempt in 1 2 3 4 5; do
        GATEWAY_PORT=$(nginx_free_port)
        UPSTREAM_PORT=$(nginx_free_port)
        [ "$GATEWAY_PORT" != "$UPSTREAM_PORT" ] || continue
        nginx_gateway_conf "$prefix" "$GATEWAY_PORT" "$UPSTREAM_PORT" "$2" "$3" "$4" || return 1
        nginx_start "$prefix"
        rc=$?
        [ "$rc" -eq 2 ] || return "$rc"
    done
    echo "nginx: no free ports after $attempt tries" >&2
    return 1
}
