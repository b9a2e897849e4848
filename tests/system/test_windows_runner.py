"""The agent's commands on Windows, under Wine: gbrd.exe runs run_command,
run_script and check in a Job object per command (daemon/runner/
runner-win*.c), and these tests drive it through the pipe as a client
would (wine.py's harness): output and exit codes, the streaming of output
while a command runs, the timeout and the end of a command killing every
process it started, gbrd's death killing them too, the output cap and the
flood kill, the environment's allow-list, command_not_found and
interpreter_not_found, cmd scripts and batch files, PowerShell where there
is one, the pipe's wall (a command cannot drive gbrd), and full autonomy
asking a human before each command since writes are not confined.

What only real Windows can show, and these tests therefore measure and
accept under Wine (saying so): the Job object's limits on active
processes, committed memory and CPU time (Wine 8 takes them and enforces
none; daemon.status says so), and PowerShell (Wine's powershell.exe is a
stub that runs nothing). No write confinement is built (no restricted
token, integrity level or AppContainer: Wine enforces none of them, so
none could be tested here); the tests check that gbrd says so and asks.

Skips, saying why, without a Windows build (GBR_WIN_BUILD_DIR) or Wine."""
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

import wine

pytestmark = pytest.mark.skipif(wine.why_not() is not None,
                                reason=wine.why_not() or "")

RUNCHILD = os.path.join(wine.WIN_BUILD, "tests", "windows", "runchild.exe")
RUNW = wine.winpath(RUNCHILD)


@pytest.fixture(scope="module", autouse=True)
def wine_ready():
    if not os.path.exists(RUNCHILD):
        pytest.skip("%s is not built (make check builds it)" % RUNCHILD)
    wine.boot()


