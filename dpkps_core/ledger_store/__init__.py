"""Persistent privacy ledger: an individual privacy filter over documents or persons (docs/DESIGN.md §2.0).

The budget follows the *units* (one document, or all documents of one person), not the file they came in: every
DP release, from the app in any session or from any CLI command, charges the units it used, and a unit whose
spend plus a release's ε would exceed its cap is **left out** of that release's input (Feldman & Zrnic,
"Individual Privacy Accounting via a Rényi Filter", NeurIPS 2021; for pure ε-DP each participating unit's loss per
release is ε). A unit's total loss then never exceeds its cap, whichever files, subsets, supersets, orders or
label columns its documents arrive in — and, under the unit rules (:mod:`~dpkps_core.ledger_store.rules`; issue 35
part 3), whichever unit each release used: every release charges each row's document key, a person-unit release
also the person key, and a person's loss counts the document-unit releases of their rows by group privacy.

* **Where.** One owner-only (0700) folder: ``$DPKPS_LEDGER_DIR``, else ``~/.local/share/dpkps/ledgers``. It holds
  ``ledger.key`` (a random secret, 0600), ``ledger.sqlite`` (the store, 0600) and ``ledger.lock``. **Fail
  closed:** an unusable folder, a missing or damaged key, or an unreadable, truncated or malformed store is a
  :class:`~dpkps_core.errors.PrivacyBudgetError` that spends nothing; there is no fallback to another folder.
* **Which unit.** A key is the HMAC-SHA256, under the local key, of a key string
  (:func:`dpkps_core.ledger_store.units.unit_strings`: a document's normalised text — never its label — or a person id). Only
  these keys are stored — never a text, person id, corpus path or file name — and they never leave the folder
  (a hash of private data is not DP): no run folder, report, bundle or log holds them.
* **What.** SQLite (stdlib ``sqlite3``, WAL journal). The units are append-only arrays in fixed-size chunks —
  ``unit_keys`` (32-byte keys), ``unit_spent`` (float64 ε spent), ``unit_direct`` (float64: a document key's
  unattributed document-unit spend, a person key's attributed one; see the rules) and ``unit_caps`` (float64 cap;
  +∞ = no cap) — so that admitting 200,000 units is a few array reads and writes, not 200,000 row updates. The
  ``meta`` table holds the format version (2) and the ledger's random id (``ledger_id``). A unit's id is its
  position. ``releases`` holds one row per admission (when, which tool and run, what, ε, how many units took part
  or were left out) with a zlib-compressed bitmap of the participating unit ids (a compact participation record:
  ``ledger --corpus`` lists the releases that touched a corpus's units); ``events`` the frozen
  :class:`~dpkps_core.dp.events.PrivacyEvent` s charged to each release; ``cap_history`` every cap change (who,
  when, the units it applied to).
* **How.** Every change is one ``BEGIN IMMEDIATE`` transaction, taken while holding an exclusive ``fcntl.flock``
  on ``ledger.lock`` (belt and braces), so concurrent processes serialise: none ever reads a spend another is
  about to change. A failed transaction rolls back: nothing is charged.

**Caps.** A unit's cap is kept with the unit. A unit never seen before gets the cap setting of the run that first
sees it (the app's cap field or the CLI's ``--epsilon-cap``; :data:`~dpkps_core.dp.ledger.DEFAULT_EPSILON_CAP` when
the run has none). Afterwards only an explicit change moves it: :meth:`LedgerStore.set_cap` (``ledger --corpus …
--epsilon-cap``, or changing the app's cap field while a corpus is loaded) sets the cap of *that corpus's* units
and is recorded in ``cap_history``. A run's cap setting also bounds the run itself: a release whose ε would take
the run's own total over it is refused whole (a public decision, :meth:`PersistentLedger.require`).

**Charging.** :meth:`PersistentLedger.admit` (called through :func:`dpkps_core.method.budget.admit` before a release
reads its input) decides and charges in one transaction, records a release row and returns the release's
:class:`~dpkps_core.dp.ledger.AdmissionTicket`; the ticket alone attaches the release's frozen events to that row
(up to the ε it reserved), with no data-dependent refusal — an event belongs to its admission by construction.
:meth:`PersistentLedger.charge` without a ticket is refused; :meth:`PersistentLedger.charge_every_unit` charges
*every* unit the ledger was opened with, explicitly (a mechanism that did not filter its input used all of it):
they are all charged, caps notwithstanding, and the release is recorded.

**A new ledger.** A folder without a store starts an empty one that knows no earlier release; the store object that
made it says so (``created``), and the CLI prints a note on first use. A version-1 store (document keys of text and
label) is refused, never reset.

**Older ledger files.** The previous format kept one JSON file per corpus (``dpkps-corpus-ledger`` v1, named by an
HMAC of the corpus's texts). Its spend cannot be mapped to units without the corpus, and ignoring it would reset
those documents' budgets, so the store refuses to start while such files are in the folder and says what to do:
``python -m dpkps_core ledger --corpus SPEC --import-legacy`` charges the matching file's releases to that
corpus's units (every one of them, at the file's total ε; its cap becomes their cap) and moves the file to
``legacy-imported/``; a file whose corpus is gone can only be moved out of the folder by the owner, deliberately.

Everything the views here return about a corpus's units (the largest spend, how many units are exhausted, which
releases touched them) is PRIVATE, local information: show it to the data owner, never export it.

The package: :mod:`~dpkps_core.ledger_store.folder` (folder, key, unit keys, participation bitmaps),
:mod:`~dpkps_core.ledger_store.sqlite_store` (files, flock + SQLite transactions, schema, unit index),
:mod:`~dpkps_core.ledger_store.rules` (the unit rules: which keys a release charges and which rows it leaves out),
:mod:`~dpkps_core.ledger_store.unit_keys` (a release's rows as precomputed keys: a streamed corpus admits 32 bytes
per document, not its unit strings; issue 31),
:mod:`~dpkps_core.ledger_store.store` (:class:`LedgerStore`: admission, events, caps, views, legacy import),
:mod:`~dpkps_core.ledger_store.records` (what the views return), :mod:`~dpkps_core.ledger_store.persistent`
(:class:`PersistentLedger`, :func:`open_corpus_ledger`). Import the names from here.
"""

