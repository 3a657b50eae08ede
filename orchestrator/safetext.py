"""Text from outside, made safe to show: names from result folders and logs, a pulled snapshot's
fields, a URL the user typed. The one home of both rules; the terminal renderers, the CLI's
tables, its error handler and the Markdown report call them.

- `clean`: no control character reaches a terminal. A folder named `\\x1b[2J\\x1b]0;TITLE\\x07`
  would clear the screen and set the window's title (OSC 52 writes the clipboard, OSC 8 makes
  a link); C0 and C1 controls (ESC, BEL, CSI...), DEL, the Unicode bidirectional marks,
  overrides and isolates (text that reads otherwise than it is) and the zero-width and
  invisible format characters (U+200B, U+2060, U+FEFF...: "NVI\u200bDIA" would pass for
  "NVIDIA") are removed; tab, newline, carriage return and the Unicode line and paragraph
  separators become one space each (a name stays on its line).
- `clean_lines`: `clean` line by line, newlines kept: what the CLI writes (cli/common.say).
- `markdown`: `clean`, then the backslash, `&`, `<`, `[` and `]` escaped (`\\[x\\](url)` is no
  link, `<a href>` no tag); `cell=True` escapes `|` too (no extra column).
- `plot`: a chart's text (plotly trace names, hover text, titles) as plain text: `clean`, then
  `&` and `<` escaped, except the few formatting tags azbench writes itself (`<br>`, `<b>`,
  `<i>`, `<sup>`, `<sub>`, `<extra>`): plotly draws `<a href>` as a link.
- `json_text`: a JSON document for a terminal with every character `clean` removes written as
  its `\\uXXXX` escape (the same JSON value; no raw ESC, bidi or zero-width character).
- `redact`: no query string of a URL is repeated in a message (a SAS token is one:
  `https://acct.blob.core.windows.net/?sv=...&sig=...`), nor a `sig=` value anywhere.
- `shown`: both, for one line a person reads.
"""

from __future__ import annotations

import re

_SPACE = {"\t", "\n", "\r", "\u2028", "\u2029", "\x85"}
# C0 (U+0000-U+001F), DEL, C1 (U+0080-U+009F); the bidi marks, embeddings, overrides and
# isolates; zero-width and invisible format characters (U+200B-U+200D, U+2060-U+2064 and the
# deprecated U+206A-U+206F, U+FEFF, U+180E, the soft hyphen U+00AD, U+034F); the line and
# paragraph separators U+2028/U+2029.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\xad\u034f\u061c\u180e\u200b-\u200f\u2028-\u202e"
                      "\u2060-\u206f\ufeff\ufff9-\ufffb]")
# The tags azbench itself writes into chart text; any other `<` is shown as written.
_PLOT_TAG = re.compile(r"<(?!(?:br|/?b|/?i|/?sup|/?sub|/?extra)>)")
_QUERY = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#'\"<>]*)\?[^\s#'\"<>]*")
_SIG = re.compile(r"(?i)\b(sig|signature)=[^&\s'\"<>]+")
REDACTED = "<redacted>"


def clean(text: str) -> str:
    """`text` without control characters; tab, newline and CR as spaces."""
    return _CONTROL.sub(lambda m: " " if m.group() in _SPACE else "", text)


def clean_lines(text: str) -> str:
    """`clean` for each line of a multi-line text, its newlines kept (a report, a script shown)."""
    return "\n".join(clean(line) for line in text.split("\n"))


def markdown(text: object, cell: bool = False) -> str:
    """Markdown from any text: `clean`, then `\\`, `&`, `<`, `[`, `]` (and `|` in a table cell)
    escaped, the backslash first (else `\\[x\\](url)` would read as a link again)."""
    out = clean(str(text)).replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;")
    out = out.replace("[", "\\[").replace("]", "\\]")
    return out.replace("|", "\\|") if cell else out


def plot(text: str) -> str:
    """Chart text (a plotly name, hover text or title) as plain text: `clean`, `&` and `<`
    escaped, except azbench's own `<br>`, `<b>`, `<i>`, `<sup>`, `<sub>` and `<extra>` tags."""
    return _PLOT_TAG.sub("&lt;", clean(text).replace("&", "&amp;"))


def plot_figure(value: object) -> object:
    """Every string in a chart spec (nested dicts and lists) through `plot`."""
    if isinstance(value, str):
        return plot(value)
    if isinstance(value, dict):
        return {k: plot_figure(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plot_figure(v) for v in value]
    return value


def json_text(document: str) -> str:
    """A JSON document with each character `clean` removes written as its \\u escape (inside
    JSON strings that is the same value; JSON's own syntax is ASCII)."""
    # Tab, newline and CR outside strings are JSON's whitespace (inside, json.dumps escapes them).
    return _CONTROL.sub(lambda m: m.group() if m.group() in "\t\n\r" else f"\\u{ord(m.group()):04x}",
                        document)


def redact(text: str) -> str:
    """`text` with each URL's query string and each sig=/signature= value replaced by <redacted>."""
    text = _QUERY.sub(lambda m: f"{m.group(1)}?{REDACTED}", text)
    return _SIG.sub(lambda m: f"{m.group(1)}={REDACTED}", text)


def shown(text: str) -> str:
    """One line for a person: redacted, then cleaned."""
    return clean(redact(text))
