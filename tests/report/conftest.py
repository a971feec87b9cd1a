"""Headless Chromium, driven over the DevTools protocol, for checking HTML pages.

Chromium is started with ``--remote-debugging-pipe``: it reads protocol
commands (JSON, each ending in a NUL byte) from file descriptor 3 and writes
replies and events to descriptor 4.  No port, no websocket library.  A page is
opened in a fresh tab; every console error, uncaught exception and log entry
of level "error" is kept; the SVG elements are measured; a screenshot is
taken and its distinct colours are counted by the browser itself (drawn on a
canvas), so no image library is needed here.

The fixture ``chromium`` needs Debian's ``chromium`` (scripts/setup.sh installs
it); without it its tests fail with the one-line message that names the package.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from minic import tools

TIMEOUT_S = 60.0
WIDTH, HEIGHT = 1200, 2000

# Runs in the page: every <svg>'s box and how many shapes it draws.
SVG_PROBE = """JSON.stringify(Array.from(document.querySelectorAll('svg')).map(s => {
  const r = s.getBoundingClientRect();
  return {w: r.width, h: r.height, shapes: s.querySelectorAll('path,polygon,rect,ellipse,polyline').length};
}))"""

# Runs in the page: decode a PNG (data URL) on a canvas; count distinct colours
# and the share of pixels that differ from the top-left one (the background).
COLOUR_PROBE = """new Promise((resolve, reject) => {
  const img = new Image();
  img.onload = () => {
    const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
    const g = c.getContext('2d'); g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    const seen = new Set(); let differ = 0;
    for (let i = 0; i < d.length; i += 4) {
      const key = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
      seen.add(key);
      if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) differ++;
    }
    resolve(JSON.stringify({colours: seen.size, ink: differ / (d.length / 4), w: img.width, h: img.height}));
  };
  img.onerror = () => reject(new Error('screenshot did not decode'));
  img.src = 'data:image/png;base64,' + SHOT;
})"""


@dataclass
class PageCheck:
    errors: list[str] = field(default_factory=list)       # console errors, exceptions, error log entries
    svgs: list[dict] = field(default_factory=list)        # {w, h, shapes} per <svg>
    screenshot: bytes = b""                               # PNG
    colours: int = 0                                      # distinct colours in the screenshot
    ink: float = 0.0                                      # share of pixels unlike the background


class Chromium:
    """One headless browser process; ``check(path)`` opens a page in a new tab."""

    def __init__(self, exe: str, profile_dir: str) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds() -> None:            # the protocol wants exactly fds 3 (in) and 4 (out)
            # Copy both ends above 10 first: either may itself be fd 3 or 4.
            a, b = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)                   # dup2 makes 3 and 4 inheritable; every other
            os.dup2(b, 4)                   # pipe end is closed at exec (PEP 446)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={profile_dir}", "--remote-debugging-pipe", f"--window-size={WIDTH},{HEIGHT}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=child_fds, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._inbox: queue.Queue = queue.Queue()
        self._events: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                self._inbox.put(None)
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for m in messages:
                self._inbox.put(json.loads(m))

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send a command and wait for its reply; events that arrive meanwhile are kept."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._get(deadline, method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self._events.append(reply)

    def _get(self, deadline: float, waiting_for: str) -> dict:
        try:
            message = self._inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(f"chromium: no answer to {waiting_for} in {TIMEOUT_S} s") from None
        if message is None:
            raise RuntimeError("chromium closed the DevTools pipe")
        return message

    def wait_event(self, method: str, session: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        if any(e.get("method") == method and e.get("sessionId") == session for e in self._events):
            return
        while True:
            event = self._get(deadline, method)
            self._events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return

    def evaluate(self, expression: str, session: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate failed: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def check(self, page: Path) -> PageCheck:
        """Open the file ``page`` in a new tab, wait for its load event, and measure it."""
        url = Path(page).resolve().as_uri()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT,
                                                         "deviceScaleFactor": 1, "mobile": False}, session)
        self._events.clear()
        self.send("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session)
        out = PageCheck(svgs=json.loads(self.evaluate(SVG_PROBE, session)))
        shot = self.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
        out.screenshot = base64.b64decode(shot)
        pixels = json.loads(self.evaluate(COLOUR_PROBE.replace("SHOT", json.dumps(shot)), session))
        out.colours, out.ink = pixels["colours"], pixels["ink"]
        out.errors = _errors([e for e in self._events if e.get("sessionId") == session])
        self.send("Target.closeTarget", {"targetId": target})
        return out

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append("console." + params["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                    for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            out.append(f"log: {params['entry'].get('text')}")
    return out


@pytest.fixture(scope="session")
def chromium():
    exe = tools.chromium()
    with tempfile.TemporaryDirectory(prefix="minic-chromium-") as profile:
        browser = Chromium(exe, profile)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def mlp_report(tmp_path_factory):
    """The small MLP's report data and page (two backends, one timed repeat: fast)."""
    from minic.report import collect, render_page
    data = collect("mlp", size="small", backend_names=["interp", "minic"], repeat=2)
    path = tmp_path_factory.mktemp("report") / "mlp.html"
    path.write_text(render_page(data))
    return data, path