from dpkps_core.ledger_store.folder import (CHUNK, FORMAT, KEY_BYTES, KEY_FILE, LEDGER_DIR_ENV, LEGACY_FORMAT,
                                            LEGACY_IMPORTED, LOCK_FILE, STORE_FILE, VERSION, _FINGERPRINT_DOMAIN,
                                            ledger_root, unique_keys)
from dpkps_core.ledger_store.persistent import PersistentLedger, open_corpus_ledger
from dpkps_core.ledger_store.records import CapChange, CorpusView, RecordedEvent, Release
from dpkps_core.ledger_store.rules import is_key_source
from dpkps_core.ledger_store.store import LedgerStore
from dpkps_core.ledger_store.unit_keys import KeySource, UnitKeys, UnitKeysBuilder, key_check, primary_keys

__all__ = [
    "CHUNK", "FORMAT", "KEY_BYTES", "KEY_FILE", "LEDGER_DIR_ENV", "LEGACY_FORMAT", "LEGACY_IMPORTED", "LOCK_FILE",
    "STORE_FILE", "VERSION", "_FINGERPRINT_DOMAIN", "ledger_root", "unique_keys", "PersistentLedger",
    "open_corpus_ledger", "CapChange", "CorpusView", "RecordedEvent", "Release", "LedgerStore", "is_key_source",
    "KeySource", "UnitKeys", "UnitKeysBuilder", "key_check", "primary_keys",
]
