"""``dynfuse.profile_report``: the text report and the HTML page made from a profile's dictionary, checked
on a hand-built profile of a small script written to disk, so that the page can read its source."""

import html
import linecache
from html.parser import HTMLParser

import pytest

from dynfuse.profile_report import format_profile, profile_html

SCRIPT = """\
import numpy as np


def step(u):
    u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] - 4 * u[1:-1, 1:-1])
    return u


def main():
    u = np.zeros((100, 100))
    order = np.sort(u.ravel())
    if u.sum() < 1 and "a" != 'b' and True & True:
        print(float(u.sum()))
"""

HOT_SOURCE = "u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] - 4 * u[1:-1, 1:-1])"
EMPTY = {"wall_seconds": 0.5, "lines": [], "fallbacks": [], "recompiles": [], "kernels": []}


def profiled_line(file, number, source, seconds, **counts):
    line = {
        "file": str(file),
        "line": number,
        "function": "main",
        "source": source,
        "recorded": 0,
        "fused": 0,
        "interpreted": 0,
        "library": 0,
        "direct": 0,
        "materializations": 0,
        "seconds": seconds,
        "phases": dict.fromkeys(("plan", "compile", "load", "kernel", "interpret", "library", "copy"), 0.0),
        "reasons": {},
        "fallbacks": 0,
    }
    line["phases"]["other"] = seconds
    line.update(counts)
    return line


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "heat.py"
    path.write_text(SCRIPT)
    yield path
    linecache.checkcache(str(path))


@pytest.fixture
def data(script):
    hot = profiled_line(
        script, 5, HOT_SOURCE, 0.512, recorded=140, fused=120, interpreted=20, materializations=20
    )
    hot["function"] = "step"
    hot["phases"].update(plan=0.01, compile=0.3, kernel=0.15, other=0.052)
    hot["reasons"] = {"converted to a NumPy array": 20, "a write into memory NumPy can see": 1}
    return {
        "wall_seconds": 1.234,
        "lines": [
            hot,
            profiled_line(
                script, 13, "print(float(u.sum()))", 0.2, recorded=6, fused=3, library=3, materializations=3
            ),
            profiled_line(
                script, 11, "order = np.sort(u.ravel())", 0.01, direct=2, materializations=1, fallbacks=3
            ),
            profiled_line(script, 10, "u = np.zeros((100, 100))", 0.0, recorded=1),
        ],
        "fallbacks": [
            {
                "file": str(script),
                "line": 11,
                "function": "main",
                "source": "order = np.sort(u.ravel())",
                "name": "sort",
                "reason": "a NumPy function dynfuse does not record",
                "calls": 3,
            }
        ],
        "recompiles": [
            {
                "file": str(script),
                "line": 5,
                "function": "step",
                "source": HOT_SOURCE,
                "compiles": 7,
                "changes": ["shape (100, 100) -> (101, 101)", "dtype float32 -> float64"],
            }
        ],
        "kernels": [
            {
                "name": "kernel 3 (100x100, 5 ops)",
                "lines": [[str(script), 5], [str(script), 13]],
                "ops": 5,
                "launches": 120,
                "seconds": 0.15,
                "compile_seconds": 0.3,
            }
        ],
    }


class BalancedParser(HTMLParser):
    """Fails on a closing tag that does not close the innermost open element."""

    VOID = {"meta", "br", "hr", "img", "input", "link", "wbr"}

    def __init__(self):
        super().__init__()
        self.open = []
        self.title = ""
        self.in_title = False

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)
        self.in_title = tag == "title"

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()
        self.in_title = False

    def handle_data(self, data):
        if self.in_title:
            self.title += data


def parsed(page):
    parser = BalancedParser()
    parser.feed(page)
    parser.close()
    assert parser.open == []
    return parser


# ---------------------------------------------------------------------------------------------------- text


def test_the_text_names_the_hot_line_and_its_source(data):
    text = format_profile(data)
    assert text.startswith("dynfuse profile: 1.234 s profiled; 0.722 s in 24 materializations at 4 lines")
    hot = next(line for line in text.splitlines() if "heat.py:5" in line)
    assert "0.512" in hot
    assert "41.5%" in hot
    assert "u[1:-1, 1:-1] = u[1:-1, 1:-1]" in hot
    assert "why: converted to a NumPy array x20; a write into memory NumPy can see x1" in text
    assert "plan 0.010  compile 0.300  kernel 0.150  other 0.052" in text


