"""Rewind's snapshots never read outside the workspace: a process that
writes the workspace while gbrd snapshots it (another session's command,
an MCP server) swaps a folder for a link to a folder outside, right after
libgit2's walk looked at the folder (the test hook GBR_TEST_SHADOW_PAUSE
holds the walk there, so the race is won every time). Confined by
Landlock, the snapshot cannot open the file behind the link: no object in
the shadow store holds the secret, and no rewind writes it into the
workspace. Without the layer (GBR_TEST_SHADOW_NO_LANDLOCK=1, as on a
kernel without Landlock) the same attack does store the secret, which
shows the attack is real, and daemon.status says snapshots are not
confined."""
import glob
import os
import re
import subprocess
import threading
import time
import zlib

import pytest

from test_rewind import ok, rewind, seq_now
from test_rewind_store import status, store_dir
from test_tools import call

SECRET = b"BEGIN-PRIVATE-KEY-%s" % os.urandom(8).hex().encode()


def landlock_abi():
    """The kernel's Landlock ABI (0: none), as gbrd finds it."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    nr = {"x86_64": 444, "aarch64": 444}.get(os.uname().machine)
    if nr is None:
        return 0
    v = libc.syscall(nr, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(v, 0)


def stored(d):
    """Every object of every store, inflated (loose ones, then packs
    through git when it is there)."""
    out = []
    for p in glob.glob(os.path.join(store_dir(d), "*.git", "objects",
                                    "??", "*")):
        with open(p, "rb") as f:
            out.append(zlib.decompress(f.read()))
    for g in glob.glob(os.path.join(store_dir(d), "*.git")):
        if glob.glob(os.path.join(g, "objects", "pack", "*.pack")):
            r = subprocess.run(["git", "--git-dir=" + g, "cat-file",
                                "--batch-all-objects", "--batch"],
                               capture_output=True, check=True)
            out.append(r.stdout)
    return out


def in_workspace(ws):
    """Whether a file of the workspace holds the secret (links are not
    followed)."""
    for top, dirs, files in os.walk(ws):
        for name in files:
            p = os.path.join(top, name)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                if SECRET in f.read():
                    return p
    return None


def attack(make_daemon, tmpdir_short, env, at):
    """Swaps ws/d for a link to outside/ while a command's snapshot walks
    the workspace, when it meets at: d (the folder, before the walk goes
    into it) or d/key (the file, seen by lstat, not yet read); returns
    (daemon, world, base seq)."""
    env = dict(env, GBR_TEST_SHADOW_PAUSE=at)
    d = make_daemon(env=env)
    top = os.path.join(tmpdir_short, "esc")
    ws, out, aside = (os.path.join(top, n) for n in ("ws", "out", "aside"))
    for p in (os.path.join(ws, "d"), out, aside):
        os.makedirs(p)
    with open(os.path.join(ws, "d", "key"), "w") as f:
        f.write("harmless\n")
    with open(os.path.join(out, "key"), "wb") as f:
        f.write(SECRET + b"\n")
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    w = {"c": c, "sid": sid, "ws": ws, "d": d}
    base = seq_now(w)
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("r", call(
        w, "run_script", language="sh", code="echo ran > ran.txt")))
    t.start()
    # The walk has seen d as a folder: swap it for a link, as a racing
    # process would.
    end = time.time() + 20
    while not glob.glob(os.path.join(store_dir(d), "*.git", "test-paused")):
        assert time.time() < end, "the snapshot never reached d"
        time.sleep(0.01)
    os.rename(os.path.join(ws, "d"), os.path.join(aside, "d"))
    os.symlink(out, os.path.join(ws, "d"))
    for p in glob.glob(os.path.join(store_dir(d), "*.git", "test-paused")):
        os.unlink(p)
    t.join(30)
    assert not t.is_alive()
    assert "result" in res["r"], res["r"]
    return d, w, base


@pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock here")
@pytest.mark.parametrize("at", ["d", "d/key"])
def test_snapshot_cannot_read_through_a_swapped_folder(make_daemon,
                                                       tmpdir_short, at):
    d, w, base = attack(make_daemon, tmpdir_short, {}, at)
    conf = status(d)["shadow"]["confinement"]
    assert conf["active"] is True and conf["abi"] >= 1, conf
    assert not any(SECRET in o for o in stored(d))
    if at == "d/key":
        # The kernel refused the open: that snapshot failed, said so.
        assert re.search(r"rewind: .*d/key.*Permission denied", d.log())
    # Put the folder back and rewind everything, by force: the secret
    # is never written into the workspace.
    ws = w["ws"]
    os.unlink(os.path.join(ws, "d"))
    os.rename(os.path.join(os.path.dirname(ws), "aside", "d"),
              os.path.join(ws, "d"))
    rewind(w, seq=base, force=True)
    assert in_workspace(ws) is None
    assert not any(SECRET in o for o in stored(d))
    # Snapshots still work once nobody races them.
    with open(os.path.join(ws, "d", "key"), "w") as f:
        f.write("edited\n")
    b2 = seq_now(w)
    ok(call(w, "run_script", language="sh", code="echo again > d/key"))
    ok(rewind(w, seq=b2))
    with open(os.path.join(ws, "d", "key")) as f:
        assert f.read() == "edited\n"


@pytest.mark.parametrize("at", ["d", "d/key"])
def test_without_landlock_the_attack_works_and_is_said(make_daemon,
                                                       tmpdir_short, at):
    """The negative control: the same attack with the layer off stores
    the secret (so the test above can fail), and daemon.status and
    gbrd.log say snapshots run unconfined."""
    d, w, base = attack(make_daemon, tmpdir_short,
                        {"GBR_TEST_SHADOW_NO_LANDLOCK": "1"}, at)
    conf = status(d)["shadow"]["confinement"]
    assert conf["active"] is False and conf["abi"] == 0, conf
    assert "GBR_TEST_SHADOW_NO_LANDLOCK" in conf["why_not"], conf
    assert any(SECRET in o for o in stored(d))
    assert "command snapshots run unconfined" in d.log()
