"""results/report.html: a sweep's results on one page, written by `./harness report` and at
the end of every sweep.

The page holds every figure of the sweep with its caption, results/summary.md (the verdict
table and the reasons), results/perf_summary.md where perf measured, a summary of the
provenance table, every explained cell of the summary, and links to the tables and logs beside
it. Figures and tables are linked, not embedded: the default sweep's page was 7.4-8.1 MB, 5.4 MB
of it the inlined provenance table (one row per run) and 2 MB the figures as data: URIs, and took
seconds to open. The links are relative, so they resolve while the page sits in its results
directory (to share it, share that directory).

Why not Snakemake's own --report: that is a JavaScript application that shows one output at a
time, needs the metadata of the Snakemake run that made each file, renders Markdown (the
summary, the explained cells) as plain text, and gives all figures of one rule the same
caption file. A static page built from the files themselves fits better, and a browser can
check it as it is (tests/test_report.py).
"""
from __future__ import annotations

import html
import re
import subprocess
import tempfile
from pathlib import Path

import jinja2
from markdown_it import MarkdownIt

from analysis.backends.registry import NAMES as BACKENDS
from analysis.core import config, files, table
from analysis.stages.plot import estimate_name

NAME = "report.html"
# summary.md links each explained cell as explain/<slug>.md: on the page it is a section.
EXPLAIN_LINK = re.compile(r'href="explain/([^"/]+)\.md"')
# Appended to a copy of the page by page_load (./harness bench times it): on the load event (every
# image that loads has loaded) the page writes the milliseconds since navigation began into itself,
# where chromium's --dump-dom shows them.
LOAD_PROBE = """<script>
window.addEventListener("load", () => {
  const pre = document.createElement("pre");
  pre.id = "load-ms";
  pre.textContent = String(performance.now());
  document.body.appendChild(pre);
});
</script>
"""
LOAD_MS = re.compile(r'<pre id="load-ms">([0-9.]+)</pre>')

TEMPLATE = jinja2.Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{ title }}</title>
<style>
body { font-family: sans-serif; max-width: 75em; margin: 1em auto; padding: 0 1em; line-height: 1.4; }
/* A table wider than the column (perf's every-cell table in a narrow window) scrolls in its own
   box rather than running past the page's edge. */