@pytest.fixture
def root():
    d = tempfile.mkdtemp(prefix="gbrwr-", dir="/tmp")
    os.chmod(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ws(root):
    d = os.path.join(root, "ws")
    os.makedirs(d)
    return d


@pytest.fixture
def win_daemon(root):
    made = []

    def make(config=None, env=None):
        sub = os.path.join(root, "d%d" % len(made))
        os.makedirs(sub, mode=0o700)
        d = wine.WinDaemon(sub, config=config)
        d.env.update(env or {})
        made.append(d)
        d.start()
        return d

    yield make
    for d in made:
        d.stop()


def winp(p):
    """A Unix path as a Windows program sees it, with backslashes."""
    return wine.winpath(p).replace("/", "\\")


def session(d, ws, env=None):
    c = d.conn()
    p = {"workspace": wine.winpath(ws)}
    if env is not None:
        p["env"] = env
    r = c.call("session.create", p)
    assert "result" in r, r
    return c, r["result"]["id"]


def call(c, sid, tool, args):
    return c.call("tool.call", {"session": sid, "tool": tool, "args": args})


def result(c, sid, tool, args):
    """The tool's own result, once it succeeded."""
    r = call(c, sid, tool, args)
    assert "result" in r, r
    return r["result"]["result"]


def cmd(c, sid, line, **kw):
    return call(c, sid, "run_command", dict(argv=["cmd", "/c", line], **kw))


def profile(ws, text, name="default"):
    os.makedirs(os.path.join(ws, ".gbr_envs"), exist_ok=True)
    with open(os.path.join(ws, ".gbr_envs", name + ".ini"), "w") as f:
        f.write(text)


def wait_absent(path, seconds):
    """True if path is still absent after seconds (a marker never written)."""
    time.sleep(seconds)
    return not os.path.exists(path)


def test_output_and_exit_code(win_daemon, ws):
    d = win_daemon()
    c, sid = session(d, ws)
    r = result(c, sid, "run_command", {"argv": [
        "cmd", "/c", "echo out& echo err>&2& exit /b 3"]})
    assert r["exit_code"] == 3 and r["signal"] is None, r
    assert r["stdout"] == "out\r\n" and r["stderr"] == "err\r\n", r
    assert r["timed_out"] is False and r["truncated"] is False
    assert r["stdout_bytes"] == 5 and r["stderr_encoding"] == "utf-8"
    # The working folder is the workspace.
    r = result(c, sid, "run_command", {"argv": ["cmd", "/c", "cd"]})
    assert r["stdout"].strip().lower() == winp(ws).lower(), r
    # An .exe gets its arguments as given: no shell, no splitting.
    r = result(c, sid, "run_command", {"argv": [RUNW,
                                                "env", "PATHEXT"]})
    assert ".EXE" in r["stdout"].upper(), r
    # stdin is the input given, or empty.
    r = result(c, sid, "run_script", {"language": "cmd", "code": "more",
                                      "stdin": "from stdin\n"})
    assert r["stdout"] == "from stdin\n", r
    r = result(c, sid, "run_script", {"language": "cmd", "code": "more"})
    assert r["stdout"] == "" and r["exit_code"] == 0, r


def test_output_streams_while_the_command_runs(win_daemon, ws):
    d = win_daemon()
    c, sid = session(d, ws)
    watcher = d.conn()
    watcher.call("session.attach", {"session": sid})
    rid = c.request("tool.call", {"session": sid, "tool": "run_command", "args": {
        "argv": ["cmd", "/c", "echo a& ping -n 3 127.0.0.1 >NUL& echo b>&2"]}})
    seen = []
    t0 = time.time()
    first = None
    while time.time() - t0 < 60:
        m = watcher.recv()
        p = m.get("params", {})
        if m.get("method") == "event" and p.get("type") in ("tool.output",
                                                             "tool.result"):
            seen.append(p)
            if p["type"] == "tool.output" and first is None:
                first = time.time() - t0
            if p["type"] == "tool.result":
                done = time.time() - t0
                break
    outs = [p for p in seen if p["type"] == "tool.output"]
    # cmd writes a line's text and its end apart: chunks, in order.
    assert outs and outs[0]["stream"] == "stdout", outs
    assert "".join(p["text"] for p in outs if p["stream"] == "stdout") == "a\r\n"
    assert "".join(p["text"] for p in outs if p["stream"] == "stderr") == "b\r\n"
    # "a" came while the command still ran (ping waits two seconds).
    assert first is not None and done - first > 1.0, (first, done)
    while c.recv().get("id") != rid:
        pass


def test_timeout_kills_the_whole_job(win_daemon, ws):
    """A command that starts children is killed whole on timeout: the
    grandchild that would write a marker later never does. The control
    run, outside gbrd, shows that it would."""
    marker = os.path.join(ws, "late.txt")
    control = os.path.join(ws, "control.txt")
    line = "%s spawn 3000 %s& %s sleep 30000" % (
        winp(RUNCHILD), winp(control), winp(RUNCHILD))
    p = subprocess.Popen([wine.WINE, "cmd", "/c", line], env=wine.wine_env(),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    d = win_daemon()
    c, sid = session(d, ws)
    line = "%s spawn 3000 %s& %s sleep 30000" % (
        winp(RUNCHILD), winp(marker), winp(RUNCHILD))
    t0 = time.time()
    r = cmd(c, sid, line, timeout_ms=1500)
    took = time.time() - t0
    assert r["error"]["data"]["kind"] == "timeout", r
    data = r["error"]["data"]
    assert data["timed_out"] is True and data["exit_code"] is None
    assert data["signal"] == "SIGKILL", data
    assert took < 10, took
    assert wait_absent(marker, 5), "a child of the command outlived its timeout"
    p.kill()
    p.wait()
    assert os.path.exists(control), "the control run never wrote its marker"


def test_the_end_of_a_command_ends_what_it_left(win_daemon, ws):
    """As on Unix, a command is its process and everything it started: a
    background child left by a command that exits is killed with it."""
    d = win_daemon()
    c, sid = session(d, ws)
    marker = os.path.join(ws, "left.txt")
    r = result(c, sid, "run_command", {"argv": [
        RUNW, "spawn", "2000", winp(marker)]})
    assert r["exit_code"] == 0 and r["signal"] is None, r
    assert wait_absent(marker, 4), "a child outlived the command that started it"
    assert d.ctl_json("status")["security"]["runner"]["children"]["running"] == 0


def test_children_die_with_gbrd(win_daemon, ws):
    """JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: gbrd killed (as TerminateProcess
    would) takes every process of its commands along."""
    d = win_daemon()
    c, sid = session(d, ws)
    marker = os.path.join(ws, "orphan.txt")
    c.request("tool.call", {"session": sid, "tool": "run_command", "args": {
        "argv": ["cmd", "/c", "%s spawn 3000 %s& %s sleep 30000" % (
            winp(RUNCHILD), winp(marker), winp(RUNCHILD))],
        "timeout_ms": 60000}})
    deadline = time.time() + 20
    while time.time() < deadline:
        st = d.ctl_json("status")["security"]["runner"]
        if st["children"]["running"] == 1:
            break
        time.sleep(0.1)
    d.kill9()
    assert wait_absent(marker, 5), "a command's child outlived gbrd"


def test_output_cap_and_flood(win_daemon, ws):
    profile(ws, "[exec]\nmax_output_bytes = 1K\n")
    d = win_daemon()
    c, sid = session(d, ws)
    r = result(c, sid, "run_command", {"argv": [RUNW, "flood", "5000"]})
    assert r["truncated"] is True and r["output_limited"] is False, r
    assert len(r["stdout"]) == 1024 and r["stdout_bytes"] == 5000, r
    assert r["exit_code"] == 0
    # Past twice the cap (at least 1 MiB more) it is killed like a timeout.
    r = call(c, sid, "run_command", {"argv": [RUNW, "flood", "200000000"]})
    res = r.get("result", {}).get("result") or r["error"]["data"]
    assert "output_limited" in res, (r, d.log()[-3000:])
    assert res["output_limited"] is True and res["truncated"] is True, res
    assert len(res["stdout"]) == 1024 and res["signal"] == "SIGKILL", res
    assert res["stdout_bytes"] < 200000000


def test_environment_is_scrubbed(win_daemon, ws):
    d = win_daemon(env={"OPENAI_API_KEY": "sk-test-never-in-a-child",
                        "GBR_TEST_SECRET_TOKEN": "nope"})
    c, sid = session(d, ws)
    r = result(c, sid, "run_command", {"argv": ["cmd", "/c", "set"]})
    env = {}
    for line in r["stdout"].splitlines():
        k, _, v = line.partition("=")
        env[k.upper()] = v
    assert "sk-test-never-in-a-child" not in r["stdout"], r["stdout"]
    assert "OPENAI_API_KEY" not in env and "GBR_TEST_SECRET_TOKEN" not in env
    assert "GBR_SOCKET" not in env and "GBR_STATE_DIR" not in env
    # What Windows programs need to run at all is there.
    for k in ("SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "PATH",
              "USERPROFILE"):
        assert env.get(k), (k, env)
    # TEMP and TMP are the session's own temp space.
    assert env["TEMP"] == env["TMP"] and sid in env["TEMP"], env
    assert not env["TEMP"].lower().startswith(winp(ws).lower())


def test_command_and_interpreter_not_found(win_daemon, ws):
    d = win_daemon()
    c, sid = session(d, ws)
    r = call(c, sid, "run_command", {"argv": ["no-such-program-here"]})
    assert r["error"]["data"]["kind"] == "command_not_found", r
    assert r["error"]["data"]["command"] == "no-such-program-here"
    # A name with a folder is looked for there, relative to the workspace.
    r = call(c, sid, "run_command", {"argv": ["sub\\nothing.exe"]})
    assert r["error"]["data"]["kind"] == "command_not_found", r
    # A file that is not a program is not started through an association.
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write("x")
    r = call(c, sid, "run_command", {"argv": [".\\notes.txt"]})
    assert r["error"]["data"]["kind"] != "command_not_found", r
    assert "program" in r["error"]["message"], r
    # No Python, Node or sh in a bare Wine prefix.
    for lang, interp in (("python", "python3"), ("node", "node"), ("sh", "sh")):
        r = call(c, sid, "run_script", {"language": lang, "code": "x"})
        if "result" in r:
            continue        # installed in this prefix after all
        assert r["error"]["data"]["kind"] == "interpreter_not_found", r
        assert r["error"]["data"]["interpreter"] == interp


def test_workspace_cannot_shadow_a_program(win_daemon, ws):
    """cmd.exe would look in the current folder first; gbr never does."""
    shutil.copy(RUNCHILD, os.path.join(ws, "where.exe"))
    d = win_daemon()
    c, sid = session(d, ws)
    r = result(c, sid, "run_command", {"argv": ["where", "cmd"]})
    assert "usage: runchild" not in r["stderr"], r


def test_cmd_scripts_and_batch_files(win_daemon, ws):
    d = win_daemon()
    c, sid = session(d, ws)
    # Several lines, a loop, a label: run as a batch file.
    r = result(c, sid, "run_script", {"language": "cmd", "code":
                                      "echo one\nfor %%a in (x y) do echo two %%a\n"
                                      "goto skip\necho never\n:skip\nexit /b 4"})
    assert r["stdout"] == "one\r\ntwo x\r\ntwo y\r\n" and r["exit_code"] == 4, r
    # One line: cmd's own syntax, verbatim.
    r = result(c, sid, "run_script", {"language": "cmd",
                                      "code": 'echo "a  b" & echo c|more'})
    assert r["stdout"].replace("\r\n", "\n") == '"a  b" \nc\n', r
    # The batch file that held the lines is gone afterwards.
    tmp = [f for f in os.listdir(os.path.join(d.state, "run-tmp", sid, "tmp"))
           if f.endswith(".cmd")]
    assert tmp == [], tmp
    # A batch file gets its arguments quoted for cmd, never run by it.
    # (What the batch file then does with them is its own business: an
    # unquoted %~2 would run "echo pwned" inside it.)
    with open(os.path.join(ws, "args.cmd"), "w", newline="") as f:
        f.write("@echo off\r\necho [%1] [%2] [%3]\r\nexit /b 7\r\n")
    r = result(c, sid, "run_command", {"argv": [".\\args.cmd", "a b", "c&echo pwned",
                                                "d"]})
    assert r["stdout"] == '["a b"] ["c&echo pwned"] [d]\r\n', r
    assert r["exit_code"] == 7
    # What cmd would read as its own syntax is refused, not passed on.
    for bad in ("50%", 'say "hi"', "a\nb"):
        r = call(c, sid, "run_command", {"argv": [".\\args.cmd", bad]})
        assert r["error"]["data"]["kind"] == "invalid_params", (bad, r)


def test_powershell_script(win_daemon, ws):
    d = win_daemon()
    c, sid = session(d, ws)
    r = call(c, sid, "run_script", {"language": "powershell",
                                    "code": "Write-Output ('p' + 's'); exit 3"})
    if "error" in r and r["error"]["data"]["kind"] == "interpreter_not_found":
        pytest.skip("no powershell.exe in this Wine prefix")
    res = r["result"]["result"]
    if res["stdout"] == "" and res["exit_code"] == 0:
        pytest.skip("Wine's powershell.exe is a stub that runs nothing "
                    "(measured: no output, exit code 0); real Windows runs it")
    assert res["stdout"].strip() == "ps" and res["exit_code"] == 3, res


def test_a_command_cannot_drive_gbrd(win_daemon, ws):
    """The pipe's wall: a client inside a command's Job object is refused
    with permission_denied, and creates nothing, whether it is gbrctl.exe
    or a raw client."""
    d = win_daemon()
    c, sid = session(d, ws)
    before = d.ctl_json("status")["listener"]["refused_from_command"]
    r = result(c, sid, "run_command", {"argv": [
        wine.winpath(wine.GBRCTL_EXE), "--socket", d.pipe, "--json", "call", "session.create",
        json.dumps({"workspace": wine.winpath(ws), "name": "from-a-command"})]})
    assert r["exit_code"] == 1, r
    assert "permission_denied" in r["stderr"], r
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello",
                        "params": {"protocol": 1, "client": "child"}})
    r = result(c, sid, "run_script", {"language": "cmd", "code": "%s %s" % (
        winp(wine.PIPECAT_EXE), d.pipe), "stdin": hello + "\n"})
    line = json.loads(r["stdout"].splitlines()[0])
    assert line["error"]["data"]["kind"] == "permission_denied", r
    # Nothing was created, and the refusals were counted.
    names = [s["name"] for s in c.call("session.list")["result"]["sessions"]]
    assert names == [None], names
    st = d.ctl_json("status")
    assert st["listener"]["refused_from_command"] >= before + 2
    # gbrd's own clients still get in.
    assert d.ctl("ping").returncode == 0


