"""Toolchains in the home, secrets out of reach, and the agent's own
package caches, through the real gbrd (doc/SANDBOX.md).

gbrd runs with a home of the test's own: a folder outside /tmp (under the
real user's ~/.cache), so that with namespaces it is not simply out of
sight behind the session's /tmp, and hiding is what keeps the secrets
out. In it: a pyenv-style Python (a real interpreter whose standard
library lives in the home), canaries in every kind of secret store and in
gbr's own config folder. Each mode is tried: namespaces and Landlock
("ns"), Landlock alone ("nons", as where user namespaces are restricted),
and the mount namespace alone ("nolandlock", which gbrd.conf must accept).
CI runs this file as root and as an ordinary user.
"""
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import time
import uuid

import pytest

from conftest import GBRCTL

MODES = {
    "ns": "",
    "nons": "[exec]\nnamespaces = off\n",
    "nolandlock": "[exec]\nlandlock = off\naccept_risks = writes\n",
}

# Secret stores, relative to the home, each with a canary file.
SECRETS = [
    ".ssh/id_ed25519", ".gnupg/private-keys-v1.d/k.key", ".aws/credentials",
    ".config/gcloud/credentials.db", ".kube/config", ".docker/config.json",
    ".netrc", ".git-credentials", ".config/gh/hosts.yml", ".pypirc",
    ".npmrc", ".cargo/credentials.toml", ".password-store/x.gpg",
    ".local/share/keyrings/login.keyring", ".bash_history",
    ".config/gbr/gbrd.env",
]

PY = "python%d.%d" % sys.version_info[:2]
SYSTEM_PY = "/usr/bin/" + PY


def status(d):
    return d.conn().call("daemon.status")["result"]["security"]["runner"]


@pytest.fixture
def home(request):
    """A home outside /tmp, removed afterwards."""
    base = os.path.join(os.path.expanduser("~"), ".cache", "gbr-test-homes")
    os.makedirs(base, exist_ok=True)
    h = os.path.join(base, uuid.uuid4().hex[:12])
    os.makedirs(h, mode=0o700)
    yield os.path.realpath(h)
    for root, dirs, files in os.walk(h):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o700)
    shutil.rmtree(h, ignore_errors=True)


def write(path, text, mode=0o600):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def pyenv(home):
    """A pyenv-style layout: a shim, and a Python whose library is here."""
    if not os.path.exists(SYSTEM_PY):
        pytest.skip("no %s to copy" % SYSTEM_PY)
    v = os.path.join(home, ".pyenv", "versions", "3.99.0")
    os.makedirs(os.path.join(v, "bin"))
    lib = os.path.join(v, "lib", PY)
    os.makedirs(lib)
    shutil.copy2(SYSTEM_PY, os.path.join(v, "bin", "python3"))
    src = "/usr/lib/" + PY
    shutil.copytree(os.path.join(src, "encodings"), os.path.join(lib, "encodings"))
    shutil.copy2(os.path.join(src, "os.py"), lib)
    write(os.path.join(home, ".pyenv", "shims", "python3"),
          '#!/bin/sh\nexec "$HOME/.pyenv/versions/3.99.0/bin/python3" "$@"\n', 0o755)
    write(os.path.join(home, ".cargo", "bin", "fakecargo"),
          "#!/bin/sh\necho fakecargo-ran\n", 0o755)
    return v


def canaries(home, d):
    """Plants a canary in each secret store; returns {path: text}."""
    out = {}
    for rel in SECRETS:
        p = os.path.join(home, rel)
        text = "CANARY-%s" % uuid.uuid4().hex
        write(p, text)
        out[p] = text
    return out


