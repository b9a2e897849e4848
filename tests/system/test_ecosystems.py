"""The built-in default's ecosystems with the real toolchains of Debian's
packages (contrib/install-deps): Rust (cargo), Go, Python (venv and
pytest; mypy where it is configured), Node.js (npm), CMake and make,
each a sample project with a dependency that needs no network (vendored
crates, a vendored Go module, a package in the venv, one in
node_modules).

For each: gbrd chose the ecosystem (env.show), its default check passes
on the fresh project through tool.call, a broken file makes it fail with
the file named in its diagnostics, the fixed file makes it pass again;
search finds the dependency's source in the knowledge base the prompt
names; the package managers' caches land in gbr's folder and not in the
user's; and an agent turn against the fake model gets the check's errors
back and ends completed once its fix passes.

gbrd's PATH is pinned to the system folders: these are Debian's
toolchains, whatever else this machine has on its PATH.
"""
import glob
import json
import os
import shutil
import subprocess
import time

import pytest

from fakellm import FakeLLM

PATH = "/usr/local/bin:/usr/bin:/bin"
KEY = "sk-gbr-TEST-eco-7d1f"


def need(*tools):
    for t in tools:
        if shutil.which(t, path=PATH) is None:
            pytest.skip("%s is not installed (contrib/install-deps)" % t)


def write(ws, rel, text, mode=0o644):
    p = os.path.join(ws, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)


def rust(ws):
    need("cargo", "rustc")
    write(ws, "Cargo.toml", '[package]\nname = "app"\nversion = "0.1.0"\n'
          'edition = "2021"\n\n[dependencies]\ntinydep = "0.1"\n')
    write(ws, ".cargo/config.toml", '[source.crates-io]\nreplace-with = "vendored"\n\n'
          '[source.vendored]\ndirectory = "vendor"\n')
    write(ws, "vendor/tinydep/Cargo.toml", '[package]\nname = "tinydep"\n'
          'version = "0.1.0"\nedition = "2021"\n')
    write(ws, "vendor/tinydep/src/lib.rs",
          "/// Upper-cases a word.\npub fn shout_it(s: &str) -> String { s.to_uppercase() }\n")
    write(ws, "vendor/tinydep/.cargo-checksum.json", '{"files":{},"package":"%s"}' % ("0" * 64))
    good = 'fn main() {\n    println!("{}", tinydep::shout_it("hi"));\n}\n'
    bad = 'fn main() {\n    println!("{}", tinydep::shout_it(42));\n}\n'
    return dict(check="cargo check", file="src/main.rs", good=good, bad=bad,
                api="pub fn shout_it", kb="vendor")


def go(ws):
    need("go")
    write(ws, "go.mod", "module example.com/app\n\ngo 1.19\n\nrequire example.com/greet v0.0.0\n\n"
          "replace example.com/greet => ./greet\n")
    write(ws, "greet/go.mod", "module example.com/greet\n\ngo 1.19\n")
    write(ws, "greet/greet.go", 'package greet\n\n// HelloTo greets.\n'
          'func HelloTo(name string) string { return "hello " + name }\n')
    good = 'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/greet"\n)\n\n' \
           'func main() { fmt.Println(greet.HelloTo("x")) }\n'
    write(ws, "main.go", good)
    env = dict(PATH=PATH, HOME=ws + "/.gohome", GOCACHE=ws + "/.gohome/c", GOPROXY="off",
               GOFLAGS="-mod=mod", GOPATH=ws + "/.gohome/p")
    subprocess.run(["go", "mod", "vendor"], cwd=ws, env=env, check=True,
                   capture_output=True)
    shutil.rmtree(ws + "/.gohome", ignore_errors=True)
    os.unlink(os.path.join(ws, "main.go"))
    bad = good.replace('HelloTo("x")', "HelloTo(42)")
    return dict(check="go vet ./...", file="main.go", good=good, bad=bad,
                api="func HelloTo", kb="vendor")