def test_status_says_what_holds_and_what_does_not(win_daemon):
    d = win_daemon()
    rn = d.ctl_json("status")["security"]["runner"]
    assert rn["commands"] == "allowed" and rn["available"] is True
    assert rn["writes"].startswith(
        "commands are not confined to the workspace on this platform")
    assert rn["write_confinement"]["active"] is False
    assert rn["job_object"]["active"] is True
    assert rn["job_object"]["kill_on_close"] is True
    assert rn["job_object"]["breakaway"] is False
    assert rn["env_scrubbed"] is True
    assert "Job object" in rn["invariants"]["no_control_channel"]
    assert rn["invariants"]["nothing_outlives_a_run"] == "job object"
    assert rn["invariants"]["secrets_out_of_reach"].startswith("no")
    if rn["wine"] is not None:
        assert rn["job_object"]["limits_enforced"].startswith("no: Wine")
    # The text form says it too.
    out = d.ctl("status").stdout
    assert "commands are not confined to the workspace on this platform" in out


def test_full_autonomy_asks_before_each_command(win_daemon, ws):
    profile(ws, "[env]\nautonomy = full\n")
    d = win_daemon()
    c, sid = session(d, ws)
    rid = c.request("tool.call", {"session": sid, "tool": "run_command",
                                  "args": {"argv": ["cmd", "/c", "echo ran"]}})
    event = None
    while event is None:
        m = c.recv()
        assert m.get("id") != rid, "ran without a human: %r" % m
        if m.get("method") == "event" and \
                m["params"]["type"] == "approval.requested":
            event = m["params"]
    a = event["approval"]
    assert a["why"] == "unconfined" and "echo ran" in a["command"], a
    assert "write confinement" in a["effect"], a
    r = d.conn().call("approval.resolve", {"id": a["id"], "decision": "approve"})
    assert "result" in r, r
    while True:
        m = c.recv()
        if m.get("id") == rid:
            break
    assert m["result"]["result"]["stdout"] == "ran\r\n", m
    # Supervised autonomy (the default) runs it; the person watches.
    profile(ws, "[env]\nautonomy = supervised\n", name="sup")
    c2, sid2 = session(d, ws, env="sup")
    assert result(c2, sid2, "run_command", {
        "argv": ["cmd", "/c", "echo ok"]})["stdout"] == "ok\r\n"