def start(make_daemon, home, mode, extra=""):
    path = ":".join([os.path.join(home, ".pyenv", "shims"),
                     os.path.join(home, ".cargo", "bin"),
                     "/usr/local/bin", "/usr/bin", "/bin"])
    conf = MODES[mode]
    if extra and "[exec]" not in conf:
        conf += "[exec]\n"
    d = make_daemon(config=conf + extra + "\n", env={"HOME": home, "PATH": path})
    st = status(d)
    if mode in ("ns", "nolandlock") and not st["mount_namespace"]:
        d.stop()
        pytest.skip("no namespaces here: %s" % st["namespaces"]["why_not"])
    if mode != "nolandlock" and not st["landlock"]["active"]:
        d.stop()
        pytest.skip("no Landlock here")
    assert st["commands"] == "allowed", st["refusal"]
    return d


def session(d, ws):
    c = d.conn()
    r = c.call("session.create", {"workspace": ws})
    assert "result" in r, r
    return c, r["result"]["id"]


def command(c, sid, argv, timeout_ms=30000):
    r = c.call("tool.call", {"session": sid, "tool": "run_command",
                             "args": {"argv": argv, "timeout_ms": timeout_ms}})
    assert "result" in r, r
    return r["result"]["result"]


def workspace(d):
    ws = os.path.join(d.root, "ws")
    os.makedirs(ws, exist_ok=True)
    return os.path.realpath(ws)


@pytest.fixture(params=sorted(MODES))
def mode(request):
    return request.param


def test_a_toolchain_in_the_home_runs(make_daemon, home, mode):
    v = pyenv(home)
    d = start(make_daemon, home, mode)
    c, sid = session(d, workspace(d))
    res = command(c, sid, ["python3", "-c",
                           "import sys, encodings; print(sys.prefix)"])
    # The shim ran the home's Python, with its own library: not the
    # system's Python, and no "No module named 'encodings'".
    assert res["exit_code"] == 0, res
    assert res["stdout"].strip() == v, res
    res = command(c, sid, ["fakecargo"])
    assert res["exit_code"] == 0 and res["stdout"] == "fakecargo-ran\n", res
    reads = status(d)["toolchain_reads"]
    assert os.path.join(home, ".pyenv") in reads, reads
    assert os.path.join(home, ".cargo", "bin") in reads, reads
    assert home not in reads and os.path.join(home, ".cargo") not in reads, reads


def test_toolchain_reads_off_keeps_the_home_out(make_daemon, home, mode):
    if mode == "nolandlock":
        pytest.skip("without Landlock reads are not confined at all")
    v = pyenv(home)
    d = start(make_daemon, home, mode, "toolchain_reads = off\n")
    assert status(d)["toolchain_reads"] == []
    c, sid = session(d, workspace(d))
    res = command(c, sid, ["python3", "-c", "import sys; print(sys.prefix)"])
    assert v not in res.get("stdout", ""), res
    r = c.call("tool.call", {"session": sid, "tool": "run_command", "args": {
        "argv": [os.path.join(v, "bin", "python3"), "-c", "print('ran')"]}})
    assert r.get("error", {}).get("data", {}).get("kind") == "permission_denied" or \
        r["result"]["result"]["exit_code"] != 0, r


READ_ALL = r'''
import os, sys
got = []
for p in sys.argv[1:]:
    try:
        with open(p) as f:
            got.append(p + "=" + f.read())
    except OSError as e:
        got.append(p + ": " + e.strerror)
for p in sys.argv[1:]:
    d = os.path.dirname(p)
    try:
        got.append(d + " lists " + ",".join(os.listdir(d)))
    except OSError as e:
        pass
print("\n".join(got))
'''


def test_no_command_reads_a_secret(make_daemon, home, mode):
    pyenv(home)
    d = start(make_daemon, home, mode)
    cans = canaries(home, d)
    ws = workspace(d)
    # A symlink inside the workspace to each store, too.
    for i, p in enumerate(cans):
        os.symlink(p, os.path.join(ws, "link%d" % i))
    c, sid = session(d, ws)
    paths = list(cans) + [os.path.join(ws, "link%d" % i) for i in range(len(cans))]
    for argv in (["/usr/bin/python3", "-c", READ_ALL] + paths,
                 ["python3", "-c", READ_ALL] + paths,
                 ["sh", "-c", 'cat "$@" 2>&1; ls -la "$HOME"/.ssh 2>&1; '
                  'grep -r CANARY "$HOME" 2>/dev/null', "sh"] + paths):
        res = command(c, sid, argv)
        out = res.get("stdout", "") + res.get("stderr", "")
        for p, text in cans.items():
            assert text not in out, (mode, p, argv[0], out[:2000])
    # Nothing a command could do changed the stores.
    for p, text in cans.items():
        with open(p) as f:
            assert f.read() == text


