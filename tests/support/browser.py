"""A real headless browser for the `ui` page: Debian's Chromium, driven by Selenium through
Debian's chromedriver. Nothing downloads a browser or a driver (Selenium Manager is never
asked: both paths are given)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver

CHROMIUM: Final = Path("/usr/bin/chromium")
CHROMEDRIVER: Final = Path("/usr/bin/chromedriver")
# What Chromium needs to run headless as root in a container, and to stay off the network.
FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)
# Chromium's content setting that blocks every script of every page.
NO_JAVASCRIPT: Final = {"profile.managed_default_content_settings.javascript": 2}
WINDOW: Final = (1280, 900)


def require_browser() -> None:
    """Fail (never skip) when the browser is missing: scripts/test installs it."""
    for binary in (CHROMIUM, CHROMEDRIVER):
        if not binary.exists() and shutil.which(binary.name) is None:
            pytest.fail(f"{binary} is missing: apt-get install chromium chromium-driver")


@contextmanager
def chromium(profile: Path, *, javascript: bool = True) -> Iterator[WebDriver]:
    """A headless Chromium with a fresh profile in `profile`, quit at the end of the block."""
    require_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
    if not javascript:
        options.add_experimental_option("prefs", NO_JAVASCRIPT)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def full_page_png(driver: WebDriver) -> bytes:
    """The whole page, not only the window: the window is stretched to the page's height."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(WINDOW[0], max(height, WINDOW[1]))
    return driver.get_screenshot_as_png()