def test_accepting_the_risk_runs_full_autonomy_without_asking(win_daemon, ws):
    profile(ws, "[env]\nautonomy = full\n")
    d = win_daemon(config="[exec]\naccept_risks = writes\n")
    rn = d.ctl_json("status")["security"]["runner"]
    assert "accept" in rn["writes"] and \
        rn["invariants"]["writes_confined"] == "accepted risk"
    c, sid = session(d, ws)
    assert result(c, sid, "run_command", {
        "argv": ["cmd", "/c", "echo ok"]})["stdout"] == "ok\r\n"


def test_job_object_limits_as_wine_keeps_them(win_daemon, ws):
    """The Job object's limits: real Windows enforces them, Wine 8 ignores
    them. Measured here, and asserted to be whichever daemon.status says."""
    d = win_daemon(config="[exec]\nmax_processes = 3\n"
                          "max_memory_bytes = 134217728\n")
    c, sid = session(d, ws)
    enforced = d.ctl_json("status")["security"]["runner"]["wine"] is None
    r = result(c, sid, "run_command", {"argv": [RUNW, "procs", "5", "100"]})
    assert (r["exit_code"] == 3) == enforced, r
    r = result(c, sid, "run_command", {"argv": [RUNW, "eat", "256"]})
    assert (r["exit_code"] == 3) == enforced, r


