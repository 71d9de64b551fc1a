"""Debian's headless Chromium driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: commands on the browser's fd 3, answers and events
on its fd 4, each a JSON message ended by a NUL byte), so that tests need no
WebDriver, no websocket library and no debugging port.

    with Chromium() as browser:
        page = browser.open("http://127.0.0.1:8080/")
        page.wait_for("document.querySelectorAll('[data-chip]').length > 0")
        page.screenshot("pod.png")
        browser.requested_urls  # every URL a page asked for
"""

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class ChromiumError(Exception):
    pass


class Page:
    def __init__(self, browser, session):
        self.browser = browser
        self.session = session

    def send(self, method, **params):
        return self.browser.send(method, session=self.session, **params)

    def evaluate(self, expression):
        """The expression's value, awaited if it is a promise."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise ChromiumError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression, timeout=30, every=0.1):
        """Until the expression is truthy in the page; its value."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = self.evaluate(expression)
            if last:
                return last
            time.sleep(every)
        raise ChromiumError(f"timed out after {timeout} s waiting for {expression} (last: {last!r})")

    def screenshot(self, path):
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path


class Chromium:
    def __init__(self, width=1400, height=1000):
        self.profile = tempfile.mkdtemp(prefix="tpuemu-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Above 2 in the child: fds 3 and 4 are the protocol's.
        high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)

        def child_fds():
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "--no-first-run", "--no-default-browser-check",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--disable-default-apps", "--metrics-recording-only",
             # Names resolve to nothing: a page that reached past localhost would fail visibly.
             "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=child_fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_browser_r, from_browser_w, high_r, high_w):
            os.close(fd)
        self._next_id = 0
        self._answers = {}
        self._answered = threading.Condition()
        self.requested_urls = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        buffered = b""
        while True:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                break
            buffered += chunk
            while b"\0" in buffered:
                raw, buffered = buffered.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._answered:
                        self._answers[message["id"]] = message
                        self._answered.notify_all()
                elif message.get("method") == "Network.requestWillBeSent":
                    self.requested_urls.append(message["params"]["request"]["url"])
        with self._answered:
            self._answered.notify_all()

    def send(self, method, session=None, timeout=60, **params):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        with self._answered:
            while self._next_id not in self._answers:
                if self.proc.poll() is not None:
                    raise ChromiumError(f"chromium exited ({self.proc.returncode}) during {method}")
                remaining = deadline - time.time()
                if remaining <= 0:
                    raise ChromiumError(f"{method}: no answer in {timeout} s")
                self._answered.wait(timeout=min(remaining, 1.0))
            answer = self._answers.pop(self._next_id)
        if "error" in answer:
            raise ChromiumError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def open(self, url):
        """A new tab showing url, once loaded, with its network requests recorded."""
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Network"):
            page.send(f"{domain}.enable")
        page.send("Page.navigate", url=url)
        page.wait_for("document.readyState === 'complete'")
        return page

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except ChromiumError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
