"""The organisation's release policy and the decision line of the internal dossier (issue 34 §1).

A policy file (JSON, or TOML) sets the thresholds a privacy officer applies to a release; the internal edition
turns them into **share / share with restrictions / do not share**, each reason named, in the spirit of NVIDIA NeMo
Safe Synthesizer's evaluation report ("ready to share" … "block release") and of NIST SP 800-226 §5's advice to
fix ε and the unit of privacy in a written policy BEFORE looking at results. The format (docs/DOSSIER.md)::

    # policy.toml — every key optional; a table [policy] may hold them instead
    max_epsilon_per_release = 10      # this release's total ε (ε_voc + ε_kde (+ ε_count)) must not exceed it
    max_epsilon_per_unit = 20         # the run's budget cap per unit (the most any unit may spend) must not exceed it
    required_audit_verdict = "consistent"   # "none" | "no-violation" | "consistent" (dpkps audit's verdict_kind)
    min_utility_ratio = 0.8           # synthetic / real downstream accuracy (evaluation.json) must reach it
    required_disclosure_verdict = "no-leakage"   # "none" | "no-leakage" (the disclosure test, disclosure.json)
    allow_seeded_demo = false         # a seeded run's noise is predictable: never shared unless this is true

Privacy findings (ε over a limit, an audit violation, seeded noise, a disclosure test whose empirical bound exceeds
the claimed ε) say **do not share**; missing or weak evidence
(no audit, evaluation or disclosure test where the policy asks for one, an inconclusive audit, utility under the
minimum, a disclosure test that finds matches above chance where "no-leakage" is required) says
**share with restrictions**; otherwise **share**.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path
from typing import Any, Mapping

from dpkps_core.errors import DPKPSError

SHARE = "share"
RESTRICT = "share with restrictions"
BLOCK = "do not share"
AUDIT_REQUIREMENTS = ("none", "no-violation", "consistent")
DISCLOSURE_REQUIREMENTS = ("none", "no-leakage")


class PolicyError(DPKPSError):
    """A release policy file could not be read or holds an unknown or invalid setting."""


@dataclasses.dataclass(frozen=True)
class Policy:
    """Thresholds of a release decision (all optional). See the module docstring for their meaning."""

    max_epsilon_per_release: float | None = None
    max_epsilon_per_unit: float | None = None
    required_audit_verdict: str = "none"
    min_utility_ratio: float | None = None
    allow_seeded_demo: bool = False
    required_disclosure_verdict: str = "none"
    source: str = "built-in default (no policy file)"

    def __post_init__(self) -> None:
        for name in ("max_epsilon_per_release", "max_epsilon_per_unit", "min_utility_ratio"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise PolicyError(f"The policy's {name} must be a finite number > 0, got {value!r}.")
            object.__setattr__(self, name, float(value))
        if self.required_audit_verdict not in AUDIT_REQUIREMENTS:
            raise PolicyError(f"The policy's required_audit_verdict must be one of {', '.join(AUDIT_REQUIREMENTS)}, "
                              f"got {self.required_audit_verdict!r}.")
        if self.required_disclosure_verdict not in DISCLOSURE_REQUIREMENTS:
            raise PolicyError("The policy's required_disclosure_verdict must be one of "
                              f"{', '.join(DISCLOSURE_REQUIREMENTS)}, got {self.required_disclosure_verdict!r}.")
        if not isinstance(self.allow_seeded_demo, bool):
            raise PolicyError("The policy's allow_seeded_demo must be true or false.")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_FIELDS = tuple(f.name for f in dataclasses.fields(Policy) if f.name != "source")


def policy_from_mapping(data: Mapping[str, Any], *, source: str = "settings given by the caller") -> Policy:
    """A :class:`Policy` from a mapping (top level, or a ``policy`` table); an unknown key is refused."""
    if isinstance(data.get("policy"), Mapping):
        data = data["policy"]
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise PolicyError(f"The policy {source} has unknown setting(s) {', '.join(unknown)}; known: "
                          f"{', '.join(_FIELDS)}.")
    return Policy(**{k: data[k] for k in _FIELDS if k in data}, source=source)


def parse_policy(data: bytes | str, *, name: str) -> Policy:
    """A policy from a file's content (an upload in the app): ``name`` ending in ``.toml`` is TOML, else JSON."""
    is_toml = name.lower().endswith(".toml")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        parsed = tomllib.loads(text) if is_toml else json.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise PolicyError(f"The policy file {name!r} is not valid {'TOML' if is_toml else 'JSON'} "
                          f"({type(exc).__name__}).") from None
    if not isinstance(parsed, Mapping):
        raise PolicyError(f"The policy file {name!r} must hold an object of settings.")
    return policy_from_mapping(parsed, source=name)


