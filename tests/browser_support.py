"""Headless Chromium for the browser tests and the documentation screenshots (Playwright for Python).

Playwright drives Debian's ``chromium`` (``/usr/bin/chromium``, ``apt-get install chromium``) through
``executable_path``: its wheel bundles the driver, and ``playwright install`` (a browser download) is never
needed. Chromium is started as the machine notes prescribe for a closed network: no sandbox (root), no GPU,
no background networking, component updates or sync, and a fresh profile folder.

Regenerate the screenshots in docs/screenshots/::

    PYTHONPATH=. python3 tests/browser_support.py
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOT_WIDTH = 1200


def chromium_path() -> str | None:
    """Debian's Chromium, or ``$CERTA_CHROMIUM``, if installed."""
    for candidate in (os.environ.get("CERTA_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def missing_browser_reason() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    if chromium_path() is None:
        return "chromium not installed: apt-get install -y chromium (Debian's package; never 'playwright install')"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright not installed: python3 -m pip install playwright (the test extra has it)"
    return None


@dataclass
class PageLog:
    """What a page did while it was open: console errors, page errors and every request's URL."""

    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def network_requests(self) -> list[str]:
        """Requests to anything but ``file://`` (and inline ``data:``/``about:`` URLs)."""
        return [url for url in self.requests if not url.startswith(("file://", "data:", "about:"))]


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium (Playwright ``Browser``) with a fresh profile folder, closed afterwards."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="certa-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS[1:],
            viewport={"width": SCREENSHOT_WIDTH, "height": 900}, device_scale_factor=1)
        try:
            yield context
        finally:
            context.close()


def open_page(context: Any, path: Path) -> tuple[Any, PageLog]:
    """Open a local file in a new tab, recording console errors, page errors and requests."""
    page = context.new_page()
    log = PageLog()
    page.on("console", lambda message: log.console_errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: log.console_errors.append(f"page error: {error}"))
    page.on("request", lambda request: log.requests.append(request.url))
    page.goto(path.resolve().as_uri(), wait_until="load")
    return page, log


def plot_pixel_spread(page: Any) -> list[float]:
    """For each ``figure.plot > svg`` on the page: the standard deviation of its pixels' grey levels in a
    screenshot cropped to the plot's bounding box (0 means a blank plot)."""
    from PIL import Image, ImageStat

    spreads = []
    for element in page.query_selector_all("figure.plot > svg"):
        element.scroll_into_view_if_needed()
        image = Image.open(io.BytesIO(element.screenshot())).convert("L")
        spreads.append(ImageStat.Stat(image).stddev[0])
    return spreads


def pdf_page_count(pdf: bytes) -> int:
    """Pages of a PDF Chromium printed (its page objects: ``/Type /Page``, not ``/Pages``)."""
    import re

    return len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf))


def save_screenshot(page: Any, target: Path, *, max_height: int = 2700) -> int:
    """A PNG of the top of the page (at most ``max_height`` px: about three screens), palette-reduced so it
    stays small (octree quantisation: it keeps the plots' few saturated colours, such as each vendor's, where
    median cut merged them into greys); returns its size in bytes."""
    from PIL import Image

    height = min(max_height, page.evaluate("document.documentElement.scrollHeight"))
    raw = page.screenshot(clip={"x": 0, "y": 0, "width": SCREENSHOT_WIDTH, "height": height}, full_page=True)
    image = Image.open(io.BytesIO(raw)).convert("RGB").quantize(colors=128, method=Image.Quantize.FASTOCTREE)
    target.parent.mkdir(parents=True, exist_ok=True)
    image.save(target, optimize=True)
    return target.stat().st_size


def example_ledger(folder: Path) -> tuple[Path, dict[str, str]]:
    """Every example spec (``specs/*/spec.yaml``) run into one new ledger in ``folder``, each reviewed once
    and replayed once: (ledger path, example folder -> run id)."""
    from click.testing import CliRunner

    from certa.cli import main
    from tests.conftest import RUNNABLE_EXAMPLES  # the model examples need the models extra

    db = folder / "ledger.db"
    runs = {}
    for spec in (ROOT / "specs" / example / "spec.yaml" for example in RUNNABLE_EXAMPLES):
        result = CliRunner().invoke(main, ["run", str(spec), "--ledger", str(db), "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        runs[spec.parent.name] = json.loads(result.stdout)["run_id"]
    for example, run_id in runs.items():
        result = CliRunner().invoke(main, ["review", run_id, "--by", "auditor@example.org", "--decision", "approved",
                                           "--note", f"checked the {example} example", "--ledger", str(db)])
        assert result.exit_code == 0, result.output
    return db, runs


def write_screenshots(out_dir: Path = ROOT / "docs" / "screenshots") -> list[Path]:
    """Screenshots of each example's report, of a ``paired.metric_delta`` report with slices
    (``report-paired-metric.png``: tests/paired_metric_support.py) and of the site index (``certa site`` of
    them all)."""
    from certa.engine.services.site import build_site
    from certa.ledger import Ledger
    from tests.paired_metric_support import run_spec, sliced_spec

    written = []
    with tempfile.TemporaryDirectory() as folder:
        db, runs = example_ledger(Path(folder))
        runs["paired-metric"] = run_spec(sliced_spec(Path(folder) / "paired-metric"), db)
        site = Path(folder) / "site"
        with Ledger.open(str(db), create=False) as ledger:
            build_site(ledger, site)
        with browser() as context:
            for example, run_id in runs.items():
                page, _ = open_page(context, site / "runs" / f"{run_id}.html")
                target = out_dir / f"report-{example}.png"
                save_screenshot(page, target)
                written.append(target)
                page.close()
            page, _ = open_page(context, site / "index.html")
            target = out_dir / "site-index.png"
            save_screenshot(page, target, max_height=900)
            written.append(target)
    return written


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for path in write_screenshots():
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size / 1024:.0f} KiB")