def test_queueing_and_cancel(win_daemon, ws):
    d = win_daemon(config="[exec]\nmax_children = 1\nmax_queued = 4\n")
    c, sid = session(d, ws)
    c2 = d.conn()
    rid = c2.request("tool.call", {"session": sid, "tool": "run_command",
                                   "args": {"argv": [RUNW, "sleep", "1500"]}})
    time.sleep(0.3)
    # The second waits for the slot, then runs.
    r = result(c, sid, "run_command", {"argv": ["cmd", "/c", "echo second"]})
    assert r["stdout"] == "second\r\n", r
    while c2.recv().get("id") != rid:
        pass


def test_check_and_its_diagnostics(win_daemon, ws):
    profile(ws, '[env]\ncheck_command = cmd /c "echo src/main.c:3:7: error: bad & '
                'exit /b 1"\n')
    d = win_daemon()
    c, sid = session(d, ws)
    r = result(c, sid, "check", {})
    assert r["ok"] is False and r["exit_code"] == 1, r
    assert r["command"][0] == "cmd", r
    diag = r["diagnostics"]
    assert diag and diag[0]["file"] == "src/main.c" and diag[0]["line"] == 3 \
        and diag[0]["column"] == 7, diag


def test_shutdown_ends_running_commands(win_daemon, ws):
    d = win_daemon()
    c, sid = session(d, ws)
    marker = os.path.join(ws, "after-shutdown.txt")
    c.request("tool.call", {"session": sid, "tool": "run_command", "args": {
        "argv": ["cmd", "/c", "%s spawn 3000 %s& %s sleep 30000" % (
            winp(RUNCHILD), winp(marker), winp(RUNCHILD))],
        "timeout_ms": 60000}})
    deadline = time.time() + 20
    while time.time() < deadline:
        if d.ctl_json("status")["security"]["runner"]["children"]["running"] == 1:
            break
        time.sleep(0.1)
    t0 = time.time()
    assert d.shutdown(timeout=30) == 0
    assert time.time() - t0 < 15
    assert wait_absent(marker, 5), "a command's child outlived gbrd's shutdown"