def test_a_path_entry_never_opens_the_home(make_daemon, home, mode):
    """$HOME, / and a secret store on gbrd's PATH read nothing more."""
    cans = canaries(home, None)
    path = ":".join([home, "/", os.path.join(home, ".ssh"),
                     os.path.join(home, ".config"), "/usr/bin", "/bin"])
    d = make_daemon(config=MODES[mode] + "\n", env={"HOME": home, "PATH": path})
    st = status(d)
    if mode in ("ns", "nolandlock") and not st["mount_namespace"]:
        pytest.skip("no namespaces here")
    if mode != "nolandlock" and not st["landlock"]["active"]:
        pytest.skip("no Landlock here")
    for r in st["toolchain_reads"]:
        assert not home.startswith(r) and not r.startswith(os.path.join(home, ".ssh")) \
            and not r.startswith(os.path.join(home, ".config")), st["toolchain_reads"]
    c, sid = session(d, workspace(d))
    res = command(c, sid, ["/usr/bin/python3", "-c", READ_ALL] + list(cans))
    for text in cans.values():
        assert text not in res.get("stdout", ""), res


def agent_cache(d, ws):
    base = os.path.join(d.env["XDG_CACHE_HOME"], "gbr-agent")
    dirs = [p for p in glob.glob(os.path.join(base, "*")) if len(os.path.basename(p)) == 16]
    assert len(dirs) == 1, (base, dirs)
    return dirs[0]


def test_caches_are_the_agents_own(make_daemon, home, mode):
    d = start(make_daemon, home, mode)
    ws = workspace(d)
    user_cargo = os.path.join(home, ".cargo", "registry")
    os.makedirs(user_cargo)
    c, sid = session(d, ws)
    res = command(c, sid, ["sh", "-c",
                           'for v in CARGO_HOME GOMODCACHE GOCACHE npm_config_cache '
                           'PIP_CACHE_DIR XDG_CACHE_HOME GRADLE_USER_HOME; do '
                           'eval "echo $v=\\$$v"; done; echo "$MAVEN_OPTS"; '
                           'echo planted > "$CARGO_HOME/planted" && echo wrote'])
    assert res["exit_code"] == 0, res
    cache = agent_cache(d, ws)
    lines = dict(l.split("=", 1) for l in res["stdout"].splitlines() if "=" in l and
                 not l.startswith("-D"))
    for k, v in lines.items():
        assert v.startswith(cache + "/"), (k, v)
    assert "-Dmaven.repo.local=%s/maven" % cache in res["stdout"], res
    assert "wrote" in res["stdout"]
    with open(os.path.join(cache, "cargo", "planted")) as f:
        assert f.read() == "planted\n"
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    # The user's own caches: a command cannot plant anything there.
    if mode != "nolandlock":
        res = command(c, sid, ["sh", "-c", 'echo evil > "$0/evil.crate"', user_cargo])
        assert res["exit_code"] != 0, res
        assert not os.path.exists(os.path.join(user_cargo, "evil.crate"))
    # Another workspace has a cache of its own.
    ws2 = os.path.join(d.root, "ws2")
    os.makedirs(ws2)
    c2, sid2 = session(d, ws2)
    res = command(c2, sid2, ["sh", "-c", 'ls "$CARGO_HOME"; cat "$0"',
                             os.path.join(cache, "cargo", "planted")])
    assert "planted" not in res["stdout"], (mode, res["stdout"], res["stderr"])
    if mode != "nolandlock":
        assert res["exit_code"] != 0, res
    if shutil.which("go", path="/usr/bin"):
        res = command(c, sid, ["go", "env", "GOMODCACHE", "GOCACHE", "GOPATH"])
        assert res["exit_code"] == 0, res
        assert all(l.startswith(cache + "/go/") for l in res["stdout"].split()), res


