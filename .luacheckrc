std = "luajit"
max_line_length = 100

files["spec/"] = { std = "+busted" }
