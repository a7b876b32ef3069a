"""Time to the first window: from launching `memlens gui --db PATH` to its window being mapped.

    python -m app.latency_probe --first-window [--db PATH] [--repeat N]

Runs the real command in a child process against an X server (the one in $DISPLAY, or a
private Xvfb it starts when there is none and Xvfb is installed: `apt-get install xvfb`), and
listens on the X server itself for the MapNotify of the child's first top-level window, so the
figure is what a user waits for, import of Python included, and no polling rounds it up. The
child is closed once the window is mapped and its first page of data is up (the child says so
on stderr, see app.gui); the next run starts cold again. A figure, never a test assertion.

libX11 is reached through ctypes: the measurement needs one event, not an X binding.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SUBSTRUCTURE_NOTIFY_MASK = 1 << 19
_MAP_NOTIFY = 19


class _XMapEvent(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("event", ctypes.c_ulong), ("window", ctypes.c_ulong),
                ("override_redirect", ctypes.c_int)]


class _XEvent(ctypes.Union):
    _fields_ = [("type", ctypes.c_int), ("xmap", _XMapEvent), ("pad", ctypes.c_long * 24)]


class MapWatcher:
    """Reports the top-level windows mapped on an X display (MapNotify on the root window)."""

    def __init__(self, display: str) -> None:
        name = ctypes.util.find_library("X11")
        if not name:
            raise RuntimeError("libX11 not found (install libx11-6)")
        x = self.x = ctypes.CDLL(name)
        x.XOpenDisplay.restype = ctypes.c_void_p
        x.XOpenDisplay.argtypes = [ctypes.c_char_p]
        x.XDefaultRootWindow.restype = ctypes.c_ulong
        x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        x.XSelectInput.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_long]
        x.XConnectionNumber.argtypes = [ctypes.c_void_p]
        x.XPending.argtypes = [ctypes.c_void_p]
        x.XNextEvent.argtypes = [ctypes.c_void_p, ctypes.POINTER(_XEvent)]
        x.XFlush.argtypes = [ctypes.c_void_p]
        x.XCloseDisplay.argtypes = [ctypes.c_void_p]
        self.dpy = x.XOpenDisplay(display.encode())
        if not self.dpy:
            raise RuntimeError(f"cannot open X display {display}")
        x.XSelectInput(self.dpy, x.XDefaultRootWindow(self.dpy), _SUBSTRUCTURE_NOTIFY_MASK)
        x.XFlush(self.dpy)
        self.fd = x.XConnectionNumber(self.dpy)

    def wait_for_map(self, deadline: float) -> float | None:
        """perf_counter() at the first MapNotify of a normal (not override-redirect) window."""
        ev = _XEvent()
        while time.perf_counter() < deadline:
            while self.x.XPending(self.dpy):
                self.x.XNextEvent(self.dpy, ctypes.byref(ev))
                if ev.type == _MAP_NOTIFY and not ev.xmap.override_redirect:
                    return time.perf_counter()
            select.select([self.fd], [], [], max(0.0, min(0.05, deadline - time.perf_counter())))
        return None

    def close(self) -> None:
        self.x.XCloseDisplay(self.dpy)


def _start_xvfb() -> tuple[subprocess.Popen, str]:
    if shutil.which("Xvfb") is None:
        raise RuntimeError("no X display and no Xvfb: set DISPLAY or install Xvfb (apt-get install xvfb)")
    for n in range(90, 140):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            proc = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(100):  # up to 10 s until it accepts a client
                if proc.poll() is not None:
                    break  # lost a race for the number: try the next one
                try:
                    MapWatcher(f":{n}").close()
                    return proc, f":{n}"
                except RuntimeError:
                    time.sleep(0.1)
            if proc.poll() is not None:
                continue
            proc.kill()
            raise RuntimeError("Xvfb did not start")
    raise RuntimeError("no free X display number")


def _demo_db(folder: Path) -> Path:
    path = folder / "demo.db"
    subprocess.run([sys.executable, "-m", "app.cli", "demo", "--no-gui", "--db", str(path), "--json"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_child_env(folder))
    return path


def _child_env(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("QT_QPA_PLATFORM", None)  # the real windowing system, not offscreen
    env["MEMLENS_SETTINGS_FILE"] = str(folder / "settings.conf")  # no recent files or geometry of the user's
    env["MEMLENS_REPORT_READY"] = "1"
    return env


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time a process has used (all its threads), from /proc: on a machine shared with
    other work it says what the start-up cost, apart from the wait for a core. None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 3)


def _ready_line(child: subprocess.Popen, deadline: float) -> dict[str, float] | None:
    """The child's "memlens-ready name=<perf_counter> ..." line (app.gui.report_ready): when its
    first page of data was up and when the embedding model had loaded. perf_counter is the
    system's monotonic clock, so the child's stamps compare with ours."""
    assert child.stderr is not None  # started with stderr=PIPE
    fd = child.stderr.fileno()
    buf = b""
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, min(0.2, deadline - time.perf_counter())))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return None  # the child exited
        buf += chunk
        for line in buf.decode("utf-8", "replace").splitlines():
            if line.startswith("memlens-ready "):
                return {k: float(v) for k, v in (kv.split("=", 1) for kv in line.split()[1:])}
    return None


def measure(db: Path | None, repeat: int, timeout: float = 60.0) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="memlens-first-window-"))
    xvfb = None
    display = os.environ.get("DISPLAY")
    try:
        if not display:
            xvfb, display = _start_xvfb()
        db = db or _demo_db(folder)
        runs = []
        for _ in range(repeat):
            env = _child_env(folder) | {"DISPLAY": display}
            watcher = MapWatcher(display)
            t0 = time.perf_counter()
            child = subprocess.Popen([sys.executable, "-m", "app.cli", "gui", "--db", str(db)], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            mapped = watcher.wait_for_map(t0 + timeout)
            cpu = _cpu_seconds(child.pid) if mapped is not None else None
            watcher.close()
            ready = _ready_line(child, time.perf_counter() + timeout) if mapped is not None else None
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            runs.append({"mapped_s": None if mapped is None else round(mapped - t0, 3),
                         "cpu_before_map_s": cpu,
                         **({f"{k}_s": round(v - t0, 3) for k, v in ready.items()} if ready else {})})
        maps = sorted(r["mapped_s"] for r in runs if r["mapped_s"] is not None)
        cpus = sorted(r["cpu_before_map_s"] for r in runs if r["cpu_before_map_s"] is not None)
        return {"db": str(db), "display": display, "xvfb": xvfb is not None, "cpus": os.cpu_count(),
                "load_average": [round(x, 2) for x in os.getloadavg()], "runs": runs,
                "mapped_s": {"min": maps[0] if maps else None, "median": maps[len(maps) // 2] if maps else None,
                             "max": maps[-1] if maps else None},
                "cpu_before_map_s": {"median": cpus[len(cpus) // 2] if cpus else None}}
    finally:
        if xvfb is not None:
            xvfb.terminate()
            xvfb.wait()
        shutil.rmtree(folder, ignore_errors=True)