def load_policy(path: str | Path) -> Policy:
    """Read a policy file: ``.toml`` as TOML, anything else as JSON."""
    p = Path(path)
    if not p.is_file():
        raise PolicyError(f"The policy file {p.name!r} does not exist.")
    return parse_policy(p.read_bytes(), name=p.name)


def as_policy(policy: Policy | Mapping[str, Any] | str | Path | None) -> Policy:
    """A policy given as a :class:`Policy`, a mapping, a file path, or None (the built-in default)."""
    if policy is None:
        return Policy()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        return policy_from_mapping(policy)
    if isinstance(policy, (str, Path)):
        return load_policy(policy)
    raise PolicyError("A policy is a Policy, a mapping of settings or the path of a policy file.")


@dataclasses.dataclass(frozen=True)
class Decision:
    """The decision line and the reasons behind it (each a sentence, with the rule it comes from)."""

    verdict: str
    reasons: tuple[dict[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": list(self.reasons)}


def _reason(level: str, rule: str, text: str) -> dict[str, str]:
    return {"level": level, "rule": rule, "text": text}


def decide(policy: Policy, *, epsilon_total: float, epsilon_cap: float | None, seeded: bool,
           audit: Mapping[str, Any] | None, utility_ratio: float | None,
           disclosure: Mapping[str, Any] | None = None) -> Decision:
    """Apply ``policy`` to a run's figures (the claimed ε, its cap, the seed policy, the audit verdict kind, the
    synthetic / real accuracy ratio and the disclosure test's result, ``disclosure.json``); every rule that fires is
    a named reason, and one that holds is named too."""
    reasons: list[dict[str, str]] = []
    if seeded and not policy.allow_seeded_demo:
        reasons.append(_reason(BLOCK, "allow_seeded_demo", "The run used a fixed demo seed: its noise is "
                               "predictable and the DP guarantee does not hold."))
    limit = policy.max_epsilon_per_release
    if limit is not None:
        ok = epsilon_total <= limit + 1e-12
        reasons.append(_reason(SHARE if ok else BLOCK, "max_epsilon_per_release",
                               f"This release's ε = {epsilon_total:g} {'is within' if ok else 'exceeds'} the "
                               f"policy's maximum per release ({limit:g})."))
    limit = policy.max_epsilon_per_unit
    if limit is not None:
        if epsilon_cap is None:
            reasons.append(_reason(RESTRICT, "max_epsilon_per_unit", "The run set no budget cap per unit, so the "
                                   f"policy's maximum per unit ({limit:g}) cannot be shown to hold."))
        else:
            ok = epsilon_cap <= limit + 1e-12
            reasons.append(_reason(SHARE if ok else BLOCK, "max_epsilon_per_unit",
                                   f"The budget cap per unit (ε = {epsilon_cap:g}) {'is within' if ok else 'exceeds'} "
                                   f"the policy's maximum per unit ({limit:g})."))
    reasons += _audit_reasons(policy, audit)
    reasons += _disclosure_reasons(policy, disclosure)
    if policy.min_utility_ratio is not None:
        if utility_ratio is None:
            reasons.append(_reason(RESTRICT, "min_utility_ratio", "No synthetic / real accuracy was recorded "
                                   "(evaluate the run first), so the policy's minimum utility cannot be checked."))
        else:
            ok = utility_ratio >= policy.min_utility_ratio
            reasons.append(_reason(SHARE if ok else RESTRICT, "min_utility_ratio",
                                   f"Synthetic / real accuracy {utility_ratio:.2f} {'reaches' if ok else 'is below'} "
                                   f"the policy's minimum ({policy.min_utility_ratio:g})."))
    levels = {r["level"] for r in reasons}
    verdict = BLOCK if BLOCK in levels else RESTRICT if RESTRICT in levels else SHARE
    if not reasons:
        reasons.append(_reason(SHARE, "policy", "The policy sets no threshold this run could fail."))
    return Decision(verdict, tuple(reasons))


def _audit_reasons(policy: Policy, audit: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The audit rule: a violation always blocks; the required verdict kind otherwise decides."""
    if audit is None:
        if policy.required_audit_verdict == "none":
            return []
        return [_reason(RESTRICT, "required_audit_verdict", "No audit report is in the run folder (run `python -m "
                        "dpkps_core audit … --out RUN_FOLDER`), so the required audit verdict cannot be shown.")]
    kind = str(audit.get("verdict_kind") or ("violation" if audit.get("violation") else "consistent"))
    bound, claimed = audit.get("empirical_epsilon_lower_bound"), audit.get("claimed_epsilon")
    figures = f"lower bound {bound} vs claimed ε = {claimed}"
    if kind == "violation":
        return [_reason(BLOCK, "required_audit_verdict", f"The empirical audit found a violation ({figures}).")]
    if policy.required_audit_verdict == "consistent" and kind != "consistent":
        return [_reason(RESTRICT, "required_audit_verdict", f"The audit was {kind} ({figures}); the policy "
                        "requires a consistent one.")]
    return [_reason(SHARE, "required_audit_verdict", f"The empirical audit is {kind} ({figures}).")]


def _disclosure_reasons(policy: Policy, disclosure: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The disclosure rule (issue 34 §2): a bound above the claimed ε always blocks; matches above chance restrict
    where the policy requires "no-leakage" (within the claim DP allows them); a missing test restricts then."""
    required = policy.required_disclosure_verdict == "no-leakage"
    if disclosure is None:
        if not required:
            return []
        return [_reason(RESTRICT, "required_disclosure_verdict", "No disclosure test is in the run folder (run it "
                        "on the app's Evaluate page or with `python -m dpkps_core evaluate --disclosure`), so the required verdict "
                        "cannot be shown.")]
    verdict = str(disclosure.get("verdict") or "")
    figures = (f"empirical ε lower bound {disclosure.get('epsilon_lower_bound'):.3g} vs claimed ε = "
               f"{disclosure.get('claimed_epsilon')}, p = {disclosure.get('p_value'):.3g}"
               if isinstance(disclosure.get("epsilon_lower_bound"), (int, float))
               and isinstance(disclosure.get("p_value"), (int, float)) else "figures unreadable")
    if verdict == "leakage beyond the claimed ε":
        return [_reason(BLOCK, "required_disclosure_verdict", "The disclosure test found leakage beyond the claimed "
                        f"ε ({figures}).")]
    if verdict == "leakage":
        return [_reason(RESTRICT if required else SHARE, "required_disclosure_verdict",
                        f"The disclosure test finds the training documents matched more often than the held-out "
                        f"control ({figures})" + ("; the policy requires no leakage." if required else
                                                  ", within what the claimed ε allows."))]
    return [_reason(SHARE, "required_disclosure_verdict", f"The disclosure test found no evidence of leakage "
                    f"({figures}).")]