def du(d, *args):
    r = d.ctl("--json", "cache", "du", *args)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def test_cache_du_and_clean(make_daemon, home):
    d = start(make_daemon, home, "nons")
    ws = workspace(d)
    c, sid = session(d, ws)
    res = command(c, sid, ["sh", "-c", 'head -c 3000000 /dev/zero > "$CARGO_HOME/blob"; '
                           'mkdir -p "$GOMODCACHE/x@v1" && echo m > "$GOMODCACHE/x@v1/go.mod" '
                           '&& chmod -R a-w "$GOMODCACHE/x@v1"'])
    assert res["exit_code"] == 0, res
    cache = agent_cache(d, ws)
    j = du(d, ws)
    assert j["workspace"] == ws and len(j["caches"]) == 1, j
    assert j["caches"][0]["path"] == cache and j["caches"][0]["bytes"] >= 3000000, j
    assert j["caches"][0]["files"] == 2 and j["complete"], j
    assert du(d, sid)["caches"][0]["path"] == cache
    assert du(d)["bytes"] == j["bytes"]
    r = d.ctl("cache", "du", ws)
    assert r.returncode == 0 and "2.9 MiB" in r.stdout and cache in r.stdout, r.stdout
    # Refused while a command of the workspace runs; the cache stays.
    c.request("tool.call", {"session": sid, "tool": "run_command",
                            "args": {"argv": ["sleep", "30"], "timeout_ms": 60000}})
    deadline = time.time() + 10
    while time.time() < deadline and status(d)["children"]["running"] == 0:
        time.sleep(0.05)
    r = d.conn().call("cache.clean", {"workspace": ws})
    assert r["error"]["data"]["kind"] == "busy", r
    assert "running" in r["error"]["message"], r
    r = d.ctl("cache", "clean", ws)
    assert r.returncode == 1 and "running" in r.stderr, (r.stdout, r.stderr)
    assert os.path.exists(os.path.join(cache, "cargo", "blob"))
    r = d.conn().call("session.close", {"session": sid})
    assert "result" in r, r
    deadline = time.time() + 10
    while time.time() < deadline and (status(d)["children"]["running"] > 0 or
            d.conn().call("daemon.status")["result"]["security"]["runner"]
            ["protected_checks"]["workspaces_running"] > 0):
        time.sleep(0.05)
    r = d.ctl("cache", "clean", ws)
    assert r.returncode == 0 and ("removed " + cache) in r.stdout, (r.stdout, r.stderr)
    deadline = time.time() + 10
    while time.time() < deadline and glob.glob(cache + "*"):
        time.sleep(0.05)
    assert not glob.glob(cache + "*"), os.listdir(os.path.dirname(cache))
    assert du(d, ws)["bytes"] == 0
    r = d.ctl("cache", "clean", "/no/such/folder")
    assert r.returncode == 2, r


def test_a_cache_over_its_bound_is_cleared(make_daemon, home):
    d = start(make_daemon, home, "nons", "cache_max_bytes = 16M\n")
    ws = workspace(d)
    c, sid = session(d, ws)
    res = command(c, sid, ["sh", "-c", 'head -c 20000000 /dev/urandom > "$CARGO_HOME/big"'])
    assert res["exit_code"] == 0, res
    cache = agent_cache(d, ws)
    big = os.path.join(cache, "cargo", "big")
    assert os.path.getsize(big) == 20000000
    # Measured at most once every 10 minutes: a new gbrd measures at once.
    d.stop()
    d.start()
    c, sid = session(d, ws)
    deadline = time.time() + 20
    while time.time() < deadline and os.path.exists(big):
        res = command(c, sid, ["true"])
        assert res["exit_code"] == 0, res
        time.sleep(0.1)
    assert not os.path.exists(big)
    assert os.path.isdir(os.path.join(cache, "cargo"))
    assert "was over 16777216 bytes: cleared" in d.log()


