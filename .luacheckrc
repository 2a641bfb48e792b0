std = "luajit"
max_line_length = 100

files["spec/"] = { std = "+busted" }

-- The embedded realistic request keeps its natural line lengths.
files["benches/payloads.lua"] = { ignore = { "631" } }

-- Code that runs inside nginx; run.lua is a tools/nginx-lua script, which
-- provides exit().
files["tools/nginx/"] = { std = "+ngx_lua" }
files["spec/nginx/"] = { std = "+busted+ngx_lua" }
files["spec/nginx/run.lua"] = { read_globals = { "exit" } }
files["examples/gateway/"] = { std = "+ngx_lua" }
files["benches/gateway_steps.lua"] = { std = "+ngx_lua" }
