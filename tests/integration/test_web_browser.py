"""``gpuscale serve`` end to end: the real server in a subprocess, driven by headless Chromium from
Debian's packages (``chromium``, ``chromium-driver``; ``.ci/run`` installs them) through Selenium.

Missing Chromium fails these tests rather than skipping them: the browser check is part of CI.
"""

from __future__ import annotations

import os
import re
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SRC = Path(__file__).resolve().parents[2] / "src"
START_TIMEOUT_S = 60
WAIT_S = 90
"""A query runs the fit, the plan search and the scale curve: well under a second alone, but CI
machines are shared."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _serve(*args: str, log: Path | None = None) -> subprocess.Popen[str]:
    """The server in a child process; its request log goes to ``log`` (a pipe nobody reads
    could fill up and stall it), else to a pipe read once it exits."""
    stderr = log.open("w") if log is not None else subprocess.PIPE
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "gpuscale.cli.main", "serve", *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=_child_env(),
        )
    finally:
        if log is not None:
            stderr.close()


def _reap(proc: subprocess.Popen[str]) -> None:
    """Stop the child and wait for it, whatever state it is in."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _url_line(proc: subprocess.Popen[str]) -> str:
    """The URL the server prints once its socket is bound (port 0: the OS picked a free one)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            line = proc.stdout.readline()
            if not line:  # the child exited before serving
                break
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if found:
                return found.group(0)
    _reap(proc)
    raise AssertionError(f"gpuscale serve printed no URL within {START_TIMEOUT_S} s")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    proc = _serve("--port", "0", log=tmp_path / "server.log")
    try:
        yield _url_line(proc)
    finally:
        _reap(proc)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, (
        f"missing {', '.join(missing)}: apt-get install -y chromium chromium-driver (see .ci/run)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,2200",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _submit(driver: WebDriver) -> None:
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, "submit").click()

    def replaced(_: WebDriver) -> bool:
        # ec.staleness_of expects StaleElementReferenceException only; while Chrome swaps the
        # document it can also answer "Node with given id does not belong to the document"
        # (a plain WebDriverException): the old page is gone either way. What the new page
        # shows is checked by the waits that follow.
        try:
            old.is_enabled()
        except WebDriverException:
            return True
        return False

    WebDriverWait(driver, WAIT_S).until(replaced)


def test_training_page_in_chromium(server: str, browser: WebDriver, tmp_path: Path) -> None:
    browser.get(server)
    assert "gpuscale" in browser.title
    Select(browser.find_element(By.ID, "model")).select_by_value("llama3.1-8b")
    Select(browser.find_element(By.ID, "gpu")).select_by_value("h100-sxm")
    Select(browser.find_element(By.ID, "inter")).select_by_value("ib-ndr400")
    gpus = browser.find_element(By.ID, "gpus")
    gpus.clear()
    gpus.send_keys("64")
    _submit(browser)

    verdict = WebDriverWait(browser, WAIT_S).until(
        ec.visibility_of_element_located((By.ID, "verdict"))
    )
    assert verdict.text.startswith("a cluster:"), verdict.text
    assert "64 GPUs" in verdict.text
    rows = browser.find_elements(By.CSS_SELECTOR, "#plans tbody tr")
    assert len(rows) >= 3
    # plotly.js (served by the page) drew every figure: each plot holds an SVG with data in it
    WebDriverWait(browser, WAIT_S).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")) >= 5
    )
    plots = browser.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
    assert len(plots) == browser.page_source.count("Plotly.newPlot(")
    for plot in plots:
        assert plot.find_elements(By.CSS_SELECTOR, "svg.main-svg")
        drawn = plot.find_elements(By.CSS_SELECTOR, ".trace, .bars path, .scatterlayer path")
        assert drawn, "a plot without data"
    assert browser.find_element(By.ID, "download-report").is_displayed()
    assert browser.find_elements(By.CSS_SELECTOR, "[id^=export-]")
    browser.save_screenshot(str(tmp_path / "training.png"))
    assert (tmp_path / "training.png").stat().st_size > 10_000

    # bad input: the message on the page, the form kept, no trace
    gpus = browser.find_element(By.ID, "gpus")
    gpus.clear()
    gpus.send_keys("lots")
    _submit(browser)
    error = WebDriverWait(browser, WAIT_S).until(ec.visibility_of_element_located((By.ID, "error")))
    assert error.text == "GPU count: 'lots' is not a whole number"
    assert browser.find_element(By.ID, "gpus").get_attribute("value") == "lots"
    assert not browser.find_elements(By.ID, "verdict")
    assert "Traceback" not in browser.page_source
    browser.save_screenshot(str(tmp_path / "bad-input.png"))


def test_serving_page_in_chromium(server: str, browser: WebDriver, tmp_path: Path) -> None:
    browser.get(server + "serving")
    for name, value in (("concurrency", "32"), ("slo_ttft_ms", "500"), ("slo_tpot_ms", "40")):
        box = browser.find_element(By.ID, name)
        box.clear()
        box.send_keys(value)
    _submit(browser)
    verdict = WebDriverWait(browser, WAIT_S).until(
        ec.visibility_of_element_located((By.ID, "verdict"))
    )
    assert "TTFT" in verdict.text and "TPOT" in verdict.text
    assert browser.find_element(By.ID, "best").text.startswith("winner:")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")
    )
    browser.save_screenshot(str(tmp_path / "serving.png"))


def test_serve_binds_localhost_and_refuses_a_taken_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _serve("--port", str(port))
        try:
            _, err = proc.communicate(timeout=START_TIMEOUT_S)
        finally:
            _reap(proc)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [err.strip()] and f"cannot listen on 127.0.0.1:{port}" in err
    proc = _serve("--port", "70000")
    try:
        _, err = proc.communicate(timeout=START_TIMEOUT_S)
    finally:
        _reap(proc)
    assert proc.returncode == 2 and "--port" in err and "Traceback" not in err
