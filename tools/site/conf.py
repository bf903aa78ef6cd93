"""Sphinx configuration of the executed site (tools/build_site.py runs ``sphinx-build -c tools/site``).

myst-nb reads notebooks the build has already executed (``nb_execution_mode = "off"``). Nothing is
fetched, at build time or when a page is read: the theme's assets are in the wheel, maths is MathML
(the ``mathml`` renderer below, latex2mathml as in the feedback pages) instead of MathJax from a
CDN, and widgets come as the static first view the build made of them. A plot's alt text is the one
kvdisplay put in its output's metadata (``{"image/png": {"alt": ...}}``, the key nbconvert reads), which
myst-nb 1.4 does not read (``NbElementRenderer.render_image`` takes only width and height from there):
``_image_alt`` below adds it.
"""

import os

project = "kv-course"
author = "kv-course"
copyright = "kv-course authors"
extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["_extra", "**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "amsmath"]
nb_execution_mode = "off"
nb_render_markdown_format = "myst"   # Markdown outputs (worked answers) with $maths$, as cells
nb_output_stderr = "remove"
nb_merge_streams = True
html_math_renderer = "mathml"
smartquotes = False                  # the chapters' punctuation as written (no curly quotes in code-like text)
html_theme = "sphinx_book_theme"
html_title = "kv-course"
html_extra_path = [os.environ["KV_SITE_EXTRA"]] if os.environ.get("KV_SITE_EXTRA") else []
html_static_path = ["static"]
html_css_files = ["kv-site.css"]
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {
    "use_download_button": False,      # each page links its release notebook itself (build_site.py)
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "show_toc_level": 1,
}
html_sidebars = {"**": ["navbar-logo.html", "sbt-sidebar-nav.html"]}
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]


def _mathml(tex: str, display: str) -> str:
    from latex2mathml.converter import convert

    try:
        return convert(tex, display=display)
    except Exception:  # TeX latex2mathml cannot read stays readable as TeX
        import html
        return f'<code class="tex">{html.escape(tex)}</code>'


def _visit_math(self, node):
    from docutils import nodes

    self.body.append(f'<span class="math">{_mathml(node.astext(), "inline")}</span>')
    raise nodes.SkipNode


def _visit_math_block(self, node):
    from docutils import nodes

    self.body.append(f'<div class="math">{_mathml(node.astext(), "block")}</div>')
    raise nodes.SkipNode


def _image_alt() -> None:
    """myst-nb's image renderer, then the output metadata's alt text on the image node (see the module doc)."""
    from myst_nb.core.render import NbElementRenderer

    render_image = NbElementRenderer.render_image
    if getattr(render_image, "reads_alt", False):
        return

    def with_alt(self, data):
        nodes = render_image(self, data)
        alt = (data.output_metadata.get(data.mime_type) or {}).get("alt")
        if isinstance(alt, str) and alt.strip():
            for node in nodes:
                node["alt"] = alt
        return nodes

    with_alt.reads_alt = True
    NbElementRenderer.render_image = with_alt


def setup(app):
    app.add_html_math_renderer("mathml", (_visit_math, None), (_visit_math_block, None))
    _image_alt()