def test_the_text_lists_lines_hottest_first_and_fits_the_terminal(data):
    data["lines"].reverse()
    rows = [line for line in format_profile(data).splitlines() if "heat.py:" in line and "%" in line]
    assert [row.split("heat.py:")[1].split()[0] for row in rows] == ["5", "13", "11", "10"]
    assert all(len(row) <= 100 for row in rows)
    assert rows[0].endswith("...")


def test_the_text_says_how_many_lines_were_left_out(data):
    text = format_profile(data, top=2)
    assert "heat.py:13" in text
    assert "heat.py:11 " not in text.split("\nfallbacks\n")[0]
    assert "and 2 more lines (0.010 s in all)" in text
    assert "more line" not in format_profile(data)


def test_the_text_shows_fallbacks_recompiles_and_kernels(data):
    text = format_profile(data)
    lines = text.splitlines()
    fallbacks, recompiles = lines.index("fallbacks"), lines.index("recompiles")
    assert lines[fallbacks + 1] == (
        "  heat.py:11 in main: sort (3 calls): a NumPy function dynfuse does not record"
    )
    assert lines[recompiles + 1] == (
        "  heat.py:5 in step: 7 compiles: shape (100, 100) -> (101, 101); dtype float32 -> float64"
    )
    kernels = text.split("\nkernels\n")[1]
    assert kernels.startswith("  kernel 3 (100x100, 5 ops)  120 launches  0.150 s  compiled in 0.300 s")
    assert kernels.endswith("from heat.py:5, heat.py:13")


@pytest.mark.parametrize("section", ["fallbacks", "recompiles", "kernels"])
def test_an_empty_section_is_left_out(data, section):
    data[section] = []
    lines = format_profile(data).splitlines()
    assert section not in lines
    assert {"fallbacks", "recompiles", "kernels"} - {section} <= set(lines)


def test_an_empty_profile_reads_as_one_sentence():
    assert format_profile(EMPTY) == (
        "dynfuse profile: 0.500 s profiled; no line of the program recorded or materialized anything"
    )


# ---------------------------------------------------------------------------------------------------- page


def test_the_page_is_balanced_html_with_a_title(data):
    assert parsed(profile_html(data)).title == "dynfuse profile"


def test_the_page_shows_every_source_line_escaped(data):
    page = profile_html(data)
    for line in SCRIPT.splitlines():
        assert f'<td class="src">{html.escape(line)}</td>' in page
    assert "&quot;a&quot; != &#x27;b&#x27; and True &amp; True" in page
    assert "u.sum() < 1" not in page


def test_the_page_heats_the_hot_line_and_not_the_cold_ones(data):
    page = profile_html(data).splitlines()
    rows = {row.split('"')[1]: row for row in page if row.startswith('<tr id="f0-')}
    assert len(rows) == len(SCRIPT.splitlines())
    assert "background:#ff" in rows["f0-5"]
    assert "background" not in rows["f0-1"]
    assert "background" not in rows["f0-10"]
    assert "<td>41.5%</td>" in rows["f0-5"]


def test_the_page_shows_fallbacks_recompiles_and_kernels(data):
    page = profile_html(data)
    assert "a NumPy function dynfuse does not record" in page
    assert "<li>shape (100, 100) -&gt; (101, 101)</li>" in page
    assert "<li>dtype float32 -&gt; float64</li>" in page
    assert "kernel 3 (100x100, 5 ops)" in page
    assert '<a href="#f0-13">heat.py:13</a>' in page


def test_the_page_needs_no_network(data):
    page = profile_html(data)
    for external in ("http://", "https://", "src=", "<link", "<script"):
        assert external not in page


def test_an_unreadable_file_shows_the_profiled_lines_own_text(data):
    for entry in (*data["lines"], *data["fallbacks"], *data["recompiles"]):
        entry["file"] = "<string>"
    page = profile_html(data)
    parsed(page)
    assert "could not be read" in page
    assert f'<td class="src">{html.escape(HOT_SOURCE)}</td>' in page
    assert "import numpy as np" not in page


def test_an_empty_profile_makes_a_page_with_the_summary_alone():
    page = profile_html(EMPTY)
    parsed(page)
    assert "no line of the program recorded or materialized anything" in page
    assert "<table" not in page
