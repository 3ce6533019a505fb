"""Presenting a profile of what dynfuse did while a program ran, from the plain dictionary that
``dynfuse.profiler.Profile.data()`` gives: ``format_profile`` writes it as text for the terminal (the
hottest source lines with their time, materializations and ops, then the fallbacks, recompiles and
kernels), and ``profile_html`` as one self-contained page for the browser that shows each profiled file's
whole source with every line's numbers beside it and its background heated by its share of the time.
Only the standard library is imported, so presenting a saved profile costs nothing of dynfuse's own.
"""

from __future__ import annotations

import html
import linecache
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

# Where a materialization's time goes, in the order it goes there; "other" is the rest (dynfuse's own
# bookkeeping), which a profile works out rather than measures
MEASURED_PHASES = ("plan", "compile", "load", "kernel", "interpret", "library", "copy")
PHASES = (*MEASURED_PHASES, "other")
TEXT_WIDTH = 100
SHORTEST_SOURCE = 30
KERNELS_SHOWN = 10
CHANGES_SHOWN = 4
HOT_LINES_ON_PAGE = 20
KERNELS_ON_PAGE = 100


class Column(NamedTuple):
    """One number shown for a profiled line, in the text table and on the page alike."""

    header: str
    meaning: str
    value: Callable[[Mapping[str, Any], float], str]
    in_text: bool = True


def _count(key: str) -> Callable[[Mapping[str, Any], float], str]:
    return lambda line, _: f"{line.get(key, 0):,}"


COLUMNS = (
    Column("seconds", "wall time of this line's materializations", lambda line, _: _seconds(line)),
    Column("share", "that time's share of the profiled time", lambda line, total: _percent(line, total)),
    Column("mat", "materializations this line triggered", _count("materializations")),
    Column("recorded", "ops recorded lazily at this line", _count("recorded")),
    Column("fused", "of those, ops that ran fused in compiled kernels", _count("fused")),
    Column("interp", "of those, ops that NumPy ran one by one (interpreted)", _count("interpreted")),
    Column("lib", "of those, ops that ran as library calls between kernels", _count("library")),
    Column("direct", "ops NumPy ran at once, unrecorded (small arrays)", _count("direct")),
    Column("fb", "calls that fell back to NumPy at this line", _count("fallbacks"), in_text=False),
)


def location(file: str, line: int) -> str:
    """``heat.py:14``: the base name finds the line in a report while keeping the columns narrow."""
    return f"{os.path.basename(file) or file}:{line}"


def _plural(count: int, noun: str, nouns: str | None = None) -> str:
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def _format_seconds(seconds: float) -> str:
    """Three decimals, but never a bare 0.000 for time that was spent."""
    return "<0.001" if 0 < seconds < 0.0005 else f"{seconds:.3f}"


def _seconds(line: Mapping[str, Any]) -> str:
    return _format_seconds(line.get("seconds", 0.0))


def _share(seconds: float, total: float) -> float:
    return seconds / total if total > 0 else 0.0


def _percent(line: Mapping[str, Any], total: float) -> str:
    return f"{100 * _share(line.get('seconds', 0.0), total):.1f}%"


def _profiled_seconds(data: Mapping[str, Any]) -> float:
    """Every share's denominator: the wall time, or the lines' own time should a coarse clock make it larger,
    so that no share passes 100%."""
    return max(float(data.get("wall_seconds", 0.0)), sum(line.get("seconds", 0.0) for line in data["lines"]))


