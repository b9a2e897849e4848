"""System tests of the runner: real children under real limits.

Most calls go through tests/runner-driver, which runs the run tools on its
own event loop exactly as gbrd does and prints each call's JSON-RPC
response (it was written before tool.call was wired, and it lets a test
choose gbrd.conf and kill the runner's process cheaply). Every such test
goes through run_tool() and looks only at the response (result, or
error.data.kind), so pointing them at tool.call means rewriting run_tool()
and the few helpers marked "driver-only". The test_gbrd_* and
test_gbrctl_run tests at the end go through gbrd itself.

Processes a test starts carry a unique marker in their argument vector
(sleep's duration), so a test can tell that none of its own survived
without looking at anyone else's.
"""
import json
import os
import signal
import socket
import subprocess
import time
import uuid

import pytest

from conftest import BUILD

DRIVER = os.path.join(BUILD, "tests", "runner-driver")
GBR_EXEC = os.path.join(BUILD, "gbr-exec")
SECRETS = {"GEMINI_API_KEY": "gem-secret-1", "OPENAI_API_KEY": "oai-secret-2",
           "ANTHROPIC_API_KEY": "ant-secret-3", "MY_SERVICE_TOKEN": "tok-secret-4",
           "AWS_SECRET_ACCESS_KEY": "aws-secret-5"}


@pytest.fixture(autouse=True)
def _built():
    if not os.access(DRIVER, os.X_OK) or not os.access(GBR_EXEC, os.X_OK):
        pytest.fail("%s or %s is missing: run 'make check' in %s first"
                    % (DRIVER, GBR_EXEC, BUILD))


def marker():
    """A unique sleep duration that names this test's processes."""
    return "%d.%06d" % (300 + uuid.uuid4().int % 600, uuid.uuid4().int % 999999)


def alive(mark):
    """Processes whose command line holds the marker."""
    out = subprocess.run(["pgrep", "-f", "^sleep " + mark], capture_output=True,
                         text=True).stdout.split()
    return [int(p) for p in out]


def wait_gone(mark, timeout=15.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not alive(mark):
            return True
        time.sleep(0.05)
    return False


class Runner:
    """Calls the run tools. driver-only: everything below run_tool's body."""

    def __init__(self, ws, tmp):
        self.ws = str(ws)
        self.tmp = str(tmp)
        self.conf = None
        # A state folder: the temp folder goes there (so a killed driver
        # leaves nothing in /tmp) and leftovers are swept at each start.
        self.state = os.path.join(self.tmp, "state")
        os.makedirs(self.state, mode=0o700, exist_ok=True)
        self.env = dict(os.environ, GBR_EXEC=GBR_EXEC)
        for k in SECRETS:
            self.env.pop(k, None)

    def config(self, text):
        path = os.path.join(self.tmp, "gbrd-%s.conf" % uuid.uuid4().hex[:8])
        with open(path, "w") as f:
            f.write(text)
        self.conf = path

    def profile(self, text, name="default"):
        d = os.path.join(self.ws, ".gbr_envs")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name + ".ini"), "w") as f:
            f.write(text)

    def argv(self, tool, args, n=1, flags=()):
        cmd = [DRIVER, "-w", self.ws]
        if self.conf:
            cmd += ["-c", self.conf]
        if n != 1:
            cmd += ["-n", str(n)]
        if "-I" not in flags:
            cmd += ["-I", self.state]
        cmd += list(flags) + [tool]
        if args is not None:
            text = json.dumps(args)
            if len(text) > 65536:
                # Beyond what one argv string may hold: through a file.
                path = os.path.join(self.tmp, "args-%s.json" % uuid.uuid4().hex[:8])
                with open(path, "w") as f:
                    f.write(text)
                text = "@" + path
            cmd.append(text)
        return cmd

    def run_lines(self, tool, args, n=1, flags=(), env=None, timeout=120):
        p = subprocess.run(self.argv(tool, args, n, flags), capture_output=True,
                           text=True, timeout=timeout, env=env or self.env)
        assert p.returncode == 0, p.stderr
        assert "runtime error" not in p.stderr and "Sanitizer" not in p.stderr, p.stderr
        return [json.loads(line) for line in p.stdout.splitlines()]

    def run_tool(self, tool, args, flags=(), env=None, timeout=120):
        """One call: the JSON-RPC response tool.call would give."""
        lines = self.run_lines(tool, args, 1, flags, env, timeout)
        resps = [l["response"] for l in lines if "call" in l]
        assert len(resps) == 1, lines
        return resps[0]

    def status(self):
        lines = self.run_lines("run_command", {"argv": ["true"]})
        return [l for l in lines if "done" in l][0]["status"]


