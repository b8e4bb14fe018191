"""The release dossier of a run (issue 34 §1, §3; docs/DOSSIER.md): one self-contained HTML file + a versioned JSON,
in a release edition (DP outputs and public inputs only; it goes into the bundle with ``reproduce.md`` and
``reproduce_config.json``) and an internal edition (local only: private findings and a share decision from a
policy file; the export refuses it by name), and a PDF printed by headless Chromium. The release bundle that
carries the release edition is :mod:`dpkps_core.dossier.export` (the allowlist, the manifest, the ZIP).

>>> from dpkps_core.dossier import build_dossier
>>> d = build_dossier("runs/run-…", edition="release")
>>> open("dossier.html", "w").write(d.to_html())
"""

from dpkps_core.dossier.build import (EDITIONS, INTERNAL_HTML, INTERNAL_JSON, INTERNAL_PDF, RELEASE_HTML, RELEASE_JSON,
                                      RELEASE_PDF, REPRODUCE_CONFIG, REPRODUCE_MD, SCHEMA, SCHEMA_VERSION, Dossier,
                                      DossierError, build_dossier)
from dpkps_core.dossier.pdf import NoChromiumError, PrintError, find_chromium, screenshot, to_pdf
from dpkps_core.dossier.policy import BLOCK, RESTRICT, SHARE, Decision, Policy, PolicyError, decide, load_policy

__all__ = ["BLOCK", "Decision", "Dossier", "DossierError", "EDITIONS", "INTERNAL_HTML", "INTERNAL_JSON",
           "INTERNAL_PDF", "NoChromiumError", "Policy", "PolicyError", "PrintError", "RELEASE_HTML", "RELEASE_JSON",
           "RELEASE_PDF", "REPRODUCE_CONFIG", "REPRODUCE_MD", "RESTRICT", "SCHEMA", "SCHEMA_VERSION", "SHARE",
           "build_dossier", "decide", "find_chromium", "load_policy", "screenshot", "to_pdf"]
