"""test_threads.py: two workspaces in two threads compute each its own values (the GIL is
released around runs, so they run side by side), and one workspace used from two threads
takes turns (a Python caller waits where the C API would answer DM_ERR_BUSY)."""
import threading
import time

import numpy as np

from demitasse import core, workspace


def scale_net(name):
    net = core.Net(name)
    net.Scale("x", "y", scale=3.0)
    return net


def test_two_workspaces_in_two_threads():
    errors, results = [], {}

    def work(k):
        try:
            ws = workspace.Workspace()
            ws.CreateNet(scale_net("n"))
            for i in range(300):
                x = np.full((64, 64), k * 1000 + i, np.float32)
                ws.FeedBlob("x", x)
                ws.RunNet("n")
                y = ws.FetchBlob("y")
                if not np.array_equal(y, 3 * x):
                    errors.append((k, i))
            results[k] = ws.FetchBlob("y")[0, 0]
        except Exception as e:  # reported below, on the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == {1: 3 * 1299, 2: 3 * 2299}


def test_one_workspace_from_two_threads_takes_turns():
    ws = workspace.Workspace()
    ws.FeedBlob("x", np.ones((256, 256), np.float32))
    ws.CreateNet(scale_net("n"))
    errors = []

    def work():
        try:
            for _ in range(200):
                ws.RunNet("n")
                ws.FetchBlob("y")
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors  # no DM_ERR_BUSY: the second caller waited


def test_runs_release_the_gil():
    """While one thread is inside a run, another runs Python code: iterations of the main
    thread's loop land inside the worker's run (with the GIL held, none could)."""
    ws = workspace.Workspace()
    ws.FeedBlob("a", np.ones((384, 384), np.float32))
    net = core.Net("slow")
    for _ in range(8):
        net.MatMul(["a", "a"], "c")
    ws.CreateNet(net)
    window = []

    def work():
        t0 = time.perf_counter()
        ws.RunNet("slow", num_iter=10)
        window.extend([t0, time.perf_counter()])

    t = threading.Thread(target=work)
    stamps = []
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
    t.join()
    inside = sum(window[0] < s < window[1] for s in stamps)
    assert inside > 100, (inside, window[1] - window[0])
