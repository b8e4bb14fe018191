"""The passes' process pool under a host that replaced ``__main__`` (Streamlit runs each page as ``__main__``,
AppTest from a temporary file since deleted): the pool's workers must not re-run (or fail to find) the host's
main script — they start from the core's own modules only."""

from __future__ import annotations

import sys
import types

import pytest

from dpkps_core.method import streaming_counts as sc


@pytest.fixture
def page_as_main(tmp_path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """``__main__`` as Streamlit leaves it: a module whose ``__file__`` is a page script — here one that records
    any run of it in a file, and then fails (a worker that ran it would break the pool or run the page)."""
    marker = tmp_path / "ran"
    page = tmp_path / "page.py"
    page.write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit('the page ran in a worker')\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", main)
    main.marker = marker  # type: ignore[attr-defined]
    return main


def test_pool_workers_never_run_the_hosts_main_script(page_as_main: types.ModuleType) -> None:
    terms = ["league match", "interest rates"]
    texts = ["the league match was won", "interest rates held", "nothing here"]
    tasks = [("occurrences", (texts[i:i + 1],), {"max_per_doc": 4, "max_chars": 10_000}) for i in range(3)]
    inline = list(sc.run_maps(tasks, terms=terms, workers=1, engine=sc.LOCAL))
    pooled = list(sc.run_maps(tasks, terms=terms, workers=2, engine=sc.LOCAL))
    assert [repr(r) for r in pooled] == [repr(r) for r in inline]
    assert not page_as_main.marker.exists()                  # type: ignore[attr-defined]
    assert sys.modules["__main__"] is page_as_main           # the host's __main__ is back as it was
