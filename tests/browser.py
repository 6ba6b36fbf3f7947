"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: fd 3 in, fd 4 out,
NUL-separated JSON), for tests that click in the HTML report and take its downloads. No websocket client and no
browser-automation package: the protocol is small and the pipe needs only the standard library. The same binary
and skip rule as tests/test_report_junit_html.py's browser test."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
READY_POLLS = 400  # polls of 50 ms; only a hung browser runs out (never what a test asserts)


def need_chromium() -> None:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have Chromium at {CHROMIUM} (.ci/run installs Debian's `chromium`)")
        pytest.skip(f"no Chromium at {CHROMIUM}: `apt-get install chromium` to run the browser test")


class Browser:
    """One headless Chromium with one page; `call` sends a command to the page, `browser_call` to the browser."""

    def __init__(self, profile: Path, url: str, size: tuple[int, int] = (1280, 1600)):
        to_child_r, self._out = os.pipe()
        self._in, from_child_w = os.pipe()

        def fds() -> None:  # the protocol's fixed descriptors in the child
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.process = subprocess.Popen(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}", url],
            pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        targets = self.browser_call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.browser_call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]

    def _send(self, message: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        message["id"] = self._next
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._in, 1 << 16)
                if not chunk:
                    raise RuntimeError("Chromium closed the DevTools pipe")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{message['method']}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def browser_call(self, method: str, **params: Any) -> dict[str, Any]:
        return self._send({"method": method, "params": params})

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self._send({"method": method, "params": params, "sessionId": self.session})

    def js(self, expression: str) -> Any:
        """The expression's value in the page, run as a user gesture (a click in it counts as the person's)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, userGesture=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str) -> Any:
        for _ in range(READY_POLLS):
            try:
                value = self.js(expression)
            except RuntimeError:  # the document is not there yet (still loading)
                value = None
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"never true in the page: {expression}")

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))

    def close(self) -> None:
        try:
            self.browser_call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._out)
        os.close(self._in)
