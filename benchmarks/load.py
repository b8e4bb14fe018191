"""Several users at once (issue 35 §8): one app server, N real browser sessions (headless Chromium through
Playwright), each taking the demo through Ṽ, densities, sequences and ``--documents`` offline documents.

    python -m benchmarks.load --sessions 4     # the 1-session baseline, then 4 sessions, on the same server
    python -m benchmarks.load --sessions 2

One ``streamlit run app.py`` is started on a free localhost port with its own run folder root and ledger folder (a
temporary folder; the app's default settings, the demo BBC corpus, the offline model). In the same invocation:

0. a warm-up — one unmeasured session writes 2 documents: the server's first use (the offline model loaded, its
   speed calibrated) is paid there, not by the baseline (``--no-warm-up`` skips it);
1. the baseline — ONE session alone: page 3 builds Ṽ, page 4 the densities, page 5 samples the sequences, page 6
   writes ``--documents`` documents with the offline model (the app's defaults: batch 16, 200 tokens, 2 retries);
2. the load — ``--sessions`` sessions at once, each in its own browser context (its own Streamlit session), each
   the same walk; they press "Write documents" together (a barrier: every session writes while the others do).

Per session it prints the seconds page 6 took to show its estimate, the writing time (the click on "Write
documents" to "… of N documents in the run folder" on the page) and the documents in its run folder's
documents.jsonl and the items in generation_failures.jsonl (refused by the non-document screen after every retry):
each item once, none lost, none twice. Then the baseline's writing time, the load's slowest and
mean, and their ratios to the baseline (the target: four sessions within 5× of one). Other processes on the
machine load it too: the baseline is measured in the same invocation so that the ratio compares like with like.

Chromium: ``/usr/bin/chromium`` (``$DPKPS_CHROMIUM`` overrides), run with ``--no-sandbox``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Mapping

from benchmarks.app_server import app_server

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--headless"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


class Session:
    """One browser session walking the app (its own browser context, so its own Streamlit session)."""

    def __init__(self, context: Any, url: str, name: str, timeout_s: float) -> None:
        self.context, self.url, self.name = context, url, name
        self.timeout_ms = timeout_s * 1000
        self.page: Any = None
        self.figures: dict[str, Any] = {"session": name}

    async def idle(self) -> None:
        await self.page.wait_for_timeout(300)
        await self.page.wait_for_selector(IDLE, timeout=self.timeout_ms)
        await self.page.wait_for_timeout(150)

    async def see(self, text: str | re.Pattern[str]) -> None:
        await self.page.get_by_text(text).first.wait_for(state="visible", timeout=self.timeout_ms)

    async def nav(self, title: str) -> None:
        await self.idle()
        await self.page.get_by_test_id("stSidebarNav").get_by_text(title, exact=False).first.click()
        await self.idle()

    async def click(self, name: str | re.Pattern[str]) -> None:
        await self.idle()
        await self.page.get_by_role("button", name=name).first.click(timeout=self.timeout_ms)

    async def prepare(self) -> None:
        """Ṽ, densities and sequences (the demo's defaults), then page 6 with its estimate."""
        self.page = await self.context.new_page()
        self.page.set_default_timeout(self.timeout_ms)
        t0 = time.monotonic()
        await self.page.goto(self.url)
        await self.idle()
        await self.nav("Private vocabulary")
        await self.click(re.compile(r"^Build Ṽ \(spends ε_voc"))
        await self.see("Ṽ — the private vocabulary")
        await self.nav("Keyphrase densities")
        await self.click(re.compile(r"^Build densities \(spends ε_kde"))
        await self.see("Highest-density terms per class")
        await self.nav("Sequences")
        await self.click(re.compile(r"^Sample \d[\d,]* sequences \(free\)"))
        await self.see(re.compile(r"^\d[\d,]* sequences$"))
        self.figures["steps_3_to_5_s"] = round(time.monotonic() - t0, 1)
        t1 = time.monotonic()
        await self.nav("Write with an LLM")
        await self.see(re.compile(r"^Estimate for the"))
        self.figures["page6_estimate_s"] = round(time.monotonic() - t1, 1)

    async def write(self, documents: int) -> None:
        """Ask for ``documents`` documents, press "Write documents" and wait until all are in the run folder."""
        box = self.page.get_by_label(re.compile("Write documents for the first")).first
        await box.fill(str(documents))
        await box.press("Enter")
        await self.idle()
        await self.idle()
        button = self.page.get_by_role("button", name=re.compile(rf"^Write documents \({documents} to go\)")).first
        await button.wait_for(state="visible", timeout=self.timeout_ms)
        t0 = time.monotonic()
        await button.click()
        done = re.compile(rf"\b{documents} of {documents} documents in the run folder")
        failed = re.compile(r"of \d+ documents in the run folder")
        await self.page.get_by_text(failed).first.wait_for(state="visible", timeout=self.timeout_ms)
        self.figures["writing_s"] = round(time.monotonic() - t0, 1)
        self.figures["complete"] = await self.page.get_by_text(done).count() > 0
        m = re.search(r"[?&]run=([^&]+)", self.page.url)
        self.figures["run"] = m.group(1) if m else None


def count_documents(runs_root: Path, run: str | None) -> dict[str, int]:
    """The run's documents (lines of documents.jsonl), their distinct ids, its failed items (generation_failures.jsonl:
    refused by the non-document screen after every retry) and the distinct ids of both together (found under the
    runs root by the run's name). Nothing lost and nothing twice: documents = distinct ids, and documents + failures =
    distinct ids of both = the documents asked for."""
    from dpkps_core.records.runfolder import read_documents, read_failures

    missing = {"documents": -1, "distinct_ids": -1, "failed": -1, "accounted": -1}
    folders = [p for p in runs_root.rglob(run) if p.is_dir()] if run else []
    if not folders:
        return missing
    docs, fails = read_documents(folders[0]), read_failures(folders[0])
    ids = {d["id"] for d in docs}
    return {"documents": len(docs), "distinct_ids": len(ids), "failed": len(fails),
            "accounted": len(ids | {f["id"] for f in fails}) if len(docs) + len(fails) == len(ids | {f["id"] for f in fails}) else -1}


async def walk(browser: Any, url: str, n: int, documents: int, timeout_s: float, label: str) -> list[dict[str, Any]]:
    """``n`` sessions at once: each prepares (steps 3–5, page 6), then all press "Write documents" together."""
    contexts = [await browser.new_context(viewport={"width": 1400, "height": 1400}) for _ in range(n)]
    sessions = [Session(c, url, f"{label}-{i + 1}", timeout_s) for i, c in enumerate(contexts)]
    try:
        await asyncio.gather(*(s.prepare() for s in sessions))
        await asyncio.gather(*(s.write(documents) for s in sessions))  # together: every session writes at once
    finally:
        for c in contexts:
            await c.close()
    return [s.figures for s in sessions]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    tmp = Path(tempfile.mkdtemp(prefix="dpkps-load-"))
    env = dict(os.environ)
    env.update({"DPKPS_RUNS_DIR": str(tmp / "runs"), "DPKPS_LEDGER_DIR": str(tmp / "ledgers"),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    log_path = tmp / "streamlit.log"
    print(f"server log: {log_path}", flush=True)
    chromium = os.environ.get("DPKPS_CHROMIUM", "/usr/bin/chromium")
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
                           "sessions": args.sessions, "documents": args.documents}
    with app_server(env, log_path) as url:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
            try:
                rounds = [("warm-up", 1, 2)] if args.warm_up else []  # first use: model load, speed calibration
                rounds += [("baseline", 1, args.documents)] if args.baseline else []
                rounds.append(("load", args.sessions, args.documents))
                for label, n, documents in rounds:
                    t0 = time.monotonic()
                    figures = await walk(browser, url, n, documents, args.timeout, label)
                    for f in figures:
                        f.update(count_documents(tmp / "runs", f.get("run")))
                        f["expected"] = documents
                        print(json.dumps(f), flush=True)
                    out[label] = figures
                    print(f"{label}: {n} session(s) in {time.monotonic() - t0:.0f} s", flush=True)
            finally:
                await browser.close()
    load = [f["writing_s"] for f in out["load"]]
    out["load_writing_max_s"], out["load_writing_mean_s"] = max(load), round(sum(load) / len(load), 1)
    if args.baseline:
        base = out["baseline"][0]["writing_s"]
        out["baseline_writing_s"] = base
        out["ratio_max"] = round(max(load) / base, 2)
        out["ratio_mean"] = round(sum(load) / len(load) / base, 2)
    every = out.get("warm-up", []) + out.get("baseline", []) + out["load"]
    out["all_documents_ok"] = all(f["documents"] == f["distinct_ids"] and f["accounted"] == f["expected"]
                                  for f in every)  # each item written once or failed once: none lost, none twice
    return out


def machine() -> str:
    """CPU model and count (the figures depend on them)."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {len(os.sched_getaffinity(0))} usable CPUs"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=4, help="browser sessions at once (default 4)")
    p.add_argument("--documents", type=int, default=16, help="documents each session writes (default 16)")
    p.add_argument("--no-baseline", dest="baseline", action="store_false",
                   help="skip the 1-session baseline (no ratio then)")
    p.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                   help="skip the unmeasured first session (2 documents) that loads the model and measures its "
                        "speed, so that the baseline does not pay for them")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds any one step may take (default 1800)")
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    if args.sessions < 1 or args.documents < 1:
        p.error("--sessions and --documents must be positive")
    out = asyncio.run(run(args))
    summary = {k: v for k, v in out.items() if k not in ("warm-up", "baseline", "load")}
    for k, v in summary.items():
        print(f"{k}: {v}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0 if out["all_documents_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