def test_a_grandchild_holding_the_pipe_does_not_hold_the_command(win_daemon, ws):
    """The first process ends while a child it left still writes and holds
    the pipe: the command ends then, with its exit code, the child killed
    with it (test_runner.py's grandchild case, on Windows)."""
    d = win_daemon()
    c, sid = session(d, ws)
    t0 = time.time()
    r = result(c, sid, "run_script", {"language": "cmd", "code":
                                      "start /b %s flood 500000 30000\n"
                                      "ping -n 3 127.0.0.1 >NUL\nexit /b 5" %
                                      winp(RUNCHILD), "timeout_ms": 60000})
    assert r["exit_code"] == 5 and r["timed_out"] is False, r
    assert r["stdout_bytes"] == 500000, r["stdout_bytes"]
    assert time.time() - t0 < 20


def test_protected_paths_are_put_back_after_a_command(win_daemon, ws):
    """Nothing locks them while a command runs on Windows, but the check
    after it puts back what it changed, as on Linux without namespaces."""
    profile(ws, "[env]\nprotected_files = keep.toml\n")
    with open(os.path.join(ws, "keep.toml"), "w") as f:
        f.write("v1\n")
    d = win_daemon()
    c, sid = session(d, ws)
    r = call(c, sid, "run_command", {"argv": [
        "cmd", "/c", "echo evil> .gbr_envs\\evil.ini& echo v2> keep.toml"]})
    res = r.get("result", {}).get("result") or r["error"]["data"]
    changes = {ch["path"].rsplit("/ws/", 1)[-1]: ch
               for ch in res["protected_changes"]}
    assert changes[".gbr_envs/evil.ini"]["change"] == "created", res
    assert changes["keep.toml"]["restored"] is True, res
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "evil.ini"))
    assert open(os.path.join(ws, "keep.toml")).read() == "v1\n"
