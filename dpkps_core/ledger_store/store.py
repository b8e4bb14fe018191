"""The persistent ledger store's operations (docs/DESIGN.md §2.0; see :mod:`dpkps_core.ledger_store`): the individual
filter's admission, events, caps, a corpus's view, and the import of previous-format files."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import sqlite3
from typing import Sequence

import numpy as np

from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import MAX_ROW_FACTOR
from dpkps_core.errors import ParameterError, PrivacyBudgetError
from dpkps_core.ledger_store.folder import (CHUNK, LEGACY_FORMAT, LEGACY_IMPORTED, _FINGERPRINT_DOMAIN, _members,
                                            _now, _pack_ids, unique_keys)
from dpkps_core.ledger_store.records import (CapChange, CorpusView, RecordedEvent, Release, _check_cap,
                                             _check_epsilon, _check_label, _json_default, _normalise_legacy,
                                             _shown_cap, _stored_cap)
from dpkps_core.ledger_store.rules import ReleaseRows, decide, distinct, plain_rows
from dpkps_core.ledger_store.sqlite_store import StoreFiles


class LedgerStore(StoreFiles):
    """The persistent ledger store of one folder (see :mod:`dpkps_core.ledger_store`). Safe across threads and
    processes."""

    # ---- public operations
    def keys(self, units: Sequence[str]) -> np.ndarray:
        """The PRIVATE keys of unit strings (never export or log them)."""
        return self._hasher.keys(list(units))

    def admit(self, keys: np.ndarray, epsilon: float, *, new_cap: float | None, tool: str, run: str | None,
              what: str, force: bool = False, rows: ReleaseRows | None = None,
              row_factor: float = MAX_ROW_FACTOR) -> tuple[int, np.ndarray]:
        """The filter, in one transaction (the unit rules of :mod:`dpkps_core.ledger_store.rules`): ``rows`` are the
        release's rows over the distinct ``keys`` (one key per key string; without ``rows`` each key is one plain
        unit). The rows whose keys all fit take part and their keys are charged now; a release row records which
        keys were charged. ``force`` charges every row (a release that did not filter its input). Returns
        (release id, mask over the rows)."""
        epsilon = _check_epsilon(epsilon)
        tool = _check_label(tool, "tool", optional=False)
        run = _check_label(run, "run name", optional=True)
        rows = plain_rows(len(keys)) if rows is None else rows
        with self._transaction(write=True) as conn:
            ids, n = self._ids_for(conn, keys, _stored_cap(new_cap))
            spent, caps, direct, chunks = self._read_arrays(conn, ids, n)
            ok, d_spent, d_direct = decide(rows, spent, caps, direct, epsilon=epsilon, row_factor=row_factor,
                                           force=force)
            touched = np.flatnonzero((d_spent > 0) | (d_direct > 0))
            chosen = ids[touched]
            which = chosen // CHUNK
            for chunk in np.flatnonzero(np.bincount(which)).tolist() if which.size else []:
                s, _, d = chunks[chunk]
                sel = which == chunk
                at = chosen[sel] - chunk * CHUNK
                if d_spent[touched[sel]].any():
                    s[at] += d_spent[touched[sel]]
                    conn.execute("UPDATE unit_spent SET spent = ? WHERE chunk = ?",
                                 (s.astype("<f8").tobytes(), chunk))
                if d_direct[touched[sel]].any():
                    d[at] += d_direct[touched[sel]]
                    conn.execute("UPDATE unit_direct SET direct = ? WHERE chunk = ?",
                                 (d.astype("<f8").tobytes(), chunk))
            primary = rows.primary
            units = int(np.count_nonzero(np.bincount(primary[ok], minlength=len(ids))))
            left_out = int(np.count_nonzero(np.bincount(primary, minlength=len(ids)))) - units
            lo, hi, blob = _pack_ids(chosen)
            cur = conn.execute(
                "INSERT INTO releases(recorded, tool, run, what, epsilon, units, left_out, filtered, lo, hi, bitmap) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (_now(), tool, run, str(what)[:300], epsilon, units, left_out, int(not force), lo, hi, blob))
            self._bump(conn)
            return int(cur.lastrowid), ok

    def record_event(self, release_id: int, event: PrivacyEvent, *, tool: str, run: str | None) -> int:
        """Attach a charged event to its release row; returns the event's id (a run's local record lists the ids of
        the events its outputs carry, docs/DESIGN.md §2.0: a run's report is derived from them)."""
        tool = _check_label(tool, "tool", optional=False)
        run = _check_label(run, "run name", optional=True)
        data = json.dumps(event.to_dict(), ensure_ascii=False, default=_json_default)
        with self._transaction(write=True) as conn:
            if conn.execute("SELECT 1 FROM releases WHERE id = ?", (int(release_id),)).fetchone() is None:
                raise sqlite3.DatabaseError(f"release {release_id} is missing")
            cur = conn.execute("INSERT INTO events(release_id, recorded, tool, run, epsilon, delta, event) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?)",
                               (int(release_id), _now(), tool, run, event.epsilon, event.delta, data))
            self._bump(conn)
            return int(cur.lastrowid)

    def set_cap(self, keys: np.ndarray, cap: float | None, *, tool: str, run: str | None = None) -> int:
        """Set the cap of the units ``keys`` (distinct; unknown ones are added with spent 0), recorded in the cap
        history with who and when. ``None`` removes their cap. Returns how many units' cap changed (0: nothing
        recorded)."""
        cap = _check_cap(cap)
        tool = _check_label(tool, "tool", optional=False)
        run = _check_label(run, "run name", optional=True)
        stored = _stored_cap(cap)
        with self._transaction(write=True) as conn:
            self._refresh_index(conn)
            known = self._lookup(keys)
            ids, n = self._ids_for(conn, keys, stored)
            _, caps, _, chunks = self._read_arrays(conn, ids, n)
            changed = caps != stored
            was_known = known >= 0
            if not changed.any() and not (~was_known).any():
                return 0
            for chunk in chunks:
                _, c, _ = chunks[chunk]
                sel = (ids // CHUNK) == chunk
                c[ids[sel] - chunk * CHUNK] = stored
                conn.execute("UPDATE unit_caps SET caps = ? WHERE chunk = ?", (c.astype("<f8").tobytes(), chunk))
            previous = caps[was_known]
            lo, hi, blob = _pack_ids(ids)
            conn.execute("INSERT INTO cap_history(recorded, tool, run, cap, previous_min, previous_max, units, lo, hi, "
                         "bitmap) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (_now(), tool, run, stored, float(previous.min()) if previous.size else None,
                          float(previous.max()) if previous.size else None, len(ids), lo, hi, blob))
            self._bump(conn)
            return int(changed.sum() + (~was_known).sum())  # a new unit's cap already equals ``cap``

    def view(self, keys: np.ndarray, *, new_unit_cap: float | None, primary: int | None = None,
             links: tuple[np.ndarray, np.ndarray] | None = None, persons: bool = False,
             key_rows: np.ndarray | None = None) -> CorpusView:
        """What the ledger knows about a corpus's units: PRIVATE, local. ``keys`` (distinct) are the corpus's unit
        keys first (``primary`` of them; all by default), then their linked keys; ``links`` pairs a unit's position
        with a linked key's position. A unit took part in a release when its key or one of its linked keys did;
        with ``persons`` a unit's spend is the person's loss L(p) (:mod:`~dpkps_core.ledger_store.rules`) and the
        view has each person's room per row (``key_rows``: the corpus's rows per key position)."""
        primary = len(keys) if primary is None else int(primary)
        pp, dd = links if links is not None else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        with self._transaction(write=False) as conn:
            n = self._refresh_index(conn)
            ids = self._lookup(keys)
            known = ids >= 0
            spent = np.zeros(len(keys), dtype=np.float64)
            direct = np.zeros(len(keys), dtype=np.float64)
            caps = np.full(len(keys), _stored_cap(new_unit_cap), dtype=np.float64)
            s, c, d, _ = self._read_arrays(conn, ids[known], n)
            spent[known], caps[known], direct[known] = s, c, d
            unit_spent = spent[:primary] + direct[:primary] if persons else spent[:primary].copy()
            room: np.ndarray | None = None
            if persons:
                room = np.full(primary, np.inf)
            if persons and len(pp):
                pairs = distinct(pp * len(keys) + dd)
                unit_spent += np.bincount(pairs // len(keys), weights=direct[pairs % len(keys)], minlength=primary)
                rows_per_key = np.ones(len(keys)) if key_rows is None else np.maximum(key_rows, 1)
                np.minimum.at(room, pp, (caps[dd] - spent[dd]) / rows_per_key[dd])
            kid = np.sort(ids[known])
            releases: list[Release] = []
            history: list[CapChange] = []

            def inside(lo_: int, hi_: int, blob: bytes) -> int:
                member = np.zeros(len(keys), dtype=bool)
                member[known] = _members(lo_, hi_, blob, ids[known])
                took = member[:primary].copy()
                if len(pp):
                    took[pp[member[dd]]] = True
                return int(took.sum())

            if kid.size:
                lo, hi = int(kid[0]), int(kid[-1])
                rows = conn.execute("SELECT id, recorded, tool, run, what, epsilon, units, left_out, filtered, lo, hi, "
                                    "bitmap FROM releases WHERE hi >= ? AND lo <= ? ORDER BY id", (lo, hi)).fetchall()
                touching = []
                for row in rows:
                    count = inside(row[9], row[10], row[11])
                    if count:
                        touching.append((row, count))
                events = self._events(conn, [row[0] for row, _ in touching])
                releases = [Release(int(r[0]), r[1], r[2], r[3], r[4], float(r[5]), int(r[6]), int(r[7]), bool(r[8]),
                                    count, events.get(int(r[0]), ())) for r, count in touching]
                for row in conn.execute("SELECT recorded, tool, run, cap, previous_min, previous_max, lo, hi, bitmap "
                                        "FROM cap_history WHERE hi >= ? AND lo <= ? ORDER BY id", (lo, hi)):
                    count = inside(row[6], row[7], row[8])
                    if count:
                        history.append(CapChange(row[0], row[1], row[2], _shown_cap(row[3]), _shown_cap(row[4]),
                                                 _shown_cap(row[5]), count))
            return CorpusView(primary, int(known[:primary].sum()), unit_spent, caps[:primary], known[:primary],
                              _check_cap(new_unit_cap), tuple(releases), tuple(history), room)

    def _events(self, conn: sqlite3.Connection, release_ids: Sequence[int]) -> dict[int, tuple[RecordedEvent, ...]]:
        out: dict[int, list[RecordedEvent]] = {}
        ids = list(release_ids)
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ",".join("?" * len(part))
            for rid, eid, recorded, tool, run, data in conn.execute(
                    f"SELECT release_id, id, recorded, tool, run, event FROM events WHERE release_id IN ({marks}) "
                    "ORDER BY id", part):
                try:
                    event = PrivacyEvent.from_dict(json.loads(data))
                except (ValueError, TypeError, ParameterError):
                    raise sqlite3.DatabaseError("malformed event record") from None
                out.setdefault(int(rid), []).append(RecordedEvent(event, recorded, tool, run, int(eid)))
        return {k: tuple(v) for k, v in out.items()}

    def run_events(self, run: str) -> tuple[RecordedEvent, ...]:
        """The events recorded for the run named ``run`` (recorded with each event at its admission), in order."""
        run = _check_label(run, "run name", optional=False)
        with self._transaction(write=False) as conn:
            rows = conn.execute("SELECT id, recorded, tool, run, event FROM events WHERE run = ? ORDER BY id",
                                (run,)).fetchall()
        out = []
        for eid, recorded, tool, name, data in rows:
            try:
                event = PrivacyEvent.from_dict(json.loads(data))
            except (ValueError, TypeError, ParameterError):
                raise self._damaged(sqlite3.DatabaseError("malformed event record")) from None
            out.append(RecordedEvent(event, recorded, tool, name, int(eid)))
        return tuple(out)

    def events_by_id(self, event_ids: Sequence[int]) -> tuple[RecordedEvent, ...]:
        """The recorded events of ``event_ids``, in the order given (docs/DESIGN.md §2.0: a run's report is derived from
        the events its run folder's record names). An id the store does not hold is damage of that record (or a
        record of another ledger): refused, never skipped."""
        ids = [int(i) for i in event_ids]
        found: dict[int, RecordedEvent] = {}
        with self._transaction(write=False) as conn:
            for start in range(0, len(ids), 500):
                part = ids[start:start + 500]
                marks = ",".join("?" * len(part))
                for eid, recorded, tool, run, data in conn.execute(
                        f"SELECT id, recorded, tool, run, event FROM events WHERE id IN ({marks})", part):
                    try:
                        event = PrivacyEvent.from_dict(json.loads(data))
                    except (ValueError, TypeError, ParameterError):
                        raise self._damaged(sqlite3.DatabaseError("malformed event record")) from None
                    found[int(eid)] = RecordedEvent(event, recorded, tool, run, int(eid))
        missing = [i for i in ids if i not in found]
        if missing:
            raise PrivacyBudgetError(f"The privacy ledger {self.path} holds no event #{missing[0]} named by a run's "
                                     "ledger record: the run was recorded by another ledger, or the record is damaged.")
        return tuple(found[i] for i in ids)

    def recent_events(self, mechanism: str, *, before: int | None = None, scan: int = 200
                     ) -> list[tuple[int, RecordedEvent]]:
        """The most recent events of ``mechanism`` in the whole store (this tenant's ledger: every corpus), newest
        first, at most ``scan`` of them, with their ids (``before``: only ids below it). Public to the ledger's owner:
        the choice reads no corpus's units (docs/PRIVACY.md "Previews that steer choices")."""
        out: list[tuple[int, RecordedEvent]] = []
        with self._transaction(write=False) as conn:
            rows = conn.execute("SELECT id, recorded, tool, run, event FROM events WHERE id < ? ORDER BY id DESC "
                                "LIMIT ?", (int(before) if before is not None else 2 ** 62, int(scan))).fetchall()
        for eid, recorded, tool, run, data in rows:
            try:
                raw = json.loads(data)
                if raw.get("mechanism") != mechanism:
                    continue
                event = PrivacyEvent.from_dict(raw)
            except (ValueError, TypeError, AttributeError, ParameterError):
                raise self._damaged(sqlite3.DatabaseError("malformed event record")) from None
            out.append((int(eid), RecordedEvent(event, recorded, tool, run, int(eid))))
        return out

    def changes(self) -> int:
        """A counter that moves with every change of the store (for caching views)."""
        with self._transaction(write=False) as conn:
            return int(self._meta(conn)["changes"])

    def totals(self) -> dict[str, int]:
        """How many units, releases and events the store holds (sizes only; for benchmarks and tests)."""
        with self._transaction(write=False) as conn:
            return {"units": self._refresh_index(conn),
                    "releases": int(conn.execute("SELECT COUNT(*) FROM releases").fetchone()[0]),
                    "events": int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])}

    # ---- the previous format
    def import_legacy(self, texts: Sequence[str], units: Sequence[str], *, tool: str) -> int:
        """Charge the previous-format ledger file of the corpus whose document texts are ``texts`` to its units
        ``units`` (every unit at the file's total ε, one release per recorded event; the file's cap becomes their
        cap), then move the file to ``legacy-imported/``. Returns how many events were imported (0: no file)."""
        digests = sorted(hashlib.sha256(_normalise_legacy(t).encode("utf-8")).digest() for t in texts)
        mac = hmac.new(self._key, _FINGERPRINT_DOMAIN, hashlib.sha256)
        mac.update(len(digests).to_bytes(8, "big"))
        for d in digests:
            mac.update(d)
        path = self.root / f"{mac.hexdigest()}.json"
        if not path.is_file():
            return 0
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != LEGACY_FORMAT:
                raise ValueError("not a previous-format ledger file")
            events = [(PrivacyEvent.from_dict(r["event"]), str(r.get("tool", "?")), r.get("run"))
                      for r in data.get("releases", [])]
            cap = _check_cap(data.get("epsilon_cap"))
        except (OSError, ValueError, KeyError, TypeError, ParameterError):
            raise PrivacyBudgetError(f"The previous-format ledger file {path.name} is damaged; restore it from a "
                                     "backup before importing it. Nothing was spent.") from None
        keys, _ = unique_keys(self.keys(units))
        for event, old_tool, old_run in events:
            label = _check_label(f"{tool} (imported from {old_tool})"[:200].replace("/", " "), "tool", optional=False)
            rid, _ = self.admit(keys, event.epsilon, new_cap=cap, tool=label,
                                run=_check_label(old_run, "run name", optional=True) if old_run else None,
                                what="imported from the previous ledger format", force=True)
            self.record_event(rid, event, tool=label, run=None)
        if cap is not None:
            self.set_cap(keys, cap, tool=_check_label(f"{tool} (imported cap)", "tool", optional=False))
        done = self.root / LEGACY_IMPORTED
        done.mkdir(mode=0o700, exist_ok=True)
        os.replace(path, done / path.name)
        lock = path.with_suffix(".lock")
        if lock.exists():
            with contextlib.suppress(OSError):
                os.replace(lock, done / lock.name)
        return len(events)
