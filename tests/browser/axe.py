"""axe-core, the accessibility engine, run inside a page the browser tests have open.

axe-core's script comes from a pinned PyPI package, ``axe-playwright-python`` (tests/requirements.txt), which
ships it as one file (``axe.min.js``): it is read from there and evaluated in the page, so nothing is fetched
at test time, and no npm step is needed. ``serious_faults(page)`` runs every rule axe runs by default (WCAG
2.0/2.1 A and AA, and its best practices) and returns one line per element with a *serious* or *critical*
violation (axe's two highest impacts: the ones that stop someone reading or using the page); moderate and
minor findings are not failures.
"""

from __future__ import annotations

from pathlib import Path

AXE_CORE = "4.12.1"        # the axe-core that axe-playwright-python 0.1.8 bundles (its axe.min.js header)
FAILING = ("serious", "critical")


def axe_script() -> str:
    import axe_playwright_python

    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


def serious_faults(page, context: str = "document") -> list[str]:
    """``"rule (impact): what it asks: element"`` for each serious or critical violation in ``page``."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_script())
    result = page.evaluate(f"() => axe.run({context}, {{resultTypes: ['violations']}})")
    version = result["testEngine"]["version"]
    assert version == AXE_CORE, f"axe-core {version} ran, the pin says {AXE_CORE}: update AXE_CORE with the pin"
    return [f"{v['id']} ({v['impact']}): {v['help']}: {' '.join(map(str, node['target']))} {node['html'][:160]}"
            for v in result["violations"] if v["impact"] in FAILING for node in v["nodes"]]
