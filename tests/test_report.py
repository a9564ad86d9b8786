"""results/report.html in a real browser: Debian's chromium, headless, loads the page the tiny
sweep wrote; a checker script decodes every figure and resolves every link (in-page anchors
and the files beside the page). A deliberately broken copy proves the checker can fail."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import PY, REPO

TINY = REPO / "configs" / "tiny.yaml"
CHROMIUM = shutil.which("chromium")

# Runs when the page has loaded, synchronously (so that --dump-dom sees its verdict): every
# image must decode (drawn onto a canvas, which decodes it in full; a broken image throws or
# stays empty), every link must lead somewhere (an element of the page, or a file that reads).
CHECKER = """<script>
window.addEventListener("load", () => {
  const out = {images: [], links: []};
  for (const img of document.images) {
    let ok = img.complete && img.naturalWidth > 0 && img.naturalHeight > 0;
    if (ok) {
      try {
        const c = document.createElement("canvas");
        c.width = Math.ceil(img.naturalWidth / 4); c.height = Math.ceil(img.naturalHeight / 4);
        const ctx = c.getContext("2d");
        ctx.drawImage(img, 0, 0, c.width, c.height);
        ok = ctx.getImageData(0, 0, c.width, c.height).data.some((v, i) => i % 4 === 3 && v > 0);
      } catch (e) { ok = false; }
    }
    out.images.push([img.alt, ok]);
  }
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.getAttribute("href");
    let ok = false;
    if (href.startsWith("#")) {
      ok = document.getElementById(decodeURIComponent(href.slice(1))) !== null;
    } else {
      try { const x = new XMLHttpRequest(); x.open("GET", a.href, false); x.send(); ok = x.responseText.length > 0; }
      catch (e) { ok = false; }
    }
    out.links.push([href, ok]);
  }
  const pre = document.createElement("pre");
  pre.id = "verdict";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


# Runs when the page has loaded: every element whose text runs out of its box (its content is
# wider than it, and it does not scroll), or whose box sticks out of the page's column (a table
# wider than the page), and every image drawn wider than the file is (upscaled) or than its
# figure. Elements inside a scrolling box (a <pre>, the .wide tables) may be as wide as they are.
OVERFLOW_CHECKER = """<script>
window.addEventListener("load", () => {
  const out = {overflows: [], images: []};
  const column = document.body.getBoundingClientRect();
  const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + ": " + el.textContent.trim().slice(0, 60);
  for (const el of document.body.querySelectorAll("*")) {
    if (["SCRIPT", "STYLE"].includes(el.tagName)) continue;
    let inside = false;
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) if (scrolls(a)) inside = true;
    if (inside) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (!scrolls(el) && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) out.overflows.push("text wider than its box: " + name(el));
    if (box.right > column.right + 1 || box.left < column.left - 1) out.overflows.push("out of the page's column: " + name(el));
  }
  for (const img of document.images) {
    const box = img.getBoundingClientRect(), parent = img.parentElement.getBoundingClientRect();
    out.images.push([img.alt, img.naturalWidth, img.clientWidth, img.clientWidth <= img.naturalWidth && box.right <= parent.right + 1]);
  }
  const pre = document.createElement("pre");
  pre.id = "verdict";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def in_browser(page: Path, checker: str = CHECKER) -> dict[str, list]:
    """Load a copy of the page with the checker, beside the original (same relative links)."""
    checked = page.with_name("report-check.html")
    checked.write_text(page.read_text().replace("</body>", checker + "</body>"))
    # A profile of its own: a chromium already running on the default profile would take the
    # page over and this one would exit without rendering it.
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                               f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--window-size=800,600", "--dump-dom",
                               checked.as_uri()], capture_output=True, text=True, timeout=120)
    checked.unlink()
    m = re.search(r'<pre id="verdict">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"chromium did not run the checker (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


@pytest.fixture(scope="module")
def reported(tiny_sweep: tuple[Path, subprocess.CompletedProcess], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny sweep, whose end writes report.html, copied: the tests write pages beside it,
    which a test of another worker reading the sweep's folder must not see."""
    results, proc = tiny_sweep
    assert f"report: {results / 'report.html'}" in proc.stdout
    copy = tmp_path_factory.mktemp("reported") / "results"
    shutil.copytree(results, copy)
    return copy


@pytest.mark.slow
def test_report_holds_figures_summary_provenance_and_explained_cells(reported: Path) -> None:
    page = (reported / "report.html").read_text()
    assert page.count("<img ") == len(list((reported / "figures").glob("*.png"))) == 2
    assert "tiny_copy</b>: tiny: contiguous copy of 64 KiB." in page
    assert "<td>copy_ratio</td>" in page and "<td>pack_flat</td>" in page  # the verdict table
    # Provenance is summarised (runs, binaries, tools) and linked: inlined, one row per run, it
    # was 5.4 MB of the default sweep's 8 MB page. Figures are linked files too.
    assert '<a href="provenance.csv">provenance.csv</a>' in page and "<th>compiler_version</th>" in page
    assert "<th>binary_sha256</th>" not in page and "data:image" not in page
    assert page.count('src="figures/') == 2
    assert len(page.encode()) < 60_000, len(page.encode())
    for md in (reported / "explain").glob("*.md"):
        assert f'href="#explain-{md.stem}"' in page and f'<section id="explain-{md.stem}">' in page
    assert "explain/" not in re.sub(r'id="explain-|#explain-', "", page)


@pytest.mark.slow
def test_report_command_rewrites_it_and_refuses_an_empty_results_dir(reported: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"  # a copy: the command rewrites good.json, which the other tests share
    shutil.copytree(reported, results)
    (results / "report.html").unlink()
    ok = subprocess.run([PY, "-m", "analysis.commands.cli", "report", "--config", str(TINY), "--set", f"results_dir={results}"],
                        cwd=REPO, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout == f"report: {results / 'report.html'}\n"
    empty = tmp_path / "nothing"
    bad = subprocess.run([PY, "-m", "analysis.commands.cli", "report", "--config", str(TINY), "--set", f"results_dir={empty}"],
                         cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and not empty.exists()
    assert bad.stderr == f"error: no results in {empty} (no summary.md): run ./harness sweep --config {TINY} first\n"


@pytest.mark.slow
@pytest.mark.needs_chromium
def test_every_figure_decodes_and_every_link_resolves_in_chromium(reported: Path) -> None:
    verdict = in_browser(reported / "report.html")
    assert len(verdict["images"]) == 2 and all(ok for _, ok in verdict["images"]), verdict["images"]
    links = dict(verdict["links"])
    assert {"counts.csv", "provenance.csv", "summary.md", "logs/snakemake.log", "#summary"} <= set(links)
    assert sum(h.startswith("#explain-") for h in links) == len(list((reported / "explain").glob("*.md"))) > 0
    assert all(links.values()), [h for h, ok in links.items() if not ok]


@pytest.mark.slow
@pytest.mark.needs_chromium
def test_the_browser_check_can_fail(reported: Path, tmp_path: Path) -> None:
    """A copy with a missing figure, a missing file and a dangling anchor: all three are caught."""
    broken = reported / "report-broken.html"  # beside the page: its links are relative
    page = (reported / "report.html").read_text()
    page = page.replace('src="figures/', 'src="figures/missing-', 1)
    page = page.replace('href="counts.csv"', 'href="missing.csv"').replace('href="#summary"', 'href="#nowhere"')
    broken.write_text(page)
    try:
        verdict = in_browser(broken)
    finally:
        broken.unlink()
    assert [ok for _, ok in verdict["images"]] == [False, True]
    links = dict(verdict["links"])
    assert links["missing.csv"] is False and links["#nowhere"] is False


@pytest.mark.slow
@pytest.mark.needs_chromium
def test_no_text_overflows_its_box_in_chromium(reported: Path) -> None:
    """In a small window (800 x 600), every text stays in its box and the page's column, and every
    figure is drawn at most as wide as its file and its figure: a wide table scrolls in its own box."""
    verdict = in_browser(reported / "report.html", OVERFLOW_CHECKER)
    assert verdict["overflows"] == []
    assert len(verdict["images"]) == 2 and all(ok for *_, ok in verdict["images"]), verdict["images"]


@pytest.mark.slow
@pytest.mark.needs_chromium
def test_the_overflow_check_can_fail(reported: Path) -> None:
    """A copy with a word too long for its paragraph, a block wider than the page and a figure
    drawn at twice its file's width: all three are caught."""
    broken = reported / "report-overflow.html"
    page = (reported / "report.html").read_text()
    page = page.replace("<h2 id=\"files\">", '<p id="planted-word">' + "x" * 400 + '</p><div id="planted-block" '
                        'style="width: 3000px">wide</div><h2 id="files">', 1)
    page = page.replace('loading="lazy">', 'loading="lazy" style="width: 1920px; max-width: none">', 1)
    broken.write_text(page)
    try:
        verdict = in_browser(broken, OVERFLOW_CHECKER)
    finally:
        broken.unlink()
    found = "\n".join(verdict["overflows"])
    assert "text wider than its box: p#planted-word" in found
    assert "out of the page's column: div#planted-block" in found
    assert [ok for *_, ok in verdict["images"]] == [False, True]