def _hottest_first(lines: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(lines, key=lambda line: -line.get("seconds", 0.0))


def _headline(data: Mapping[str, Any]) -> str:
    lines = data["lines"]
    profiled = f"{_format_seconds(data.get('wall_seconds', 0.0))} s profiled"
    if not lines:
        return f"{profiled}; no line of the program recorded or materialized anything"
    seconds = sum(line.get("seconds", 0.0) for line in lines)
    materializations = sum(line.get("materializations", 0) for line in lines)
    return (
        f"{profiled}; {_format_seconds(seconds)} s in {_plural(materializations, 'materialization')} "
        f"at {_plural(len(lines), 'line')}"
    )


def _ops_summary(data: Mapping[str, Any]) -> str:
    def total(key: str) -> int:
        return sum(line.get(key, 0) for line in data["lines"])

    return (
        f"ops: {total('recorded'):,} recorded, of which {total('fused'):,} fused, "
        f"{total('interpreted'):,} interpreted and {total('library'):,} library calls; "
        f"{total('direct'):,} run at once by NumPy; {_plural(total('fallbacks'), 'fallback')}"
    )


def _phases_text(phases: Mapping[str, float]) -> str:
    """The phases that took time, in the order a materialization goes through them."""
    ordered = [*PHASES, *sorted(set(phases) - set(PHASES))]
    return "  ".join(f"{phase} {_format_seconds(phases[phase])}" for phase in ordered if phases.get(phase))


def _reasons_text(reasons: Mapping[str, int]) -> str:
    commonest_first = sorted(reasons.items(), key=lambda item: -item[1])
    return "; ".join(f"{reason} x{count:,}" for reason, count in commonest_first)


def _fallback_text(fallback: Mapping[str, Any]) -> str:
    return f"{fallback['name']} ({_plural(fallback.get('calls', 0), 'call')}): {fallback.get('reason', '')}"


def _changes_text(changes: Sequence[str], shown: int) -> str:
    listed = "; ".join(changes[:shown])
    left_out = len(changes) - len(changes[:shown])
    return f"{listed}; and {left_out:,} more" if left_out else listed


def _origins(kernel: Mapping[str, Any], label: Callable[[str, int], str]) -> str:
    """The source lines whose ops the kernel computes."""
    return ", ".join(label(file, line) for file, line in kernel.get("lines", []))


def _where(entry: Mapping[str, Any]) -> str:
    return f"{location(entry['file'], entry['line'])} in {entry.get('function') or '?'}"


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


# ---------------------------------------------------------------------------------------------------- text


def format_profile(data: Mapping[str, Any], top: int = 20) -> str:
    """The profile as text for stderr: the ``top`` lines by time with the details that explain their time,
    then whatever else needs attention (fallbacks, recompiles) and the kernels that took the time."""
    total = _profiled_seconds(data)
    report = [f"dynfuse profile: {_headline(data)}"]
    if data["lines"]:
        report.append(f"  {_ops_summary(data)}")
        report += _lines_table(_hottest_first(data["lines"]), max(top, 0), total)
    if fallbacks := data.get("fallbacks"):
        report.append("fallbacks")
        report += [f"  {_where(fallback)}: {_fallback_text(fallback)}" for fallback in fallbacks]
    if recompiles := data.get("recompiles"):
        report.append("recompiles")
        report += [
            f"  {_where(entry)}: {_plural(entry.get('compiles', 0), 'compile')}: "
            f"{_changes_text(entry.get('changes', []), CHANGES_SHOWN)}"
            for entry in recompiles
        ]
    if kernels := data.get("kernels"):
        report.append("kernels")
        report += _kernels_list(sorted(kernels, key=lambda kernel: -kernel.get("seconds", 0.0)))
    return "\n".join(report)


def _lines_table(lines: list[Mapping[str, Any]], top: int, total: float) -> list[str]:
    shown, left_out = lines[:top], lines[top:]
    columns = [column for column in COLUMNS if column.in_text]
    cells = [[column.value(line, total) for column in columns] for line in shown]
    widths = [max(len(column.header), *(len(row[i]) for row in cells)) for i, column in enumerate(columns)]
    numbers_width = 2 + sum(widths) + len(widths) - 1
    indent = " " * (numbers_width + 2)

    def numbers(row: Sequence[str]) -> str:
        return "  " + " ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True))

    table = [f"{numbers([column.header for column in columns])}  line"]
    for line, row in zip(shown, cells, strict=True):
        label = location(line["file"], line["line"])
        room = max(TEXT_WIDTH - numbers_width - len(label) - 4, SHORTEST_SOURCE)
        table.append(f"{numbers(row)}  {label}  {_shorten(line.get('source', ''), room)}".rstrip())
        if phases := _phases_text(line.get("phases", {})):
            table.append(indent + phases)
        if reasons := _reasons_text(line.get("reasons", {})):
            table.append(f"{indent}why: {reasons}")
    if left_out:
        seconds = sum(line.get("seconds", 0.0) for line in left_out)
        table.append(f"  and {_plural(len(left_out), 'more line')} ({_format_seconds(seconds)} s in all)")
    return table


def _kernels_list(kernels: list[Mapping[str, Any]]) -> list[str]:
    shown = kernels[:KERNELS_SHOWN]
    rows = [
        (
            kernel["name"],
            _plural(kernel.get("launches", 0), "launch", "launches"),
            f"{_format_seconds(kernel.get('seconds', 0.0))} s",
            f"compiled in {_format_seconds(kernel.get('compile_seconds', 0.0))} s",
            _origins(kernel, location),
        )
        for kernel in shown
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    listed = [
        "  "
        + "  ".join(
            (
                name.ljust(widths[0]),
                launches.rjust(widths[1]),
                seconds.rjust(widths[2]),
                compiled.ljust(widths[3]),
            )
        )
        + (f"  from {origins}" if origins else "")
        for name, launches, seconds, compiled, origins in rows
    ]
    if left_out := len(kernels) - len(shown):
        listed.append(f"  and {_plural(left_out, 'more kernel')}")
    return [line.rstrip() for line in listed]


# ---------------------------------------------------------------------------------------------------- page

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin-bottom: 1em; }
th, td { padding: 1px 8px; text-align: right; vertical-align: top; }
th { background: #eee; position: sticky; top: 0; }
.text { text-align: left; }
.src { text-align: left; white-space: pre; font-family: ui-monospace, monospace; }
.lineno { color: #888; font-family: ui-monospace, monospace; }
.lineno a { color: inherit; text-decoration: none; }
.file td { border-top: 1px solid #f4f4f4; }
.gap td { color: #888; text-align: left; }
.scale span { display: inline-block; padding: 0 0.6em; border: 1px solid #ddd; }
ul { margin: 0; padding-left: 1.2em; }
"""


def profile_html(data: Mapping[str, Any]) -> str:
    """The profile as one page that needs nothing but a browser: each profiled file's whole source with the
    hot lines heated, so where the time went shows at a glance and in context."""
    total = _profiled_seconds(data)
    files = _files(data)
    anchors = {file: f"f{index}" for index, file in enumerate(files)}
    page = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8"><title>dynfuse profile</title>',
        f"<style>{STYLE}</style></head>",
        "<body>",
        "<h1>dynfuse profile</h1>",
        f"<p>{_escape(_headline(data))}</p>",
    ]
    if data["lines"]:
        page.append(f"<p>{_escape(_ops_summary(data))}</p>")
        page += _heat_scale()
        page += _hot_lines_table(_hottest_first(data["lines"]), total, anchors)
    page += _fallbacks_table(data.get("fallbacks", []), anchors)
    page += _recompiles_table(data.get("recompiles", []), anchors)
    page += _kernels_table(data.get("kernels", []), anchors)
    for file in files:
        page += _file_view(file, anchors[file], data, total)
    page += ["</body>", "</html>", ""]
    return "\n".join(page)


def _escape(text: Any) -> str:
    return html.escape(str(text))


def _files(data: Mapping[str, Any]) -> list[str]:
    """Every file the profile names, the one with the most time first."""
    seconds: dict[str, float] = {}
    for line in data["lines"]:
        seconds[line["file"]] = seconds.get(line["file"], 0.0) + line.get("seconds", 0.0)
    for entry in (*data.get("fallbacks", []), *data.get("recompiles", [])):
        seconds.setdefault(entry["file"], 0.0)
    return sorted(seconds, key=lambda file: -seconds[file])


def _link(file: str, line: int, anchors: Mapping[str, str]) -> str:
    label = _escape(location(file, line))
    return f'<a href="#{anchors[file]}-{line}">{label}</a>' if file in anchors else label


def _heat(share: float) -> str:
    """White to red; the square root lets a line with a few percent of the time still show."""
    if share <= 0:
        return ""
    fade = round(255 - 175 * min(1.0, math.sqrt(share)))
    return f"#ff{fade:02x}{fade:02x}"


def _heat_scale() -> list[str]:
    samples = "".join(
        f'<span style="background:{_heat(share)}">{100 * share:g}%</span>'
        for share in (0.01, 0.05, 0.2, 0.5, 1)
    )
    return [f'<p class="scale">share of the profiled time: {samples}</p>']


def _number_headers() -> str:
    return "".join(
        f'<th title="{_escape(column.meaning)}">{_escape(column.header)}</th>' for column in COLUMNS
    )


def _number_cells(line: Mapping[str, Any], total: float) -> str:
    return "".join(f"<td>{_escape(column.value(line, total))}</td>" for column in COLUMNS)


def _details(line: Mapping[str, Any]) -> str:
    """Where a line's time went and why it materialized, as one line of plain text."""
    phases, reasons = _phases_text(line.get("phases", {})), _reasons_text(line.get("reasons", {}))
    return "  ".join(part for part in (phases, f"why: {reasons}" if reasons else "") if part)


def _hot_lines_table(lines: list[Mapping[str, Any]], total: float, anchors: Mapping[str, str]) -> list[str]:
    shown = lines[:HOT_LINES_ON_PAGE]
    table = [
        "<h2>hottest lines</h2>",
        "<table>",
        f'<tr>{_number_headers()}<th class="text">line</th><th class="text">source</th>'
        '<th class="text">phases (s)</th><th class="text">why it materialized</th></tr>',
    ]
    for line in shown:
        table.append(
            f'<tr style="background:{_heat(_share(line.get("seconds", 0.0), total)) or "#fff"}">'
            f"{_number_cells(line, total)}"
            f'<td class="text">{_link(line["file"], line["line"], anchors)}</td>'
            f'<td class="src">{_escape(line.get("source", ""))}</td>'
            f'<td class="text">{_escape(_phases_text(line.get("phases", {})))}</td>'
            f'<td class="text">{_escape(_reasons_text(line.get("reasons", {})))}</td></tr>'
        )
    table.append("</table>")
    if left_out := len(lines) - len(shown):
        table.append(f"<p>and {_plural(left_out, 'more line')}, shown in the files below</p>")
    return table


def _section(title: str, headers: str, rows: list[str]) -> list[str]:
    """A titled table of the page: its header cells, then its rows."""
    return [f"<h2>{title}</h2>", "<table>", f"<tr>{headers}</tr>", *rows, "</table>"]


def _fallbacks_table(fallbacks: Sequence[Mapping[str, Any]], anchors: Mapping[str, str]) -> list[str]:
    if not fallbacks:
        return []
    rows = [
        f'<tr><td class="text">{_link(entry["file"], entry["line"], anchors)}</td>'
        f'<td class="text">{_escape(entry.get("function", ""))}</td>'
        f'<td class="text">{_escape(entry["name"])}</td><td>{entry.get("calls", 0):,}</td>'
        f'<td class="text">{_escape(entry.get("reason", ""))}</td>'
        f'<td class="src">{_escape(entry.get("source", ""))}</td></tr>'
        for entry in fallbacks
    ]
    headers = (
        '<th class="text">line</th><th class="text">function</th><th class="text">name</th><th>calls</th>'
    )
    return _section("fallbacks", headers + '<th class="text">reason</th><th class="text">source</th>', rows)


def _recompiles_table(recompiles: Sequence[Mapping[str, Any]], anchors: Mapping[str, str]) -> list[str]:
    if not recompiles:
        return []
    rows = []
    for entry in recompiles:
        changes = "".join(f"<li>{_escape(change)}</li>" for change in entry.get("changes", []))
        rows.append(
            f'<tr><td class="text">{_link(entry["file"], entry["line"], anchors)}</td>'
            f'<td class="text">{_escape(entry.get("function", ""))}</td><td>{entry.get("compiles", 0):,}</td>'
            f'<td class="text">{f"<ul>{changes}</ul>" if changes else ""}</td>'
            f'<td class="src">{_escape(entry.get("source", ""))}</td></tr>'
        )
    headers = '<th class="text">line</th><th class="text">function</th><th>compiles</th>'
    return _section(
        "recompiles",
        headers + '<th class="text">what changed between compiles</th><th class="text">source</th>',
        rows,
    )


def _kernels_table(kernels: Sequence[Mapping[str, Any]], anchors: Mapping[str, str]) -> list[str]:
    if not kernels:
        return []
    ordered = sorted(kernels, key=lambda kernel: -kernel.get("seconds", 0.0))
    shown = ordered[:KERNELS_ON_PAGE]
    rows = [
        f'<tr><td class="text">{_escape(kernel["name"])}</td><td>{kernel.get("ops", 0):,}</td>'
        f"<td>{kernel.get('launches', 0):,}</td>"
        f"<td>{_escape(_format_seconds(kernel.get('seconds', 0.0)))}</td>"
        f"<td>{_escape(_format_seconds(kernel.get('compile_seconds', 0.0)))}</td>"
        f'<td class="text">{_origins(kernel, lambda file, line: _link(file, line, anchors))}</td>'
        "</tr>"
        for kernel in shown
    ]
    left_out = len(ordered) - len(shown)
    headers = '<th class="text">kernel</th><th>ops</th><th>launches</th><th>seconds</th>'
    table = _section("kernels", headers + '<th>compile seconds</th><th class="text">from lines</th>', rows)
    return table + ([f"<p>and {_plural(left_out, 'more kernel')}</p>"] if left_out else [])


def _source_lines(file: str, data: Mapping[str, Any]) -> tuple[dict[int, str], bool]:
    """The file's text by line number, and whether it is the whole file; when the file cannot be read
    (``<string>``, deleted since) only the profiled lines' own text is known."""
    if text := linecache.getlines(file):
        return {number: line.rstrip("\r\n") for number, line in enumerate(text, start=1)}, True
    known = {}
    for entry in (*data["lines"], *data.get("fallbacks", []), *data.get("recompiles", [])):
        if entry["file"] == file:
            known.setdefault(entry["line"], entry.get("source", ""))
    return dict(sorted(known.items())), False


def _file_view(file: str, anchor: str, data: Mapping[str, Any], total: float) -> list[str]:
    profiled = {line["line"]: line for line in data["lines"] if line["file"] == file}
    seconds = sum(line.get("seconds", 0.0) for line in profiled.values())
    source, whole = _source_lines(file, data)
    view = [
        f'<h2 id="{anchor}">{_escape(file)}</h2>',
        f"<p>{_escape(_format_seconds(seconds))} s, {100 * _share(seconds, total):.1f}% of the profiled time"
        f"{'' if whole else '; the file could not be read, so only the profiled lines are shown'}</p>",
        '<table class="file">',
        f'<tr><th class="text">#</th>{_number_headers()}<th class="text">source</th></tr>',
    ]
    blank_numbers = "<td></td>" * len(COLUMNS)
    previous = 0
    for number, text in source.items():
        if number != previous + 1 and not whole:
            view.append(f'<tr class="gap"><td colspan="{len(COLUMNS) + 2}">...</td></tr>')
        previous = number
        line = profiled.get(number)
        if line is None:
            attributes, numbers = "", blank_numbers
        else:
            heat = _heat(_share(line.get("seconds", 0.0), total))
            style = f' style="background:{heat}"' if heat else ""
            details = _details(line)
            title = f' title="{_escape(details)}"' if details else ""
            attributes = style + title
            numbers = _number_cells(line, total)
        view.append(
            f'<tr id="{anchor}-{number}"{attributes}>'
            f'<td class="lineno"><a href="#{anchor}-{number}">{number}</a></td>{numbers}'
            f'<td class="src">{_escape(text)}</td></tr>'
        )
    view.append("</table>")
    return view
