"""The symlink-swap race through tool.call: while a thread swaps
a folder inside the workspace with a symlink that points outside, as fast
as it can, the agent's tools keep working on that path through the real
daemon. Every read must see the inside file or fail with a structured
refusal; no write may land outside; the secret outside never changes."""
import ctypes
import os
import threading

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def test_symlink_swapped_between_operations(daemon, tmpdir_short):
    top = os.path.join(tmpdir_short, "w")
    ws = os.path.join(top, "proj")
    out = os.path.join(top, "outside")
    race = os.path.join(ws, "race")
    os.makedirs(os.path.join(race, "d"))
    os.makedirs(out)
    with open(os.path.join(race, "d", "f.txt"), "w") as f:
        f.write("inside\n")
    with open(os.path.join(race, "d", "e.txt"), "w") as f:
        f.write("a\n")
    with open(os.path.join(out, "e.txt"), "w") as f:
        f.write("a\n")
    with open(os.path.join(out, "f.txt"), "w") as f:
        f.write("TOP SECRET\n")
    os.symlink(out, os.path.join(race, "l"))
    before = sorted(os.listdir(out))

    c = daemon.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]

    stop = threading.Event()
    swaps = [0]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                               ctypes.c_char_p, ctypes.c_uint]
    errors = []

    def swapper():
        # d and l change places atomically (RENAME_EXCHANGE): the path
        # race/d is always there, a real folder one moment and a link out
        # of the workspace the next.
        d, l = (os.path.join(race, n).encode() for n in ("d", "l"))
        while not stop.is_set():
            if libc.renameat2(AT_FDCWD, d, AT_FDCWD, l, RENAME_EXCHANGE) != 0:
                errors.append(os.strerror(ctypes.get_errno()))
                return
            swaps[0] += 1

    th = threading.Thread(target=swapper)
    th.start()
    kinds = {}
    reads_inside = 0
    try:
        for i in range(600):
            tool, args = [
                ("read_file", {"path": "race/d/f.txt"}),
                ("write_file", {"path": "race/d/new%d.txt" % i,
                                "content": "x\n"}),
                ("list_directory", {"path": "race/d"}),
                ("edit_file", {"path": "race/d/e.txt",
                               "old_string": "ab"[i // 4 % 2],
                               "new_string": "ba"[i // 4 % 2]}),
            ][i % 4]
            r = c.call("tool.call", {"session": sid, "tool": tool,
                                     "args": args})
            if "error" in r:
                k = r["error"]["data"]["kind"]
                assert k in ("path_traversal", "not_found", "not_unique"), r
                kinds[k] = kinds.get(k, 0) + 1
                continue
            res = r["result"]["result"]
            text = str(res)
            assert "TOP SECRET" not in text, r
            if tool == "read_file":
                assert "inside" in text, r
                reads_inside += 1
    finally:
        stop.set()
        th.join()
    # The race really happened: both outcomes were seen.
    assert errors == []
    assert swaps[0] > 100
    assert kinds.get("path_traversal", 0) > 0, kinds
    assert reads_inside > 0
    # Nothing outside changed or appeared.
    assert sorted(os.listdir(out)) == before
    with open(os.path.join(out, "f.txt")) as f:
        assert f.read() == "TOP SECRET\n"
    with open(os.path.join(out, "e.txt")) as f:
        assert f.read() == "a\n"
    # The writes that succeeded are inside the workspace.
    inside = set()
    for d, dirs, files in os.walk(ws):
        inside.update(n for n in files if n.startswith("new"))
    assert inside, "no write ever succeeded"