def test_a_profile_cannot_open_a_secret_store(make_daemon, home):
    """A workspace's profile (a cloned repository's, say) naming ~/.ssh or
    the home as a read-only root is refused; the file tools never read
    the key."""
    cans = canaries(home, None)
    d = start(make_daemon, home, "nons")
    key = os.path.join(home, ".ssh", "id_ed25519")
    for root in (os.path.join(home, ".ssh"), home, "/"):
        ws = os.path.join(d.root, "ws-%d" % len(root))
        write(os.path.join(ws, ".gbr_envs", "default.ini"),
              "[env]\nread_only_roots = %s\n" % root)
        r = d.conn().call("session.create", {"workspace": os.path.realpath(ws)})
        if "result" in r:
            sid = r["result"]["id"]
            shown = d.conn().call("env.show", {"session": sid})
            assert "error" in shown and "secret" in shown["error"]["message"], shown
            rr = d.conn().call("tool.call", {"session": sid, "tool": "read_file",
                                             "args": {"path": key}})
            assert "error" in rr, rr
            assert cans[key] not in json.dumps(rr)
        else:
            assert r["error"]["data"]["kind"] == "invalid_env", r
            assert "secret" in r["error"]["message"], r


def test_a_workspace_that_holds_the_secrets_still_hides_them(make_daemon, home, mode):
    """The home itself as the workspace: with a mount namespace the stores
    are covered even though the allowed root holds them."""
    if mode == "nons":
        pytest.skip("Landlock alone lets the allowed root be read: "
                    "SANDBOX.md, Known limits")
    cans = canaries(home, None)
    d = start(make_daemon, home, mode)
    c, sid = session(d, home)
    res = command(c, sid, ["/usr/bin/python3", "-c", READ_ALL] + list(cans))
    for p, text in cans.items():
        assert text not in res.get("stdout", ""), (p, res)
    assert res["sandbox"]["hidden"] >= len([p for p in cans if "/.config/gbr/" not in p]) // 2, res


def test_landlock_spares_the_mounts_it_does_not_need(make_daemon, home):
    """With Landlock and a workspace that holds no store, no mount covers
    them: the kernel keeps them out (the canaries stay unread)."""
    cans = canaries(home, None)
    d = start(make_daemon, home, "ns")
    c, sid = session(d, workspace(d))
    res = command(c, sid, ["/usr/bin/python3", "-c", READ_ALL] + list(cans))
    for text in cans.values():
        assert text not in res.get("stdout", ""), res
    assert res["sandbox"]["hidden"] < len(cans) // 2, res["sandbox"]


def test_what_a_dead_gbrd_left_aside_is_removed_at_start(make_daemon, home):
    """cache.clean renames a cache aside and removes it on a thread; a
    gbrd killed meanwhile leaves it: the next start removes it."""
    d = start(make_daemon, home, "nons")
    base = os.path.join(d.env["XDG_CACHE_HOME"], "gbr-agent")
    left = os.path.join(base, "0123456789abcdef.old-4242-1")
    keep = os.path.join(base, "not-a-cache.old-1-1")
    os.makedirs(os.path.join(left, "go", "mod", "x@v1"))
    with open(os.path.join(left, "go", "mod", "x@v1", "go.mod"), "w") as f:
        f.write("module x\n")
    os.chmod(os.path.join(left, "go", "mod", "x@v1"), 0o555)   # as Go leaves it
    os.makedirs(keep)
    d.stop()
    d.start()
    deadline = time.time() + 10
    while time.time() < deadline and os.path.exists(left):
        time.sleep(0.05)
    assert not os.path.exists(left)
    assert os.path.isdir(keep), "only gbr's own leftovers go"
