std = "luajit"
max_line_length = 100

files["spec/"] = { std = "+busted" }

-- The embedded realistic request keeps its natural line lengths.
files["benches/payloads.lua"] = { ignore = { "631" } }
