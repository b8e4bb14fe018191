"""Shared by the dossier tests: the canary strings planted in the private corpus, and the visible text of a page."""

from __future__ import annotations

from html.parser import HTMLParser

CANARIES = {
    "file": "CANARYFILE7q2.csv",
    "text_column": "CANARYCOLTEXT4k",
    "label_column": "CANARYCOLLABEL9m",
    "person_column": "CANARYCOLPERS3z",
    "text": "CANARYTEXTx81",
    "person": "CANARYPID55w",
}


class _Text(HTMLParser):
    """The visible text of an HTML page (no tags, no CSS)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self._skip += tag in ("style", "title")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("style", "title")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def visible_text(html: str) -> str:
    """The words a reader sees (entities decoded, whitespace collapsed)."""
    p = _Text()
    p.feed(html)
    return " ".join(" ".join(p.parts).split())


# ------------------------------------------------------------------------------------- text of each PDF page
# A small reader for the PDFs Chromium (Skia) writes: objects in the clear, Flate-compressed streams, Type0 fonts
# with a ToUnicode CMap, text shown as hex glyph strings with Tj / TJ. Enough to check what each page says.

import re  # noqa: E402
import zlib  # noqa: E402

_OBJ = re.compile(rb"(\d+) 0 obj\s*(.*?)endobj", re.S)
_STREAM = re.compile(rb"stream\r?\n(.*?)\r?\nendstream", re.S)


def _stream(obj: bytes) -> bytes:
    m = _STREAM.search(obj)
    if not m:
        return b""
    body = m.group(1)
    length = re.search(rb"/Length (\d+)\b", obj[:m.start()])
    if length:  # the data may itself end in a CR byte, which the pattern's optional \r would swallow
        start = m.start(1)
        body = obj[start:start + int(length.group(1))]
    return zlib.decompress(body) if b"/FlateDecode" in obj[:m.start()] else body


def _cmap(text: bytes) -> dict[int, str]:
    out: dict[int, str] = {}
    for block in re.findall(rb"beginbfchar(.*?)endbfchar", text, re.S):
        for src, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
            out[int(src, 16)] = bytes.fromhex(dst.decode()).decode("utf-16-be", "replace")
    for block in re.findall(rb"beginbfrange(.*?)endbfrange", text, re.S):
        for lo, hi, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
            start = int(dst, 16)
            for k, code in enumerate(range(int(lo, 16), int(hi, 16) + 1)):
                out[code] = chr(start + k)
    return out


def pdf_page_texts(data: bytes) -> list[str]:
    """The text of each page of a Chromium-made PDF, in page order (spaces between shown strings)."""
    objs = {int(m.group(1)): m.group(2) for m in _OBJ.finditer(data)}
    def leaves(num: int) -> list[int]:  # the page tree, depth first (Chromium nests it past a few pages)
        obj = objs[num]
        kids = re.search(rb"/Kids \[([^\]]*)\]", obj)
        if not re.search(rb"/Type /Pages\b", obj) or not kids:
            return [num]
        return [leaf for n in re.findall(rb"(\d+) 0 R", kids.group(1)) for leaf in leaves(int(n))]

    root = re.search(rb"/Type /Catalog.*?/Pages (\d+) 0 R", data, re.S)
    pages = leaves(int(root.group(1))) if root else []
    out = []
    for page in pages:
        obj = objs[page]
        fonts = {}
        for name, ref in re.findall(rb"/(F\d+) (\d+) 0 R", obj):
            tu = re.search(rb"/ToUnicode (\d+) 0 R", objs.get(int(ref), b""))
            fonts[name.decode()] = _cmap(_stream(objs[int(tu.group(1))])) if tu else {}
        contents = re.search(rb"/Contents (\d+) 0 R", obj)
        stream = _stream(objs[int(contents.group(1))]) if contents else b""
        font: dict[int, str] = {}
        words = []
        for tok in re.finditer(rb"/(F\d+) [\d.]+ Tf|<([0-9A-Fa-f]+)>", stream):
            if tok.group(1):
                font = fonts.get(tok.group(1).decode(), {})
                continue
            hexs = tok.group(2).decode()
            words.append("".join(font.get(int(hexs[i:i + 4], 16), "") for i in range(0, len(hexs), 4)))
        out.append(" ".join(words))
    return out


# ------------------------------------------------------------------------------------- Chromium: required
import os  # noqa: E402

import pytest  # noqa: E402


def in_ci() -> bool:
    """True where the environment variable CI is set to anything but empty, 0, false or no (CI sets CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_chromium() -> str:
    """The Chromium executable the dossier prints with; without one the test FAILS (never skips: a skipped test
    proves nothing), naming the install — scripts/test.sh installs Debian's chromium, as for the browser tests."""
    from dpkps_core.dossier import NoChromiumError, find_chromium

    try:
        return find_chromium()
    except NoChromiumError as exc:
        pytest.fail(f"no Chromium on this machine ({exc}); install it (`apt-get install -y chromium`; "
                    "scripts/test.sh does this as root)." + (" (CI=true: the dossier's PDF must be tested)"
                                                            if in_ci() else ""))