@pytest.fixture
def rn(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    return Runner(ws.resolve(), tmp_path.resolve())


def result(resp):
    assert "result" in resp, resp
    return resp["result"]


def kind(resp):
    assert "error" in resp, resp
    return resp["error"]["data"]["kind"]


def sh(code, timeout_ms=None, **kw):
    a = {"language": "sh", "code": code}
    if timeout_ms:
        a["timeout_ms"] = timeout_ms
    a.update(kw)
    return a


def test_normal_run(rn):
    r = result(rn.run_tool("run_command", {"argv": ["echo", "hello", "world"]}))
    assert r["exit_code"] == 0 and r["signal"] is None
    assert r["stdout"] == "hello world\n" and r["stdout_encoding"] == "utf-8"
    assert r["stderr"] == "" and not r["timed_out"] and not r["truncated"]
    assert r["duration_ms"] >= 0


def test_working_folder_is_the_allowed_root(rn):
    r = result(rn.run_tool("run_command", {"argv": ["pwd"]}))
    assert r["stdout"].strip() == rn.ws


def test_exit_code_and_stderr(rn):
    r = result(rn.run_tool("run_script", sh("echo out; echo oops >&2; exit 7")))
    assert r["exit_code"] == 7 and r["stdout"] == "out\n" and r["stderr"] == "oops\n"


def test_python_and_node_scripts(rn):
    r = result(rn.run_tool("run_script", {"language": "python",
                                          "code": "print(6 * 7)"}))
    assert r["exit_code"] == 0 and r["stdout"] == "42\n"
    r = result(rn.run_tool("run_script", {"language": "node",
                                          "code": "console.log([1,2].length)"}))
    assert r["exit_code"] == 0 and r["stdout"] == "2\n"


def test_stdin_is_given_input_or_empty(rn):
    r = result(rn.run_tool("run_script", {"language": "python", "stdin": "abc\n",
                                          "code": "import sys; print(sys.stdin.read().upper())"}))
    assert r["stdout"] == "ABC\n\n"
    r = result(rn.run_tool("run_script", sh("cat; echo end")))
    assert r["stdout"] == "end\n"


def test_timeout_on_infinite_loop(rn):
    t0 = time.time()
    resp = rn.run_tool("run_script", {"language": "python", "code": "while True: pass",
                                      "timeout_ms": 500})
    assert kind(resp) == "timeout"
    data = resp["error"]["data"]
    assert data["timed_out"] and data["exit_code"] is None
    assert data["signal"] in ("SIGTERM", "SIGKILL")
    assert time.time() - t0 < 30


def test_timeout_when_everything_ignores_sigterm(rn):
    m = marker()
    code = ("trap '' TERM; (trap '' TERM; exec sleep %s) & "
            "while :; do :; done" % m)
    resp = rn.run_tool("run_script", sh(code, 500))
    assert kind(resp) == "timeout"
    assert resp["error"]["data"]["signal"] == "SIGKILL"
    assert wait_gone(m), "a grandchild ignoring SIGTERM survived"


def test_grandchild_that_outlives_its_parent(rn):
    m = marker()
    # The grandchild keeps stdout and stderr open and leaves the group.
    t0 = time.time()
    r = result(rn.run_tool("run_script", sh("setsid sleep %s & sleep %s & echo done" % (m, m))))
    assert r["exit_code"] == 0 and r["stdout"] == "done\n" and not r["timed_out"]
    assert time.time() - t0 < 20, "waited for pipes a grandchild held"
    assert wait_gone(m)


def test_child_closing_stdout_is_still_bounded(rn):
    m = marker()
    resp = rn.run_tool("run_script", sh("exec >&- 2>&-; sleep %s" % m, 700))
    assert kind(resp) == "timeout"
    assert wait_gone(m)


def test_fork_bomb_stopped_by_the_process_limit(rn):
    st = rn.status()
    if st["process_limit"] in ("none", "unknown"):
        pytest.skip("no process limit can be set here (root without namespaces)")
    rn.config("[exec]\nmax_processes = 64\n")
    # A counted bomb: forks until the kernel says no, then reports.
    code = ("import os, time\nn = 0\ntry:\n    while n < 100000:\n"
            "        if os.fork() == 0:\n            time.sleep(60)\n"
            "            os._exit(0)\n        n += 1\n"
            "except OSError as e:\n    print('stopped', n, e.errno)\n")
    r = result(rn.run_tool("run_script", {"language": "python", "code": code,
                                          "timeout_ms": 60000}))
    assert r["stdout"].startswith("stopped "), r
    n = int(r["stdout"].split()[1])
    assert 0 < n < 1000, n
    assert not r["timed_out"]
    # The classic one.
    r = result(rn.run_tool("run_script", sh("f() { f & f; }; f", 60000)))
    assert not r["timed_out"] and "fork" in r["stderr"].lower(), r


def test_100_mb_of_output_is_capped(rn):
    code = ("import sys\nb = b'x' * 1048576\n"
            "for i in range(100): sys.stdout.buffer.write(b)\n")
    t0 = time.time()
    r = result(rn.run_tool("run_script", {"language": "python", "code": code,
                                          "timeout_ms": 120000}))
    assert r["truncated"] and r["output_limited"]
    assert len(r["stdout"]) == 1048576 and set(r["stdout"]) == {"x"}
    assert r["stdout_bytes"] < 100 * 1048576, "it was not stopped"
    assert r["signal"] in ("SIGTERM", "SIGKILL", "SIGPIPE")
    assert time.time() - t0 < 60


def test_output_just_under_the_cap_is_whole(rn):
    rn.profile("[exec]\nmax_output_bytes = 4K\n")
    r = result(rn.run_tool("run_script", sh("head -c 4096 /dev/zero | tr '\\0' y")))
    assert not r["truncated"] and r["stdout"] == "y" * 4096
    r = result(rn.run_tool("run_script", sh("head -c 4097 /dev/zero | tr '\\0' y")))
    assert r["truncated"] and not r["output_limited"] and r["stdout"] == "y" * 4096
    assert r["stdout_bytes"] == 4097


def test_truncation_never_splits_a_character(rn):
    rn.profile("[exec]\nmax_output_bytes = 1K\n")
    # 1023 ASCII bytes then a 2-byte character: the cap falls inside it.
    r = result(rn.run_tool("run_script", {"language": "python", "code":
        "import sys; sys.stdout.write('a' * 1023 + '\\u00e9' * 10)"}))
    assert r["truncated"] and r["stdout_encoding"] == "utf-8"
    assert r["stdout"] == "a" * 1023


def test_missing_interpreter(rn):
    env = dict(rn.env, PATH="/nonexistent-gbr")
    resp = rn.run_tool("run_script", {"language": "python", "code": "print(1)"}, env=env)
    assert kind(resp) == "interpreter_not_found"
    assert resp["error"]["data"]["interpreter"] == "python3"
    resp = rn.run_tool("run_command", {"argv": ["no-such-program-gbr"]})
    assert kind(resp) == "command_not_found"
    assert resp["error"]["data"]["command"] == "no-such-program-gbr"


def test_segfault_is_a_result_with_the_signal(rn):
    r = result(rn.run_tool("run_script", {"language": "python",
                                          "code": "import ctypes; ctypes.string_at(0)"}))
    assert r["signal"] == "SIGSEGV" and r["exit_code"] is None
    r = result(rn.run_tool("run_script", sh("kill -SEGV $$")))
    assert r["signal"] == "SIGSEGV"
    # The runner is fine afterwards.
    assert result(rn.run_tool("run_command", {"argv": ["true"]}))["exit_code"] == 0


def test_landlock_confines_writes_and_reads(rn, tmp_path):
    st = rn.status()
    if not st["landlock"]["active"]:
        pytest.skip("Landlock is not active here: %s" % st["landlock"]["why_not"])
    outside = tmp_path / "outside.txt"
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    r = result(rn.run_tool("run_script", sh(
        "echo x > %s; echo w=$?; cat %s; echo r=$?; echo y > inside.txt; echo i=$?;"
        " echo t > $TMPDIR/t.txt; echo t=$?" % (outside, secret))))
    # With a mount namespace the write lands in the session's own /tmp
    # (and succeeds there); without one Landlock refuses it. Either way
    # nothing reaches the real file.
    assert not outside.exists(), "wrote outside the allowed root"
    if not r["sandbox"]["private_tmp"]:
        assert "w=1" in r["stdout"] or "w=2" in r["stdout"], r
    assert "top secret" not in r["stdout"] and "r=1" in r["stdout"], r
    assert "i=0" in r["stdout"] and "t=0" in r["stdout"], r
    assert (rn_path(rn) / "inside.txt").read_text() == "y\n"
    assert r["sandbox"]["landlock"] >= 2


def rn_path(rn):
    import pathlib
    return pathlib.Path(rn.ws)


def test_no_secret_reaches_a_child(rn):
    env = dict(rn.env, **SECRETS)
    env["HARMLESS_VAR_GBR"] = "plain"
    r = result(rn.run_tool("run_command", {"argv": ["env"]}, env=env))
    for k, v in SECRETS.items():
        assert k not in r["stdout"] and v not in r["stdout"], k
    assert "HARMLESS_VAR_GBR" not in r["stdout"], "not on the allow-list"
    assert "PATH=" in r["stdout"] and "TMPDIR=" in r["stdout"]
    # Nor through the parent's /proc files (gbrd is not dumpable).
    r = result(rn.run_tool("run_script", sh(
        "for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null; done | tr '\\0' '\\n'"),
        env=env))
    for v in SECRETS.values():
        assert v not in r["stdout"], v
    # pass_env adds a plain name, never a secret one.
    rn.config("[exec]\npass_env = HARMLESS_VAR_GBR\n")
    r = result(rn.run_tool("run_command", {"argv": ["env"]}, env=env))
    assert "HARMLESS_VAR_GBR=plain" in r["stdout"]


def test_secret_in_pass_env_is_refused(rn):
    rn.config("[exec]\npass_env = OPENAI_API_KEY\n")
    p = subprocess.run(rn.argv("run_command", {"argv": ["true"]}), capture_output=True,
                       text=True, env=rn.env, timeout=60)
    assert p.returncode == 1 and "secret" in p.stderr


def test_50_concurrent_runs(rn):
    rn.config("[exec]\nmax_children = 64\nmax_children_per_session = 64\n")
    t0 = time.time()
    lines = rn.run_lines("run_script", sh("sleep 1; echo $$"), n=50, timeout=300)
    resps = [l["response"] for l in lines if "call" in l]
    assert len(resps) == 50
    assert all(result(r)["exit_code"] == 0 for r in resps)
    assert time.time() - t0 < 120


def test_more_calls_than_slots_queue(rn):
    rn.config("[exec]\nmax_children = 3\nmax_children_per_session = 2\nmax_queued = 64\n")
    lines = rn.run_lines("run_script", sh("sleep 0.3; echo ok"), n=8, timeout=300)
    started = [l for l in lines if "started" in l]
    assert sum(1 for l in started if l["pid"] == -1) == 6, "2 per session run, 6 wait"
    resps = [l["response"] for l in lines if "call" in l]
    assert len(resps) == 8 and all(result(r)["stdout"] == "ok\n" for r in resps)


def test_busy_when_the_queue_is_full(rn):
    rn.config("[exec]\nmax_children = 1\nmax_queued = 1\n")
    lines = rn.run_lines("run_script", sh("sleep 0.5"), n=3)
    resps = [l["response"] for l in lines if "call" in l]
    kinds = sorted("ok" if "result" in r else kind(r) for r in resps)
    assert kinds == ["busy", "ok", "ok"], resps


def test_binary_output_is_base64(rn):
    r = result(rn.run_tool("run_script", sh("printf '\\377\\376\\000abc'")))
    import base64
    assert r["stdout_encoding"] == "base64"
    assert base64.b64decode(r["stdout"]) == b"\xff\xfe\x00abc"
    r = result(rn.run_tool("run_script", sh("printf 'caf\\303\\251'")))
    assert r["stdout_encoding"] == "utf-8" and r["stdout"] == "caf\u00e9"


def test_output_streams_while_running(rn):
    lines = rn.run_lines("run_script", sh("echo one; sleep 0.2; echo two >&2; "
                                          "printf 'x\\303'; sleep 0.2; printf '\\251'"),
                         flags=["-s"])
    chunks = [l["chunk"] for l in lines if "event" in l]
    out = "".join(c.get("text", "") for c in chunks if c["stream"] == "stdout")
    err = "".join(c.get("text", "") for c in chunks if c["stream"] == "stderr")
    assert out == "one\nx\u00e9" and err == "two\n", chunks
    assert all("text" in c for c in chunks), "a split character was not held back"


def test_cancel(rn):
    m = marker()
    t0 = time.time()
    resp = rn.run_tool("run_script", sh("sleep %s" % m, 60000), flags=["-C", "300"])
    assert kind(resp) == "cancelled"
    assert time.time() - t0 < 30
    assert wait_gone(m)


def test_no_child_left_after_the_parent_is_sigkilled(rn):
    m = marker()
    p = subprocess.Popen(rn.argv("run_script", sh(
        "sleep %s & setsid sleep %s & (trap '' TERM HUP; sleep %s) & sleep %s"
        % (m, m, m, m), 60000)), stdout=subprocess.PIPE, env=rn.env)
    assert json.loads(p.stdout.readline())["started"] == 0
    deadline = time.time() + 15
    while len(alive(m)) < 4 and time.time() < deadline:
        time.sleep(0.05)
    assert len(alive(m)) == 4
    p.kill()
    p.wait()
    assert wait_gone(m), "children outlived the runner: %s" % alive(m)


def test_no_leftovers_without_namespaces_when_the_runner_dies(rn):
    # Without namespaces the run's supervisor (gbr-exec) ends everything
    # the run started, setsid, double-forked or ignoring TERM, when the
    # runner is killed (its death signal). driver-only.
    rn.config("[exec]\nnamespaces = off\n")
    m = marker()
    p = subprocess.Popen(rn.argv("run_script", sh(
        "setsid sh -c 'sleep %s & sleep %s' & (trap '' TERM HUP; sleep %s) & "
        "sleep %s" % (m, m, m, m), 60000)), stdout=subprocess.PIPE, env=rn.env)
    assert json.loads(p.stdout.readline())["started"] == 0
    deadline = time.time() + 15
    while len(alive(m)) < 4 and time.time() < deadline:
        time.sleep(0.05)
    assert len(alive(m)) == 4
    p.kill()
    p.wait()
    assert wait_gone(m), "children outlived the runner: %s" % alive(m)


def test_leftovers_are_swept_at_the_next_start(rn, tmp_path):
    # A supervisor killed from outside (SIGKILL, not by the run: the run
    # cannot signal it) leaves a setsid grandchild to init; the next start
    # with the same state folder kills it. driver-only.
    rn.config("[exec]\nnamespaces = off\n")
    state = tmp_path / "state2"
    state.mkdir(mode=0o700)
    m = marker()
    p = subprocess.Popen(rn.argv("run_script", sh("setsid sleep %s & sleep %s" % (m, m), 60000),
                                 flags=["-I", str(state)]),
                         stdout=subprocess.PIPE, env=rn.env)
    started = json.loads(p.stdout.readline())
    assert started["started"] == 0 and started["pid"] > 0
    deadline = time.time() + 15
    while len(alive(m)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    os.kill(started["pid"], signal.SIGKILL)
    p.kill()
    p.wait()
    time.sleep(0.3)
    assert len(alive(m)) >= 1, "expected a grandchild to survive"
    rn.run_lines("run_command", {"argv": ["true"]}, flags=["-I", str(state)])
    assert wait_gone(m)


def test_without_namespaces_still_bounded(rn):
    rn.config("[exec]\nnamespaces = off\n")
    m = marker()
    r = result(rn.run_tool("run_script", sh("sleep %s & echo done" % m)))
    assert r["stdout"] == "done\n" and not r["sandbox"]["namespaces"]
    assert wait_gone(m)
    resp = rn.run_tool("run_script", sh("trap '' TERM; while :; do :; done", 400))
    assert kind(resp) == "timeout"


def test_reaping_through_sigchld(rn):
    m = marker()
    r = result(rn.run_tool("run_script", sh("echo hi; exit 3"), flags=["-S"]))
    assert r["exit_code"] == 3 and r["stdout"] == "hi\n"
    resp = rn.run_tool("run_script", sh("sleep %s" % m, 300), flags=["-S"])
    assert kind(resp) == "timeout"
    assert wait_gone(m)
    st = [l for l in rn.run_lines("run_command", {"argv": ["true"]}, flags=["-S"])
          if "done" in l][0]["status"]
    assert st["reaping"] == "sigchld"


def test_deny_and_ask_commands(rn):
    rn.profile("[env]\ndeny_commands = sudo *, rm -rf *\n"
               "ask_commands = git push *, echo ask*\n")
    resp = rn.run_tool("run_command", {"argv": ["sudo", "id"]})
    assert kind(resp) == "denied_command" and resp["error"]["data"]["pattern"] == "sudo *"
    resp = rn.run_tool("run_command", {"argv": ["env", "X=1", "/usr/bin/sudo", "id"]})
    assert kind(resp) == "denied_command"
    resp = rn.run_tool("run_command", {"argv": ["sh", "-c", "true && rm -rf /"]})
    assert kind(resp) == "denied_command"
    resp = rn.run_tool("run_script", sh("echo hi; sudo id"))
    assert kind(resp) == "denied_command", "a shell script is looked into"
    resp = rn.run_tool("run_command", {"argv": ["echo", "asked"]})
    assert kind(resp) == "needs_approval"
    assert resp["error"]["data"]["argv"] == ["echo", "asked"]
    r = result(rn.run_tool("run_command", {"argv": ["echo", "asked"]}, flags=["-a"]))
    assert r["stdout"] == "asked\n"
    r = result(rn.run_tool("run_command", {"argv": ["echo", "fine"]}))
    assert r["stdout"] == "fine\n"


def test_read_only_autonomy_refuses_commands(rn):
    rn.profile("[env]\nautonomy = read-only\n")
    assert kind(rn.run_tool("run_command", {"argv": ["true"]})) == "permission_denied"
    assert kind(rn.run_tool("run_script", sh("true"))) == "permission_denied"


def test_check_returns_diagnostics(rn):
    rn.profile("[env]\ncheck_command = sh -c 'echo \"src/a.c:3:4: error: boom\" >&2; exit 1'\n")
    r = result(rn.run_tool("check", {}))
    assert r["ok"] is False and r["exit_code"] == 1
    assert r["command"] == ["sh", "-c", 'echo "src/a.c:3:4: error: boom" >&2; exit 1']
    d = r["diagnostics"]
    assert d and d[0]["file"] == "src/a.c" and d[0]["line"] == 3 and d[0]["column"] == 4
    rn.profile("[env]\ncheck_command = true\n")
    r = result(rn.run_tool("check", {}))
    assert r["ok"] is True and r["diagnostics"] == []


def test_check_without_a_command_or_with_shell_syntax(rn):
    rn.profile("[env]\nautonomy = supervised\n")
    assert kind(rn.run_tool("check", {})) == "not_found"
    rn.profile("[env]\ncheck_command = make && make test\n")
    assert kind(rn.run_tool("check", {})) == "invalid_env"


def test_bad_arguments(rn):
    assert kind(rn.run_tool("run_command", {"argv": []})) == "invalid_params"
    assert kind(rn.run_tool("run_command", {"argv": [1]})) == "invalid_params"
    assert kind(rn.run_tool("run_command", {"argv": "ls -l"})) == "invalid_params"
    assert kind(rn.run_tool("run_command", {"argv": ["a\u0000b"]})) == "invalid_params"
    assert kind(rn.run_tool("run_script", {"language": "ruby", "code": "1"})) == "invalid_params"
    assert kind(rn.run_tool("run_script", {"language": "sh", "code": "x" * 200000})) \
        == "invalid_params"
    assert kind(rn.run_tool("run_command", {"argv": ["true"], "shell": True})) \
        == "invalid_params"


def test_profiles_and_protected_files_are_read_only(rn):
    st = rn.status()
    if not st["mount_namespace"]:
        pytest.skip("no mount namespace here: protected files stay writable by children")
    rn.profile("[env]\nprotected_files = keep.toml\n")
    (rn_path(rn) / "keep.toml").write_text("v1\n")
    r = result(rn.run_tool("run_script", sh(
        "echo evil >> .gbr_envs/default.ini; echo a=$?; echo v2 > keep.toml; echo b=$?;"
        " echo ok > other.txt; echo c=$?")))
    out = r["stdout"]
    assert "a=0" not in out and "b=0" not in out and "c=0" in out, r
    assert "Read-only file system" in r["stderr"], r
    assert "evil" not in (rn_path(rn) / ".gbr_envs" / "default.ini").read_text()
    assert (rn_path(rn) / "keep.toml").read_text() == "v1\n"
    assert r["sandbox"]["read_only_binds"] >= 2


def test_the_daemon_socket_is_hidden(rn, tmp_path):
    # The mount namespace's layer alone: seccomp (which refuses every
    # AF_UNIX socket) is off for this test, with its risk accepted.
    rn.config("[exec]\nseccomp = off\naccept_risks = control\n")
    st = rn.status()
    if not st["mount_namespace"]:
        pytest.skip("no mount namespace here: the socket cannot be hidden")
    # In the workspace: elsewhere under /tmp it is out of sight anyway
    # (the run's /tmp is the session's own).
    path = os.path.join(rn.ws, "fake-gbrd.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    try:
        code = ("import socket\ns = socket.socket(socket.AF_UNIX)\n"
                "try:\n    s.connect(%r); print('connected')\n"
                "except OSError as e: print('refused', e.errno)\n" % path)
        # The test can fail: without -x the child does connect.
        r = result(rn.run_tool("run_script", {"language": "python", "code": code}))
        assert r["stdout"].startswith("connected"), r
        r = result(rn.run_tool("run_script", {"language": "python", "code": code},
                               flags=["-x", path]))
        assert r["stdout"].startswith("refused"), r
        assert r["sandbox"]["hidden"] >= 1 and not r["sandbox"]["seccomp"]
    finally:
        srv.close()


def test_status_names_the_layers(rn):
    st = rn.status()
    assert st["available"] and st["process_groups"] and st["env_scrubbed"]
    assert st["daemon_not_dumpable"]
    assert "abi" in st["landlock"] and "active" in st["landlock"]
    if not st["landlock"]["active"]:
        assert st["landlock"]["why_not"]
    assert st["children"]["running"] == 0 and st["children"]["queued"] == 0


# Through gbrd itself: tool.call is wired, so these check the same layers
# on the real path (discovery of gbr-exec beside gbrd, the hidden socket,
# reloads, the daemon's death).

def gbrd_session(d):
    ws = os.path.join(d.root, "ws")
    os.makedirs(ws, exist_ok=True)
    c = d.conn()
    r = c.call("session.create", {"workspace": ws})
    assert "result" in r, r
    return c, r["result"]["id"], ws


def gbrd_run(c, sid, argv, **kw):
    args = {"argv": argv}
    args.update(kw)
    return c.call("tool.call", {"session": sid, "tool": "run_command", "args": args})


def test_gbrd_status_and_tool_call(daemon):
    st = daemon.ctl_json("status")["security"]["runner"]
    assert st["available"], st
    assert st["exec"].endswith("/gbr-exec")
    c, sid, ws = gbrd_session(daemon)
    r = gbrd_run(c, sid, ["sh", "-c", "pwd; echo $GBR_SOCKET; exit 5"])
    res = r["result"]["result"]
    assert res["exit_code"] == 5 and res["stdout"] == os.path.realpath(ws) + "\n\n"
    r = gbrd_run(c, sid, ["sh", "-c", "sleep 5"], timeout_ms=200)
    assert r["error"]["data"]["kind"] == "timeout" and r["error"]["data"]["timed_out"]
    tools = {t["name"] for t in c.call("tool.list")["result"]["tools"]}
    assert {"run_script", "run_command", "check"} <= tools


def test_gbrd_socket_stays_hidden_after_a_reload(daemon):
    st = daemon.ctl_json("status")["security"]["runner"]
    if not st["mount_namespace"]:
        pytest.skip("no mount namespace here")
    c, sid, _ = gbrd_session(daemon)
    code = ("import socket\n"
            "try:\n    s = socket.socket(socket.AF_UNIX)\n"
            "    s.connect(%r); print('connected')\n"
            "except OSError as e: print('refused', e.errno)\n" % daemon.socket)
    for _ in range(2):
        r = c.call("tool.call", {"session": sid, "tool": "run_script",
                                 "args": {"language": "python", "code": code}})
        assert r["result"]["result"]["stdout"].startswith("refused"), r
        daemon.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)


def test_gbrctl_run(daemon):
    """gbrctl run exits with the command's own status, 128+N for signal N,
    124 on a timeout, 127 for no such program, and 125 for gbrctl's and
    gbrd's own failures (as timeout(1) and env(1) tell theirs apart)."""
    c, sid, _ = gbrd_session(daemon)
    r = daemon.ctl("run", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert r.returncode == 3 and r.stdout == "out\n" and "err\n" in r.stderr
    assert "exit status 3" in r.stderr
    r = subprocess.run([os.path.join(BUILD, "gbrctl"), "run", sid, "--", "printf",
                        "\\377\\001"], env=daemon.env, capture_output=True)
    assert r.returncode == 0 and r.stdout == b"\xff\x01"
    r = daemon.ctl("run", sid, "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + signal.SIGTERM and "SIGTERM" in r.stderr, r
    r = daemon.ctl("--json", "run", sid, "--", "sh", "-c", "exit 7")
    assert r.returncode == 7
    r = daemon.ctl("run", sid, "--timeout-ms", "200", "--", "sh", "-c", "echo early; sleep 9")
    assert r.returncode == 124 and r.stdout == "early\n" and "timeout" in r.stderr
    r = daemon.ctl("run", sid, "--", "no-such-program-gbr")
    assert r.returncode == 127 and "command_not_found" in r.stderr
    r = daemon.ctl("run", "no-such-session", "--", "true")
    assert r.returncode == 125 and "session_not_found" in r.stderr
    assert daemon.ctl("run", sid, "ls").returncode == 125


def test_gbrd_children_die_with_the_daemon(daemon):
    c, sid, _ = gbrd_session(daemon)
    m = marker()
    c.request("tool.call", {"session": sid, "tool": "run_script", "args": {
        "language": "sh", "code": "setsid sleep %s & sleep %s" % (m, m),
        "timeout_ms": 60000}})
    deadline = time.time() + 15
    while len(alive(m)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(alive(m)) == 2
    daemon.kill9()
    assert wait_gone(m), "children outlived gbrd: %s" % alive(m)


# The fork server (gbr-exec -S): where namespaces hold, runs start through
# it; the tests below attack its failure modes, and check that the direct
# path (fork_server = off, or a run the server cannot take) still holds.

def fork_server_of(driver_pid, timeout=15.0):
    """The pid of a driver's fork server (its gbr-exec -S child)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run(["pgrep", "-P", str(driver_pid), "-f", "gbr-exec -S"],
                             capture_output=True, text=True).stdout.split()
        if out:
            return int(out[0])
        time.sleep(0.05)
    raise AssertionError("no fork server under pid %d" % driver_pid)


def is_gone(pid):
    """True if no live process has this pid (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_status_says_which_spawn_is_in_use(rn):
    st = rn.status()
    if st["mount_namespace"] and st["pid_namespace"]:
        assert st["spawn"] == "forkserver", st
        assert st["spawn_why_direct"] is None
        assert st["fork_server"]["pid"] > 1 and st["fork_server"]["restarts"] == 0
        assert st["fork_server"]["direct_fallbacks"] == 0
    else:
        assert st["spawn"] == "direct" and st["spawn_why_direct"], st
    rn.config("[exec]\nfork_server = off\n")
    st = rn.status()
    assert st["spawn"] == "direct" and "fork_server" in st["spawn_why_direct"], st
    assert st["fork_server"] is None
    rn.config("[exec]\nfork_server = require\n")
    p = subprocess.run(rn.argv("run_command", {"argv": ["true"]}), capture_output=True,
                       text=True, env=rn.env, timeout=60)
    assert p.returncode == 1 and "fork_server" in p.stderr


def needs_fork_server(rn):
    st = rn.status()
    if st["spawn"] != "forkserver":
        pytest.skip("runs go direct here: %s" % st["spawn_why_direct"])


def test_fork_server_killed_mid_run(rn):
    needs_fork_server(rn)
    # One slot: the second call waits, then runs on the restarted server.
    rn.config("[exec]\nmax_children = 1\nmax_queued = 8\n")
    m = marker()
    flag = "flag-%s" % uuid.uuid4().hex[:8]  # in the workspace: writable
    code = ("if [ -e %s ]; then echo second; exit 0; fi; touch %s; "
            "setsid sleep %s & sleep %s" % (flag, flag, m, m))
    p = subprocess.Popen(rn.argv("run_script", sh(code, 60000), n=2),
                         stdout=subprocess.PIPE, text=True, env=rn.env)
    try:
        server = fork_server_of(p.pid)
        deadline = time.time() + 15
        while len(alive(m)) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert len(alive(m)) == 2
        t0 = time.time()
        os.kill(server, signal.SIGKILL)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert time.time() - t0 < 30, "the run hung after its server died"
    lines = [json.loads(l) for l in out.splitlines()]
    resps = {l["call"]: l["response"] for l in lines if "call" in l}
    assert kind(resps[0]) == "internal_error", resps[0]
    assert "fork server" in resps[0]["error"]["message"]
    assert result(resps[1])["stdout"] == "second\n", "the next run failed"
    assert wait_gone(m), "the run outlived its server: %s" % alive(m)
    st = [l for l in lines if "done" in l][0]["status"]
    assert st["spawn"] == "forkserver" and st["fork_server"]["restarts"] == 1, st
    assert st["fork_server"]["pid"] != server


def test_stuck_fork_server_is_killed_and_the_run_ends(rn):
    needs_fork_server(rn)
    rn.config("[exec]\ngrace_ms = 100\n")
    m = marker()
    p = subprocess.Popen(rn.argv("run_script", sh("sleep %s" % m, 300)),
                         stdout=subprocess.PIPE, text=True, env=rn.env)
    server = None
    try:
        server = fork_server_of(p.pid)
        deadline = time.time() + 15
        while not alive(m) and time.time() < deadline:
            time.sleep(0.05)
        os.kill(server, signal.SIGSTOP)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if server is not None and not is_gone(server):
            os.kill(server, signal.SIGKILL)
    resp = [json.loads(l)["response"] for l in out.splitlines() if '"call"' in l][0]
    assert kind(resp) == "internal_error", resp
    assert wait_gone(m)


def test_the_runner_dying_takes_its_fork_server_along(rn):
    needs_fork_server(rn)
    m = marker()
    p = subprocess.Popen(rn.argv("run_script", sh(
        "setsid sleep %s & (trap '' TERM HUP; sleep %s) & sleep %s" % (m, m, m), 60000)),
        stdout=subprocess.PIPE, env=rn.env)
    server = fork_server_of(p.pid)
    deadline = time.time() + 15
    while len(alive(m)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    assert len(alive(m)) == 3
    p.kill()
    p.wait()
    assert wait_gone(m), "children outlived the runner: %s" % alive(m)
    deadline = time.time() + 15
    while not is_gone(server) and time.time() < deadline:
        time.sleep(0.05)
    assert is_gone(server), "the fork server outlived the runner"


def test_runs_the_fork_server_cannot_take_go_direct(rn):
    needs_fork_server(rn)
    # Small runs go through the server (no pid until it says); a request
    # bigger than its socket takes (SO_SNDBUF: twice wmem_max, at most
    # 16 MiB) goes direct (a pid at once), and both run alike.
    lines = rn.run_lines("run_command", {"argv": ["true"]})
    assert [l["pid"] for l in lines if "started" in l] == [0]
    with open("/proc/sys/net/core/wmem_max") as f:
        sndbuf = 2 * min(int(f.read()), 8 << 20)
    big = ["x" * 100000] * 8
    lines = rn.run_lines("run_command", {"argv": ["sh", "-c", 'echo "$#" "${#1}"', "sh"] + big})
    pid = [l for l in lines if "started" in l][0]["pid"]
    if sndbuf < 700000:
        assert pid > 0, "a request too big for the socket did not go direct"
    elif sndbuf > 1 << 20:
        assert pid == 0, "a request the socket takes went direct"
    r = result([l["response"] for l in lines if "call" in l][0])
    assert r["stdout"] == "8 100000\n" and r["sandbox"]["namespaces"]


def test_a_run_the_fork_server_refuses_goes_direct(rn):
    needs_fork_server(rn)
    rn.config("[exec]\nmax_children = 1\nmax_queued = 8\n")
    fault = os.path.join(rn.tmp, "faults")
    env = dict(rn.env, GBR_FAULT_FILE=fault)
    # The first call waits while the test arms the fault (the server has
    # passed its start-up probe by then); the server refuses the next two,
    # which still run, direct, with their input.
    code = ("import os, sys, time\n"
            "if not os.path.exists('first'):\n"
            "    open('first', 'w').close()\n"
            "    while not os.path.exists('go'): time.sleep(0.02)\n"
            "print(sys.stdin.read().upper())\n")
    p = subprocess.Popen(rn.argv("run_script", {"language": "python", "stdin": "abc\n",
                                                "code": code}, n=3),
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(rn.ws, "first")) and time.time() < deadline:
            time.sleep(0.02)
        with open(fault, "w") as f:
            f.write("exec.clone EAGAIN\n")
        open(os.path.join(rn.ws, "go"), "w").close()
        out, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    lines = [json.loads(l) for l in out.splitlines()]
    assert [l["pid"] for l in lines if "started" in l] == [0, -1, -1]
    resps = [l["response"] for l in lines if "call" in l]
    assert len(resps) == 3
    for resp in resps:
        r = result(resp)
        assert r["stdout"] == "ABC\n\n" and r["sandbox"]["namespaces"], r
    st = [l for l in lines if "done" in l][0]["status"]
    assert st["spawn"] == "forkserver" and st["fork_server"]["restarts"] == 0
    assert st["fork_server"]["direct_fallbacks"] == 2, st["fork_server"]


def test_a_fork_server_that_cannot_start_leaves_runs_direct(rn):
    needs_fork_server(rn)
    fault = os.path.join(rn.tmp, "faults")
    with open(fault, "w") as f:
        f.write("exec.server EIO\n")
    env = dict(rn.env, GBR_FAULT_FILE=fault)
    lines = rn.run_lines("run_command", {"argv": ["sh", "-c", "echo ok"]}, env=env)
    st = [l for l in lines if "done" in l][0]["status"]
    assert st["spawn"] == "direct" and st["spawn_why_direct"], st
    assert st["fork_server"] is None
    r = result([l["response"] for l in lines if "call" in l][0])
    assert r["stdout"] == "ok\n" and r["sandbox"]["namespaces"]
    assert [l["pid"] for l in lines if "started" in l][0] > 0


@pytest.mark.parametrize("fork_server", ["auto", "off"])
def test_root_child_has_no_capabilities(rn, fork_server):
    if os.getuid() != 0:
        pytest.skip("only root's children have capabilities to lose")
    rn.config("[exec]\nfork_server = %s\n" % fork_server)
    code = "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status"
    r = result(rn.run_tool("run_script", sh(code)))
    fields = dict(l.split(":\t") for l in r["stdout"].splitlines())
    assert len(fields) == 6, r["stdout"]
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[k], 16) == 0, (fork_server, k, fields[k])
    assert fields["NoNewPrivs"] == "1"
    assert r["sandbox"]["capabilities_dropped"]


def test_direct_spawn_still_holds(rn):
    rn.config("[exec]\nfork_server = off\ngrace_ms = 200\n")
    assert rn.status()["spawn"] == "direct"
    r = result(rn.run_tool("run_script", sh("echo out; echo err >&2; exit 7")))
    assert r["exit_code"] == 7 and r["stdout"] == "out\n" and r["stderr"] == "err\n"
    m = marker()
    resp = rn.run_tool("run_script", sh(
        "trap '' TERM; (trap '' TERM; exec sleep %s) & while :; do :; done" % m, 500))
    assert kind(resp) == "timeout" and resp["error"]["data"]["signal"] == "SIGKILL"
    assert wait_gone(m)
    m = marker()
    r = result(rn.run_tool("run_script", sh("setsid sleep %s & echo done" % m)))
    assert r["stdout"] == "done\n"
    assert wait_gone(m)
    resp = rn.run_tool("run_command", {"argv": ["no-such-program-gbr"]})
    assert kind(resp) == "command_not_found"


def test_gbrd_fork_server_killed_mid_run(daemon):
    st = daemon.ctl_json("status")["security"]["runner"]
    if st["spawn"] != "forkserver":
        pytest.skip("runs go direct here: %s" % st["spawn_why_direct"])
    server = st["fork_server"]["pid"]
    c, sid, _ = gbrd_session(daemon)
    m = marker()
    rid = c.request("tool.call", {"session": sid, "tool": "run_script", "args": {
        "language": "sh", "code": "sleep %s" % m, "timeout_ms": 60000}})
    deadline = time.time() + 15
    while not alive(m) and time.time() < deadline:
        time.sleep(0.05)
    assert alive(m)
    os.kill(server, signal.SIGKILL)
    while True:
        r = c.recv()
        if r.get("id") == rid:
            break
    assert r["error"]["data"]["kind"] == "internal_error", r
    assert wait_gone(m)
    r = gbrd_run(c, sid, ["sh", "-c", "echo again"])
    assert r["result"]["result"]["stdout"] == "again\n", r
    st = daemon.ctl_json("status")["security"]["runner"]
    assert st["spawn"] == "forkserver" and st["fork_server"]["pid"] != server
    assert st["fork_server"]["restarts"] == 1


def test_gbrd_killed_leaves_no_fork_server_or_child(daemon):
    st = daemon.ctl_json("status")["security"]["runner"]
    if st["spawn"] != "forkserver":
        pytest.skip("runs go direct here: %s" % st["spawn_why_direct"])
    server = st["fork_server"]["pid"]
    c, sid, _ = gbrd_session(daemon)
    m = marker()
    c.request("tool.call", {"session": sid, "tool": "run_script", "args": {
        "language": "sh", "code": "setsid sleep %s & sleep %s" % (m, m),
        "timeout_ms": 60000}})
    deadline = time.time() + 15
    while len(alive(m)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(alive(m)) == 2
    daemon.kill9()
    assert wait_gone(m), "children outlived gbrd: %s" % alive(m)
    deadline = time.time() + 15
    while not is_gone(server) and time.time() < deadline:
        time.sleep(0.05)
    assert is_gone(server), "the fork server outlived gbrd"


def test_gbrd_output_streams_to_attached_clients(daemon):
    c, sid, _ = gbrd_session(daemon)
    watcher = daemon.conn()
    watcher.call("session.attach", {"session": sid})
    rid = c.request("tool.call", {"session": sid, "tool": "run_command", "args": {
        "argv": ["sh", "-c", "echo a; sleep 1; echo b >&2; printf '\\377'"]}})
    # What the attached client sees, in order, up to the tool.result.
    seen = []
    deadline = time.time() + 60
    while time.time() < deadline:
        m = watcher.recv()
        p = m.get("params", {})
        if m.get("method") == "event" and p.get("type") in ("tool.output", "tool.result"):
            seen.append(p)
            if p["type"] == "tool.result":
                break
    kinds = [p["type"] for p in seen]
    assert kinds[-1] == "tool.result" and kinds.count("tool.result") == 1, kinds
    outs = [p for p in seen if p["type"] == "tool.output"]
    # "a" came while the child still ran: before the result, from stdout.
    assert outs and outs[0]["stream"] == "stdout" and outs[0]["text"] == "a\n", outs
    assert all(p["call_id"] == seen[-1]["call_id"] and p["tool"] == "run_command" and
               p["truncated"] is False for p in outs), outs
    assert any(p["stream"] == "stderr" and p.get("text") == "b\n" for p in outs), outs
    assert any(p.get("encoding") == "base64" and p["data"] == "/w==" for p in outs), outs
    while True:
        r = c.recv()
        if r.get("id") == rid:
            break
    assert r["result"]["result"]["stdout"] == "a\n\ufffd" or \
        r["result"]["result"]["stdout_encoding"] == "base64", r
    # Live only: a client replaying the session never sees them.
    late = daemon.conn()
    late.call("session.attach", {"session": sid, "after_seq": 0})
    deadline = time.time() + 30
    replayed = []
    while time.time() < deadline:
        m = late.recv()
        p = m.get("params", {})
        if m.get("method") == "event":
            replayed.append(p["type"])
            if p["type"] == "replay_complete":
                break
    assert "tool.result" in replayed and "tool.output" not in replayed, replayed


def test_fork_server_keeps_no_descriptor_of_gbrd(daemon):
    """The fork server lives as long as gbrd: it holds its own socket (3),
    stdio and its pidfd and signalfd, and nothing gbrd left open across the
    exec (libcurl's socketpair, what gbrd's own parent passed on)."""
    st = daemon.conn().call("daemon.status")["result"]["security"]["runner"]
    if st["spawn"] != "forkserver":
        pytest.skip("runs go direct here: %s" % st["spawn_why_direct"])
    pid = st["fork_server"]["pid"]
    fds = {int(n): os.readlink("/proc/%d/fd/%s" % (pid, n))
           for n in os.listdir("/proc/%d/fd" % pid)}
    assert fds[3].startswith("socket:"), fds
    extra = {n: t for n, t in fds.items()
             if n > 3 and not t.startswith("anon_inode:")}
    assert not extra, "the fork server holds gbrd's descriptors: %s" % extra