table { border-collapse: collapse; font-size: 90%; display: block; max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
figure { margin: 2em 0; } figure img { max-width: 100%; height: auto; box-sizing: border-box; border: 1px solid #eee; }
figcaption { font-size: 95%; color: #333; }
pre, code { font-size: 90%; } pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; }
.wide { overflow-x: auto; } .wide td { white-space: nowrap; }
nav a { margin-right: 1em; }
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p>Sweep <code>{{ sweep_path }}</code>; results in <code>{{ results_dir }}</code>.</p>
<nav>{% for anchor, text in sections %}<a href="#{{ anchor }}">{{ text }}</a>{% endfor %}</nav>
<h2 id="files">Files</h2>
<ul>{% for href, text in files %}<li><a href="{{ href }}">{{ href }}</a>: {{ text }}</li>{% endfor %}</ul>
<div id="summary">
{{ summary }}
</div>
<h2 id="figures">Figures</h2>
{% for f in figures %}<figure id="figure-{{ f.name }}">
<img src="{{ f.src }}" alt="{{ f.name }}" loading="lazy">
<figcaption><b>{{ f.name }}</b>: {{ f.caption }}</figcaption>
</figure>
{% else %}<p>No figures.</p>{% endfor %}
{% if perf_summary %}<div id="perf">
{{ perf_summary }}
</div>{% endif %}
<h2 id="provenance">Provenance</h2>
{{ provenance }}
{% if explained %}<h2 id="explained">Explained cells</h2>
{% for slug, body in explained %}<section id="explain-{{ slug }}">
{{ body }}
</section>{% endfor %}{% endif %}
</body>
</html>
""", autoescape=False)


def markdown(text: str) -> str:
    """Markdown as the harness writes it (pipe tables, code, links) to HTML."""
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def count_caption(fig: config.CountFigure, ratio: bool) -> str:
    """What a count figure (or its ratio figure) shows, from its declaration in the sweep file."""
    metric = fig.ylabel or fig.metric
    if ratio and fig.baseline is not None:
        b = fig.baseline
        return (f"{fig.title}: ratio {b.variant or b.kernel} / each variant of {metric} per VL "
                f"(above 1: the variant needs less than the baseline).")
    return f"{fig.title}. {metric} per VL, one line per variant of {_what(fig.series)} (VLA build; VLS builds as points)."


def perf_caption(fig: config.PerfFigure) -> str:
    return f"{fig.title}. Native runs under perf ({fig.kind} per call) of {_what(fig.series)}; host baselines dashed."


def estimate_caption(fig: config.PerfFigure, backend: str) -> str:
    return (f"{fig.title}, estimated by the {backend} backend's model (its title names it): the ROI cycles of one call "
            f"at the model's clock, of {_what(fig.series)}. A model estimate, not a measurement; perf's measured "
            "figure, where it ran, is a figure of its own.")


def _what(series: tuple[config.Selector, ...]) -> str:
    return ", ".join(" ".join(sel.words()) for sel in series)


def figure_entries(sweep: config.Sweep, fig_dir: Path) -> list[dict[str, str]]:
    """Every declared figure the sweep drew (the cycle figures only where gem5 ran), in order."""
    # (file stem, title, caption) of each figure that may have been drawn: a count figure, its
    # ratio figure where it has a baseline, each perf figure.
    declared = [(name, f.title, count_caption(f, ratio)) for f in sweep.figures
                for name, ratio in ((f.name, False), (f"{f.name}_ratio", True)) if not ratio or f.baseline is not None]
    declared += [(f.name, f.title, perf_caption(f)) for f in (sweep.perf.figures if sweep.perf else ())]
    declared += [(estimate_name(f, b), f"{f.title} (model estimate: {b})", estimate_caption(f, b))
                 for f in (sweep.perf.figures if sweep.perf else ()) for b in BACKENDS]
    out = []
    for name, title, caption in declared:
        png = fig_dir / f"{name}.png"
        if png.exists():
            out.append({"name": name, "title": title, "caption": html.escape(caption),
                        "src": f"{fig_dir.name}/{png.name}"})
    return out


# One line per way the counts were made; the columns that name how (tools, host) are listed
# with their distinct values, which are few.
PROVENANCE_GROUPS = ["backend", "compiler", "build", "cpu_model"]
PROVENANCE_TOOLS = ["compiler_version", "libc_version", "backend_version", "host"]


def provenance_summary(path: Path) -> str:
    """provenance.csv in a few lines (runs, binaries and tools per backend, compiler,
    build and CPU model), with a link to the file: every run's binary, checksum and commands."""
    prov = table.read_provenance(path)
    groups = [c for c in PROVENANCE_GROUPS if c in prov.columns]
    tools = [c for c in PROVENANCE_TOOLS if c in prov.columns]
    summary = prov.groupby(groups, observed=True, sort=True).agg(
        runs=("binary", "size"), binaries=("binary", "nunique"),
        **{c: (c, lambda v: "; ".join(sorted(set(map(str, v))))) for c in tools},
    ).reset_index()
    return (f'<p>{len(prov):,} runs of {prov["binary"].nunique():,} binaries. Every run\'s binary, its '
            f'checksum, build commands and run command: <a href="{path.name}">{path.name}</a>.</p>\n'
            + summary.to_html(index=False, border=0, escape=True))


def has_summary(res: Path) -> bool:
    """Whether a results folder holds a summary the page is made of (the counts' or perf's)."""
    return (res / "summary.md").exists() or (res / "perf_summary.md").exists()


def build(sweep: config.Sweep) -> str:
    res = sweep.results_dir
    summary_md = res / "summary.md"
    if not has_summary(res):
        kept = sorted((res / "kept").glob("*/report.html"))  # the last good set of a failed sweep
        where = f"; the last good report is {kept[-1]}" if kept else ""
        raise config.ConfigError(f"no results in {res} (no summary.md): run ./harness sweep --config {sweep.path} "
                                 f"first{where}")
    for name in table.CHECKED_TABLES:  # the page shows what they say: never an edited or truncated one
        table.verify(res / name)
    summary = EXPLAIN_LINK.sub(r'href="#explain-\1"', markdown(summary_md.read_text())) if summary_md.exists() else ""
    slugs = EXPLAIN_LINK.findall(markdown(summary_md.read_text())) if summary_md.exists() else []
    explained = [(s, markdown((res / "explain" / f"{s}.md").read_text())) for s in slugs
                 if (res / "explain" / f"{s}.md").exists()]
    perf_md = res / "perf_summary.md"
    prov = res / "provenance.csv"
    provenance = provenance_summary(prov) if prov.exists() else "<p>No provenance table.</p>"
    files = [(name, text) for name, text in (
        ("counts.csv", "every count, one value per row"), ("provenance.csv", "one row per run"),
        ("summary.md", "this page's summary as Markdown"), ("perf.csv", "native measurements"),
        ("perf_summary.md", "native measurements, summary"), ("logs/snakemake.log", "Snakemake's full log of the last sweep"),
    ) if (res / name).exists()]
    sections = [("files", "Files"), ("summary", "Summary"), ("figures", "Figures")]
    sections += [("perf", "perf")] if perf_md.exists() else []
    sections += [("provenance", "Provenance")] + ([("explained", "Explained cells")] if explained else [])
    return TEMPLATE.render(
        title=f"SVE kernel evaluation: {Path(str(sweep.path)).name}", sweep_path=html.escape(str(sweep.path)),
        results_dir=html.escape(str(res)), sections=sections, files=files,
        figures=figure_entries(sweep, res / "figures"), summary=summary,
        perf_summary=markdown(perf_md.read_text()) if perf_md.exists() else "", provenance=provenance,
        explained=explained,
    )


def write(sweep: config.Sweep) -> Path:
    """Write results/report.html atomically (a reader never sees half a page)."""
    out = sweep.results_dir / NAME
    files.write_text_atomic(out, build(sweep))
    return out


def load_seconds(dom: str) -> float:
    """The load time a page carrying LOAD_PROBE wrote into its dumped DOM, in seconds."""
    m = LOAD_MS.search(dom)
    if m is None:
        raise ValueError("the page recorded no load time: chromium did not reach its load event")
    return float(m.group(1)) / 1000


def page_load(page: Path, chromium: str) -> float:
    """Seconds from navigation to the load event of `page` in headless chromium (its start-up
    not included), loaded as a copy beside it so that its relative links resolve."""
    probed = page.with_name(f"{page.stem}-load{page.suffix}")
    probed.write_text(page.read_text().replace("</body>", LOAD_PROBE + "</body>"))
    try:
        # A profile of its own: a chromium already running on the default one would take the page over.
        with tempfile.TemporaryDirectory() as profile:
            proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                                   f"--user-data-dir={profile}", "--dump-dom", probed.as_uri()],
                                  capture_output=True, text=True, timeout=120)
    finally:
        probed.unlink()
    return load_seconds(proc.stdout)
