"""./harness docs: build the documentation site (docs/ and mkdocs.yml) in strict mode, where a
broken link or a page left out of the navigation is an error, and print where it is;
`--serve` serves it on this machine while you edit the pages.

The site's configuration reference is written from the JSON schemas at build time
(docs/hooks/config_reference.py), so the site is built, never committed.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "mkdocs.yml"
SITE = REPO / "build" / "site"


def build_command(site_dir: Path) -> list[str]:
    return [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "--config-file", str(CONFIG),
            "--site-dir", str(site_dir)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="harness docs", description=__doc__.splitlines()[0])
    p.add_argument("--site-dir", type=Path, default=SITE, help=f"where the site goes (default {SITE.relative_to(REPO)})")
    p.add_argument("--serve", action="store_true",
                   help="serve the site on http://127.0.0.1:8000 and rebuild it on every change (mkdocs serve)")
    ns = p.parse_args(argv)
    if ns.serve:
        return subprocess.run([sys.executable, "-m", "mkdocs", "serve", "--strict", "--config-file", str(CONFIG)],
                              cwd=REPO).returncode
    site = ns.site_dir.resolve()
    proc = subprocess.run(build_command(site), cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        # mkdocs logs every page it builds; what the reader needs is the lines that failed it.
        problems = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(("WARNING", "ERROR"))]
        for ln in problems or (proc.stdout + proc.stderr).splitlines()[-20:]:
            print(ln, file=sys.stderr)
        print(f"docs: the site did not build (strict mode: every warning above is an error); fix the pages in "
              f"{(REPO / 'docs').relative_to(REPO)}/ or mkdocs.yml", file=sys.stderr)
        return 1
    print(f"docs: built {site / 'index.html'} (open it in a browser; ./harness docs --serve serves it while you edit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
