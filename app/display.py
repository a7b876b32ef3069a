"""Is there a display the inspector can open a window on? Asked before Qt is loaded.

Without one, Qt prints its platform-plugin message and aborts the process (SIGABRT), which says
nothing about what to do. `display_problem()` returns one line that does, or None when a window
can open: on Linux (and the other X11/Wayland systems) it connects to the Wayland socket or the X
server the environment names; Qt's headless platforms (offscreen, minimal, vnc, ...) need none;
macOS and Windows always have one in a user session.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

WINDOWING_PLATFORMS = ("xcb", "wayland", "wayland-egl")  # the QT_QPA_PLATFORM values that need a server
CONNECT_TIMEOUT_S = 1.0
WHAT_TO_DO = ("run it in a desktop session (or over ssh -X), or render the panes headless with "
              "`memlens snapshot --out DIR`")


def _connects(family: int, address: str | tuple[str, int]) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(CONNECT_TIMEOUT_S)
        try:
            s.connect(address)
        except OSError:
            return False
    return True


def x11_reachable(display: str) -> bool:
    """DISPLAY as X11 spells it ([host]:number[.screen]) -> does its server accept a connection?"""
    host, sep, rest = display.rpartition(":")
    number = rest.split(".", 1)[0]
    if not sep or not number.isdigit():
        return False
    if host in ("", "unix"):
        path = f"/tmp/.X11-unix/X{number}"
        if sys.platform.startswith("linux") and _connects(socket.AF_UNIX, "\0" + path):  # the abstract socket
            return True
        return _connects(socket.AF_UNIX, path)
    if host.startswith("/"):  # a launchd-style socket path (XQuartz)
        return _connects(socket.AF_UNIX, display)
    return _connects(socket.AF_INET, (host, 6000 + int(number)))


def wayland_reachable(name: str, runtime_dir: str | None) -> bool:
    """WAYLAND_DISPLAY (a socket name in XDG_RUNTIME_DIR, or a path) -> does the compositor accept?"""
    if name.startswith("/"):
        return _connects(socket.AF_UNIX, name)
    return bool(runtime_dir) and _connects(socket.AF_UNIX, str(Path(runtime_dir or "") / name))


def display_problem(environ: Mapping[str, str] | None = None, platform: str | None = None) -> str | None:
    """None when a window can open, else one line: what is missing and what to do instead."""
    env = os.environ if environ is None else environ
    if (sys.platform if platform is None else platform) in ("win32", "darwin"):
        return None
    qpa = (env.get("QT_QPA_PLATFORM") or "").split(";")[0].split(":")[0].strip().lower()
    if qpa and qpa not in WINDOWING_PLATFORMS:
        return None  # offscreen, minimal, vnc, eglfs, linuxfb: Qt needs no display server
    x11, wayland = env.get("DISPLAY") or "", env.get("WAYLAND_DISPLAY") or ""
    if qpa != "xcb" and wayland and wayland_reachable(wayland, env.get("XDG_RUNTIME_DIR")):
        return None
    if not qpa.startswith("wayland") and x11 and x11_reachable(x11):
        return None
    if not x11 and not wayland:
        return f"no display to open the inspector on (DISPLAY and WAYLAND_DISPLAY are unset): {WHAT_TO_DO}"
    named = " or ".join(f"{k}={v}" for k, v in (("WAYLAND_DISPLAY", wayland), ("DISPLAY", x11)) if v)
    return f"cannot reach the display {named}: {WHAT_TO_DO}"