def python(ws):
    need("python3")
    r = subprocess.run(["/usr/bin/python3", "-c", "import pytest"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("Debian's pytest is not installed")
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip",
                    "--system-site-packages", os.path.join(ws, ".venv")], check=True)
    site = glob.glob(os.path.join(ws, ".venv/lib/python3*/site-packages"))[0]
    write(ws, os.path.relpath(os.path.join(site, "tinylib/__init__.py"), ws),
          "def shout_it(s):\n    \"\"\"Upper-cases a word.\"\"\"\n    return s.upper()\n")
    write(ws, "pyproject.toml", '[project]\nname = "app"\nversion = "0.1.0"\n')
    write(ws, "tests/test_app.py", "import app\n\n\ndef test_shout():\n"
          "    assert app.loud('hi') == 'HI'\n")
    write(ws, "tests/conftest.py", "import os, sys\n"
          "sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n")
    good = "import tinylib\n\n\ndef loud(s):\n    return tinylib.shout_it(s)\n"
    bad = "import tinylib\n\n\ndef loud(s):\n    return tinylib.shout_it(s) + 1\n"
    return dict(check=".venv/bin/python -m pytest -q", file="app.py", good=good, bad=bad,
                api="def shout_it", kb=".venv")


def python_mypy(ws):
    """A typed project without tests: mypy, as configured, is the check."""
    need("python3")
    r = subprocess.run(["/usr/bin/python3", "-m", "mypy", "--version"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("Debian's mypy is not installed")
    write(ws, "pyproject.toml", '[project]\nname = "app"\nversion = "0.1.0"\n\n'
          '[tool.mypy]\nstrict = true\n')
    good = "def loud(s: str) -> str:\n    return s.upper()\n"
    bad = "def loud(s: str) -> int:\n    return s.upper()\n"
    # The same size as good, written within a second of the last check:
    # mypy's incremental cache would take it for unchanged.
    return dict(check="python3 -m mypy --no-incremental .", file="app.py", good=good, bad=bad,
                api=None, kb=None)


def node(ws):
    need("node", "npm")
    write(ws, "package.json", json.dumps({
        "name": "app", "version": "1.0.0", "private": True,
        "scripts": {"test": "node --test"},
        "dependencies": {"tinydep": "1.0.0"}}, indent=2))
    write(ws, "node_modules/tinydep/package.json",
          json.dumps({"name": "tinydep", "version": "1.0.0", "main": "index.js"}))
    write(ws, "node_modules/tinydep/index.js",
          "// Upper-cases a word.\nexports.shoutIt = function shoutIt(s) { return s.toUpperCase(); };\n")
    write(ws, "test/app.test.js", "const test = require('node:test');\n"
          "const assert = require('node:assert');\nconst app = require('../app');\n"
          "test('loud', () => { assert.strictEqual(app.loud('hi'), 'HI'); });\n")
    good = "const t = require('tinydep');\nexports.loud = (s) => t.shoutIt(s);\n"
    bad = "const t = require('tinydep');\nexports.loud = (s) => t.shoutIt(s) + '!';\n"
    # node --test names the test that failed, not the module.
    return dict(check="npm test", file="app.js", good=good, bad=bad,
                api="function shoutIt", kb="node_modules", diag="app.test.js")


C_GOOD = "#include <stdio.h>\n\nint\nmain(void)\n{\n\tputs(\"hi\");\n\treturn 0;\n}\n"
C_BAD = "#include <stdio.h>\n\nint\nmain(void)\n{\n\tputs(\"hi\")\n\treturn 0;\n}\n"


def cmake(ws):
    need("cmake", "cc", "make")
    write(ws, "CMakeLists.txt", "cmake_minimum_required(VERSION 3.13)\nproject(app C)\n"
          "add_executable(app main.c)\n")
    return dict(check="sh -c 'cmake -S . -B build && cmake --build build'", file="main.c",
                good=C_GOOD, bad=C_BAD, api=None, kb=None)


def make(ws):
    need("cc", "make")
    write(ws, "Makefile", "app: main.c\n\tcc -Wall -o app main.c\n")
    return dict(check="make", file="main.c", good=C_GOOD, bad=C_BAD, api=None, kb=None)


ECOS = {"rust": rust, "go": go, "python": python, "python-mypy": python_mypy,
        "node": node, "cmake": cmake, "make": make}


@pytest.fixture(params=sorted(ECOS))
def eco(request):
    return request.param


def project(tmp, eco):
    ws = os.path.join(tmp, "ws-" + eco)
    os.makedirs(ws)
    spec = ECOS[eco](ws)
    write(ws, spec["file"], spec["good"])
    return os.path.realpath(ws), spec


OFFLINE = {"GOPROXY": "off", "GOFLAGS": "-mod=vendor", "CARGO_NET_OFFLINE": "true"}
PASS = "[exec]\npass_env = GOFLAGS, GOPROXY, CARGO_NET_OFFLINE\n"


def start(make_daemon):
    return make_daemon(config=PASS, env=dict(OFFLINE, PATH=PATH))


def check(c, sid):
    r = c.call("tool.call", {"session": sid, "tool": "check", "args": {}})
    assert "result" in r, r
    return r["result"]["result"]


def test_the_default_check_passes_fails_and_passes_again(make_daemon, tmp_path, eco):
    ws, spec = project(str(tmp_path), eco)
    d = start(make_daemon)
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    shown = c.call("env.show", {"session": sid})["result"]
    assert shown["ecosystem"] == eco.split("-")[0], shown
    assert shown["check_command"] == spec["check"], shown
    res = check(c, sid)
    assert res["exit_code"] == 0, (eco, res.get("stdout", "")[-3000:], res.get("stderr", "")[-3000:])
    write(ws, spec["file"], spec["bad"])
    res = check(c, sid)
    assert res["exit_code"] != 0, res
    files = [os.path.basename(x["file"]) for x in res.get("diagnostics", [])]
    assert spec.get("diag", os.path.basename(spec["file"])) in files, (eco, res.get("diagnostics"),
                                                      res.get("stdout", "")[-2000:],
                                                      res.get("stderr", "")[-2000:])
    write(ws, spec["file"], spec["good"])
    res = check(c, sid)
    assert res["exit_code"] == 0, (eco, res.get("stderr", "")[-3000:])
    # The agent's caches are gbr's, never the user's.
    base = os.path.join(d.env["XDG_CACHE_HOME"], "gbr-agent")
    assert glob.glob(os.path.join(base, "*", "cargo")), base
    if eco == "go":
        built = glob.glob(os.path.join(base, "*", "go", "build", "*"))
        assert built, "go's build cache is not in gbr's folder"
    # The knowledge base: the prompt names it, search finds the API in it.
    if spec["kb"] is not None:
        assert spec["kb"] in shown["prompt"]["system"], shown["prompt"]["system"]
        r = c.call("tool.call", {"session": sid, "tool": "search", "args": {
            "pattern": spec["api"], "path": spec["kb"]}})
        assert "result" in r, r
        hits = r["result"]["result"]["matches"]
        assert hits and spec["api"] in hits[0]["text"], r


def test_the_default_of_a_rust_project_reads_the_registry(make_daemon, tmp_path):
    ws, spec = project(str(tmp_path), "rust")
    d = start(make_daemon)
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    shown = c.call("env.show", {"session": sid})["result"]
    base = os.path.realpath(os.path.join(d.env["XDG_CACHE_HOME"], "gbr-agent"))
    roots = [r for r in shown["read_only_roots"] if r.startswith(base)]
    assert len(roots) == 1 and roots[0].endswith("/cargo/registry/src"), shown
    assert roots[0] in shown["prompt"]["system"]
    # A crate the agent's cargo unpacked is found there by search.
    res = c.call("tool.call", {"session": sid, "tool": "run_command", "args": {"argv": [
        "sh", "-c", 'mkdir -p "$CARGO_HOME/registry/src/index-1/fetched-1.0.0/src" && '
        'echo "pub fn fetched_api() {}" > "$CARGO_HOME/registry/src/index-1/fetched-1.0.0/src/lib.rs"']}})
    assert res["result"]["result"]["exit_code"] == 0, res
    r = c.call("tool.call", {"session": sid, "tool": "search", "args": {
        "pattern": "pub fn fetched_api", "path": roots[0]}})
    assert r["result"]["result"]["matches"], r
    # The file tools may not write there.
    r = c.call("tool.call", {"session": sid, "tool": "write_file", "args": {
        "path": roots[0] + "/index-1/x.rs", "content": "x"}})
    assert "error" in r, r


def test_a_one_line_override_keeps_the_other_defaults(make_daemon, tmp_path):
    ws, spec = project(str(tmp_path), "make")
    write(ws, ".gbr_envs/default.ini", "[env]\nextends = builtin\ncheck_command = make -s app\n")
    d = start(make_daemon)
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    shown = c.call("env.show", {"session": sid})["result"]
    assert shown["check_command"] == "make -s app" and shown["ecosystem"] == "make", shown
    assert ".git/**" in shown["protected_files"], shown
    assert "git commit *" in shown["ask_commands"], shown
    assert check(c, sid)["exit_code"] == 0


def agent_turn(make_daemon, fake, ws, spec):
    d = make_daemon(config="[llm]\nprovider = openai\nbase_url = %s\nollama_url = off\n"
                    % fake.base_url("openai") + PASS,
                    env=dict(OFFLINE, PATH=PATH, OPENAI_API_KEY=KEY))
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    c.call("session.attach", {"session": sid})
    fake.push({"tool_calls": [{"name": "write_file", "args": {
                  "path": spec["file"], "content": spec["bad"]}}]},
              {"text": "written"},
              {"tool_calls": [{"name": "write_file", "args": {
                  "path": spec["file"], "content": spec["good"]}}]},
              {"text": "fixed"})
    r = c.call("session.send", {"session": sid, "text": "change it"})
    turn = r["result"]["turn"]
    deadline = time.time() + 300
    end = None
    while end is None:
        left = deadline - time.time()
        assert left > 0, "the turn did not end"
        c.sock.settimeout(left)
        m = c.recv()
        p = m.get("params") or {}
        if m.get("method") == "event" and p.get("type") == "session.state" and \
                p.get("turn") == turn and p["state"] not in ("running", "awaiting_approval"):
            end = p
        elif m.get("method") == "event":
            c.events.append(m)
    return d, c, end


@pytest.mark.parametrize("which", ["rust", "go", "python", "node", "cmake", "make"])
def test_an_agent_turn_gets_the_errors_and_its_fix_passes(make_daemon, tmp_path, which):
    ws, spec = project(str(tmp_path), which)
    fake = FakeLLM()
    try:
        d, c, end = agent_turn(make_daemon, fake, ws, spec)
        assert end["outcome"] == "completed" and end["check"] == {"ok": True, "runs": 2}, end
        checks = [m["params"] for m in c.events if m["params"].get("type") == "check.result"]
        assert [p["ok"] for p in checks] == [False, True], checks
        # The failing check's errors were in the model's next request.
        reqs = fake.llm_requests()
        fed = [u for u in reqs[2].user_texts() if "check command" in u]
        assert fed and spec.get("diag", os.path.basename(spec["file"])) in fed[0], fed
        # Nothing of npm's or pip's calls home reached the model.
        assert "npm notice" not in fed[0], fed
        # The prompt the model got names the ecosystem and the check.
        assert spec["check"] in reqs[0].system(), reqs[0].system()
    finally:
        fake.close()


def test_a_project_made_after_the_session_is_seen(make_daemon, tmp_path):
    """The default's choice is watched: a Cargo.toml that appears in the
    workspace of an open session makes it a Rust session."""
    ws = os.path.realpath(str(tmp_path / "later"))
    os.makedirs(ws)
    d = start(make_daemon)
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    assert c.call("env.show", {"session": sid})["result"]["ecosystem"] is None
    write(ws, "Cargo.toml", '[package]\nname = "later"\nversion = "0.1.0"\n')
    deadline = time.time() + 15
    shown = None
    while time.time() < deadline:
        shown = d.conn().call("env.show", {"session": sid})["result"]
        if shown["ecosystem"] == "rust":
            break
        time.sleep(0.1)
    assert shown["ecosystem"] == "rust" and shown["check_command"] == "cargo check", shown
