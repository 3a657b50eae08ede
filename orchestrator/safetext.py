"""Text from outside, made safe to show: names from result folders and logs, a pulled snapshot's
fields, a URL the user typed. The one home of both rules; the terminal renderers, the CLI's
tables, its error handler and the Markdown report call them.

- `clean`: no control character reaches a terminal. A folder named `\\x1b[2J\\x1b]0;TITLE\\x07`
  would clear the screen and set the window's title; C0 and C1 controls (ESC, BEL, CSI...), DEL
  and the Unicode bidirectional overrides and isolates (text that reads otherwise than it is)
  are removed, and tab, newline and carriage return become one space each (a name stays on its
  line).
- `redact`: no query string of a URL is repeated in a message (a SAS token is one:
  `https://acct.blob.core.windows.net/?sv=...&sig=...`), nor a `sig=` value anywhere.
- `shown`: both, for one line a person reads.
"""

from __future__ import annotations

import re

_SPACE = {"\t", "\n", "\r"}
# C0 (U+0000-U+001F), DEL, C1 (U+0080-U+009F); the bidi embeddings, overrides and isolates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_QUERY = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#'\"<>]*)\?[^\s#'\"<>]*")
_SIG = re.compile(r"(?i)\b(sig|signature)=[^&\s'\"<>]+")
REDACTED = "<redacted>"


def clean(text: str) -> str:
    """`text` without control characters; tab, newline and CR as spaces."""
    return _CONTROL.sub(lambda m: " " if m.group() in _SPACE else "", text)


def redact(text: str) -> str:
    """`text` with each URL's query string and each sig=/signature= value replaced by <redacted>."""
    text = _QUERY.sub(lambda m: f"{m.group(1)}?{REDACTED}", text)
    return _SIG.sub(lambda m: f"{m.group(1)}={REDACTED}", text)


def shown(text: str) -> str:
    """One line for a person: redacted, then cleaned."""
    return clean(redact(text))
