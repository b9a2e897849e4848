"""The file tools' sandbox on Windows, attacked through tool.call against
gbrd.exe under Wine: the Linux attack corpus (test_tools.py) where it
means something there, and the Windows tricks: alternate data streams,
device names, drive letters and UNC prefixes, trailing dots and spaces,
backslashes, case variants and short names of protected files, hard
links, and a link swapped in between two calls. Every attack must be
refused with a sandbox kind, leave the file outside as it was, and
create nothing outside the workspace.

What Wine cannot make is said where it is skipped: no Windows symbolic
link or junction can be created under Wine 8 (CreateSymbolicLinkW says
yes and makes nothing; FSCTL_SET_REPARSE_POINT is refused), and names
have no 8.3 short form there. Unix symlinks made from the Linux side
are what Wine has instead, and Wine follows them even when asked not to
(FILE_OPEN_REPARSE_POINT): the sandbox's check of each handle's final
path is what refuses them."""
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

DENIED = {"path_traversal", "invalid_path", "not_found", "not_a_file",
          "permission_denied", "too_large", "protected_path", "read_only"}


@pytest.fixture(scope="module", autouse=True)
def wine_ready():
    wine.boot()


@pytest.fixture(scope="module")
def world():
    top = tempfile.mkdtemp(prefix="gbrws-", dir="/tmp")
    os.chmod(top, 0o700)
    ws = os.path.join(top, "proj")
    out = os.path.join(top, "outside")
    evil = os.path.join(top, "proj-evil")
    for d in (ws, out, evil):
        os.makedirs(d)
    secret = os.path.join(out, "secret.txt")
    with open(secret, "w") as f:
        f.write("TOP SECRET\n")
    with open(os.path.join(ws, "hello.txt"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(ws, "gleam.toml"), "w") as f:
        f.write("name = \"x\"\n")
    os.makedirs(os.path.join(ws, ".gbr_envs"))
    with open(os.path.join(ws, ".gbr_envs", "default.ini"), "w") as f:
        f.write("[env]\nprotected_files = gleam.toml, src/*.cfg\n")
    # The links Wine has: Unix symlinks, made from this side.
    os.symlink(secret, os.path.join(ws, "ln_file"))
    os.symlink(out, os.path.join(ws, "ln_dir"))
    os.symlink("ln_file", os.path.join(ws, "ln_chain"))
    os.symlink("../outside/secret.txt", os.path.join(ws, "ln_rel"))
    os.symlink("/nonexistent/zzz", os.path.join(ws, "ln_dangling"))
    os.symlink("/proc/self/root" + secret, os.path.join(ws, "ln_proc_root"))
    os.makedirs(os.path.join(ws, "sub"))
    os.symlink("..", os.path.join(ws, "sub", "up"))
    os.link(secret, os.path.join(ws, "hardlink"))
    root = os.path.join(top, "d")
    os.makedirs(root)
    d = wine.WinDaemon(root)
    d.start()
    c = d.conn()
    sid = c.call("session.create", {"workspace": wine.winpath(ws)})["result"]["id"]
    yield {"top": top, "ws": ws, "out": out, "evil": evil, "secret": secret,
           "d": d, "c": c, "sid": sid}
    d.stop()
    shutil.rmtree(top, ignore_errors=True)


def snapshot(top, ws):
    """Every path outside the workspace, with its content."""
    got = {}
    for dirpath, dirs, files in os.walk(top):
        if dirpath.startswith(ws) or "/d/" in dirpath + "/":
            continue
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                got[p] = fh.read()
    return got


def call(world, tool, **args):
    return world["c"].call("tool.call", {"session": world["sid"], "tool": tool,
                                         "args": args})


ATTACKS = [
    # The Linux corpus, as Windows paths where it names one.
    "../outside/secret.txt", "../../outside/secret.txt", "a/../../outside/secret.txt",
    "./../outside/secret.txt", "sub/../../outside/secret.txt",
    "..", "../proj-evil/x.txt", "{evil}/x.txt", "{secret}", "/etc/passwd",
    "ln_file", "ln_dir/secret.txt", "ln_chain", "ln_rel", "ln_dangling",
    "ln_proc_root", "sub/up/ln_file", "a\u0007b", "a\u202eb.txt", "x" * 5000,
    ("d/" * 3000) + "f",
    # Windows: drive letters, drive-relative, rooted, UNC and device prefixes.
    "C:/windows/win.ini", "C:\\windows\\win.ini", "C:win.ini", "Z:/etc/passwd",
    "\\etc\\passwd", "//localhost/c$/windows/win.ini", "\\\\?\\C:\\windows\\win.ini",
    "\\\\.\\C:\\windows\\win.ini", "\\\\?\\UNC\\localhost\\c$\\x",
    # Alternate data streams.
    "hello.txt:evil", "hello.txt::$DATA", "hello.txt:evil:$DATA",
    # Device names, with or without an extension, in any folder.
    "CON", "nul.txt", "COM1", "lpt1.log", "CONIN$", "sub/aux", "AUX.tar.gz",
    # Trailing dots and spaces, which Win32 strips.
    "hello.txt.", "hello.txt ", "sub./x", "sub /x",
    # 8.3 short names: of a protected file, and of a folder outside.
    "GLEAM~1.TOM", "gleam~1.tom", "GBR_EN~1/default.ini", "../OUTSID~1/secret.txt",
    # Backslashes as separators, and mixed.
    "..\\outside\\secret.txt", "sub\\..\\..\\outside\\secret.txt",
    "sub/..\\..\\outside/secret.txt",
]


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
@pytest.mark.parametrize("attack", ATTACKS)
def test_attack(world, tool, attack):
    path = attack.format(evil=wine.winpath(world["evil"]),
                         secret=wine.winpath(world["secret"]))
    before = snapshot(world["top"], world["ws"])
    args = {"path": path}
    if tool == "write_file":
        args["content"] = "PWNED"
    r = call(world, tool, **args)
    # Whatever the answer, nothing outside the workspace changed.
    with open(world["secret"]) as f:
        assert f.read() == "TOP SECRET\n"
    assert snapshot(world["top"], world["ws"]) == before
    assert not os.path.exists("/nonexistent/zzz")
    if path == "ln_dangling" and tool == "write_file" and "result" in r:
        # Wine shows a dangling Unix symlink as no file at all, so the
        # write made a new file in the link's place, inside the
        # workspace (checked above: nothing outside). Real Windows sees
        # a reparse point and refuses it, as Linux does.
        assert not os.path.islink(os.path.join(world["ws"], "ln_dangling"))
        return
    assert "error" in r, (path, r)
    kind = r["error"]["data"]["kind"]
    assert kind in DENIED, (path, kind, r["error"]["message"])


def test_listing_and_search_never_leave_the_workspace(world):
    r = call(world, "list_directory", path=".", depth=4)["result"]["result"]
    shown = json.dumps(r)
    assert "secret.txt" not in shown
    r = call(world, "search", pattern="TOP SECRET")["result"]["result"]
    # A hard link is the same file under a name of the workspace (only a
    # write through it is refused); nothing is found through a link.
    assert [m["path"] for m in r["matches"]] == ["hardlink"]
    r = call(world, "search", pattern="TOP SECRET", path="ln_dir")
    assert r["error"]["data"]["kind"] in DENIED


def test_hard_link_write_refused(world):
    r = call(world, "write_file", path="hardlink", content="PWNED")
    assert "error" in r and r["error"]["data"]["kind"] in DENIED
    with open(world["secret"]) as f:
        assert f.read() == "TOP SECRET\n"


def test_case_variants_of_protected_files_ask_a_human(world):
    """GLEAM.TOML is gleam.toml on Windows: the write waits for a human
    like the file's own name does (denied here), and nothing changes."""
    c, h = world["c"], world["d"].conn()
    for path in ("GLEAM.TOML", "Gleam.Toml", "SRC/X.CFG", ".GBR_ENVS/default.ini"):
        rid = c.request("tool.call", {"session": world["sid"], "tool": "write_file",
                                      "args": {"path": path, "content": "PWNED"}})
        deadline = time.time() + 20
        while not (pend := h.call("approval.list", {"session": world["sid"]})["result"]["approvals"]):
            assert time.time() < deadline, "no approval for %s" % path
            time.sleep(0.05)
        assert h.call("approval.resolve", {"id": pend[0]["id"], "decision": "deny",
                                           "reason": "test"})["result"]
        while True:
            m = c.recv()
            if m.get("id") == rid:
                break
        assert m["error"]["data"]["kind"] == "denied", (path, m)
    with open(os.path.join(world["ws"], "gleam.toml")) as f:
        assert f.read() == "name = \"x\"\n"
    assert not os.path.exists(os.path.join(world["ws"], "src"))


def test_short_names_of_protected_files(world):
    """8.3 short names ("GLEAM~1.TOM"): the write policy judges the name as
    the file system spells it (its final path). Wine gives no short names:
    cmd's %~s modifier answers with the long one."""
    ws = wine.winpath(world["ws"]).replace("/", "\\")
    p = subprocess.run([wine.WINE, "cmd.exe", "/c", "for %I in (" + ws +
                        "\\gleam.toml) do @echo %~snxI"], env=world["d"].env,
                       capture_output=True, text=True, timeout=60)
    short = p.stdout.strip()
    if not short or short.lower() == "gleam.toml":
        pytest.skip("Wine has no 8.3 short names (cmd's %%~s gave %r); only real "
                    "Windows can show this" % short)
    r = call(world, "write_file", path=short, content="PWNED")
    assert "error" in r and r["error"]["data"]["kind"] in DENIED | {"denied"}


def test_a_link_swapped_in_between_two_calls(world):
    """A folder read a moment ago becomes a link out: the next call is
    refused, nothing outside is written."""
    ws = world["ws"]
    os.makedirs(os.path.join(ws, "swap"))
    r = call(world, "write_file", path="swap/a.txt", content="one")
    assert "result" in r, r
    shutil.rmtree(os.path.join(ws, "swap"))
    os.symlink(world["out"], os.path.join(ws, "swap"))
    try:
        r = call(world, "write_file", path="swap/a.txt", content="PWNED")
        assert "error" in r and r["error"]["data"]["kind"] in DENIED
        r = call(world, "read_file", path="swap/secret.txt")
        assert "error" in r and r["error"]["data"]["kind"] in DENIED
        assert not os.path.exists(os.path.join(world["out"], "a.txt"))
    finally:
        os.unlink(os.path.join(ws, "swap"))


@pytest.mark.parametrize("path", ["a..b.txt", "d1/d2/d3/d4/d5/f.txt",
                                  "héllo-ünï.txt", "日本語.txt", "sub/../hello.txt",
                                  "with space.txt", "x.tar.gz"])
def test_legitimate(world, path):
    target = os.path.join(world["ws"], path)
    if not os.path.lexists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write("hello\n")
    r = call(world, "read_file", path=path)
    assert "result" in r, (path, r)
    assert r["result"]["result"]["content"] == "hello\n"
    r = call(world, "write_file", path=path, content="new")
    assert "result" in r, (path, r)
    with open(os.path.normpath(target)) as f:
        assert f.read() == "new"
