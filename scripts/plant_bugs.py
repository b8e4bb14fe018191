"""Plant each bug of docs/TESTING.md's table, one at a time, in a scratch copy of the tree ($PLANT_ROOT, default
/tmp/mut-check), run the tests named for it, restore the file, and print CAUGHT or SURVIVED.

Usage: cp -r . /tmp/mut-check && python scripts/plant_bugs.py [bug numbers…]"""
import os
import json
import pathlib
import subprocess
import sys
ROOT = pathlib.Path(os.environ.get("PLANT_ROOT", "/tmp/mut-check"))
PY = sys.executable
BUGS = [
 ("1 RFF released noise halved (every member)", "dpkps_core/dp/kde.py",
  "noisy = noise.add_laplace(sums, scale=scale)", "noisy = noise.add_laplace(sums, scale=scale / 2)",
  ["tests/dp/test_mech_rff.py::test_every_member_is_eps_over_j_dp"]),
 ("2 PP SVT query noise Lap(σ) instead of Lap(2σ)", "dpkps_core/baselines/private_prediction.py",
  "private = d + lap(2 * sigma) >= theta_hat", "private = d + lap(sigma) >= theta_hat",
  ["tests/dp/test_consistency.py::test_private_prediction_event_matches_the_sparse_vector_draws"]),
 ("3 PP noisy threshold never refreshed", "dpkps_core/baselines/private_prediction.py",
  "                    theta_hat = theta + lap(sigma)  # line 17", "                    pass  # line 17",
  ["tests/dp/test_consistency.py::test_private_prediction_event_matches_the_sparse_vector_draws"]),
 ("4 PP query noise removed", "dpkps_core/baselines/private_prediction.py",
  "private = d + lap(2 * sigma) >= theta_hat", "private = d >= theta_hat",
  ["tests/dp/test_mech_private_prediction.py::test_sparse_vector_is_within_its_epsilon",
   "tests/dp/test_consistency.py::test_private_prediction_event_matches_the_sparse_vector_draws"]),
 ("5 PP top-k candidates from the private logits", "dpkps_core/baselines/private_prediction.py",
  "cand = torch.topk(z_pub, config.public_top_k).indices",
  "cand = torch.topk(z_priv.sum(dim=0) if n_priv else z_pub, config.public_top_k).indices",
  ["tests/dp/test_mech_private_prediction.py::test_candidates_come_from_the_public_prediction_only",
   "tests/dp/test_consistency.py::test_private_prediction_candidates_come_only_from_the_public_logits"]),
 ("6a AugPE vote noise halved (run_augpe's call)", "dpkps_core/baselines/augpe.py",
  "noisy = noisy_votes(votes, sigma=sigma, noise=noise)", "noisy = noisy_votes(votes, sigma=sigma / 2, noise=noise)",
  ["tests/dp/test_consistency.py::test_augpe_event_matches_every_vote_draw"]),
 ("6b AugPE vote noise halved (noisy_votes)", "dpkps_core/baselines/augpe.py",
  "np.asarray(votes, dtype=np.float64).reshape(-1), sigma=sigma)", "np.asarray(votes, dtype=np.float64).reshape(-1), sigma=sigma / 2)",
  ["tests/dp/test_mech_augpe.py::test_vote_histograms_are_mu_gdp_on_a_full_sensitivity_neighbour"]),
 ("7 pipeline counts 2S terms per document, noise for S", "dpkps_core/method/pipeline.py",
  "counts = term_counts(part.texts, vocabulary, terms_per_doc=config.terms_per_doc, groups=groups)",
  "counts = term_counts(part.texts, vocabulary, terms_per_doc=2 * config.terms_per_doc, groups=groups)",
  ["tests/dp/test_consistency.py::test_vocabulary_step_counts_at_most_the_s_its_noise_is_calibrated_for"]),
 ("8 the ledger's lock removed (no flock, deferred BEGIN)", "dpkps_core/ledger_store/sqlite_store.py",
  ("                fcntl.flock(fd, fcntl.LOCK_EX)\n", 'conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")'),
  ("                pass\n", 'conn.execute("BEGIN")'),
  ["tests/ledger_store/test_filter.py::test_concurrent_processes_never_overspend_and_every_charge_is_accounted_for"],
  "slow"),
 ("9 export allowlist accepts sub/<allowed name>", "dpkps_core/dossier/export.py",
  "if len(pure.parts) != 1 or name not in ALLOWED_RUN_FILES:", "if base not in ALLOWED_RUN_FILES:",
  ["tests/dossier/test_export.py::test_allowlist_refuses_every_allowed_name_inside_a_sub_folder",
   "tests/dossier/test_export.py::test_bundle_refuses_a_sub_folder_copy_of_an_allowed_file"]),
 ("9b export follows symlinks in the run folder", "dpkps_core/dossier/export.py",
  "    check_run_files(run, wanted)\n", "",
  ["tests/dossier/test_export.py::test_bundle_refuses_symlinks_in_the_run_folder"]),
 ("10 vocabulary noise halved", "dpkps_core/dp/vocabulary.py",
  "scale=terms_per_doc / epsilon, integer_valued=True)", "scale=terms_per_doc / epsilon / 2, integer_valued=True)",
  ["tests/dp/test_mech_vocabulary.py::test_histogram_release_is_eps_dp_on_a_full_sensitivity_neighbour",
   "tests/dp/test_mech_vocabulary.py::test_private_vocabulary_end_to_end_is_eps_dp"]),
 ("11 smoothed-histogram noise halved", "dpkps_core/dp/histogram.py",
  "noisy = context.noise.add_laplace(hist, scale=scale)", "noisy = context.noise.add_laplace(hist, scale=scale / 2)",
  ["tests/dp/test_mech_histogram.py::test_smoothed_histogram_is_eps_dp_on_a_full_sensitivity_neighbour"]),
 ("12 RFF scale formula without the ensemble size J", "dpkps_core/dp/kde.py",
  "scale = SQRT2 * features / eps_member", "scale = SQRT2 * features / epsilon",
  ["tests/dp/test_mech_rff.py::test_every_member_is_eps_over_j_dp", "tests/dp/test_consistency.py::test_rff_event_matches_every_member_draw"]),
 ("13 vocabulary scale 1/ε instead of S/ε", "dpkps_core/dp/vocabulary.py",
  "scale=terms_per_doc / epsilon, integer_valued=True)", "scale=1 / epsilon, integer_valued=True)",
  ["tests/dp/test_mech_vocabulary.py::test_histogram_release_is_eps_dp_on_a_full_sensitivity_neighbour",
   "tests/dp/test_consistency.py::test_vocabulary_step_counts_at_most_the_s_its_noise_is_calibrated_for"]),
 ("14 DP count noise Laplace(1/(2ε))", "dpkps_core/dp/count.py",
  "scale = 1.0 / epsilon", "scale = 0.5 / epsilon",
  ["tests/dp/test_mech_count.py::test_dp_count_is_eps_dp"]),
 ("15 zCDP: SVT term 1/(sσ)² instead of 2/(sσ)²", "dpkps_core/dp/accounting.py",
  "per_token += 2.0 / (s * sigma) ** 2", "per_token += 1.0 / (s * sigma) ** 2",
  ["tests/dp/test_mech_private_prediction.py::test_sparse_vector_is_within_its_epsilon"]),
 ("16 clip: no lower clamp at −c", "dpkps_core/baselines/private_prediction.py",
  "return np.maximum(-c, z - z.max(axis=-1, keepdims=True) + c)", "return z - z.max(axis=-1, keepdims=True) + c",
  ["tests/baselines/test_private_prediction.py::test_clip_matches_eq1_by_hand"]),
 ("16b clip (torch path): no lower clamp at −c", "dpkps_core/baselines/private_prediction.py",
  "return torch.clamp(z - z.max(dim=-1, keepdim=True).values + c, min=-c)", "return z - z.max(dim=-1, keepdim=True).values + c",
  ["tests/dp/test_mech_private_prediction.py::test_exponential_mechanism_token_is_within_its_bounded_range"]),
 ("17 private token temperature halved", "dpkps_core/baselines/private_prediction.py",
  "token = _sample(zbar, config.temperature, cand, noise.rng)", "token = _sample(zbar, config.temperature / 2, cand, noise.rng)",
  ["tests/dp/test_mech_private_prediction.py::test_exponential_mechanism_token_is_within_its_bounded_range"]),
]
only = sys.argv[1:]
results = []
for name, path, old, new, tests, *marker in BUGS:
    if only and not any(name.startswith(o + " ") for o in only):
        continue
    olds, news = (old, new) if isinstance(old, tuple) else ((old,), (new,))  # one bug may need several edits
    f = ROOT / path
    src = f.read_text()
    counts = [src.count(o) for o in olds]
    if counts != [1] * len(olds):
        results.append((name, "PATTERN NOT FOUND (%s)" % counts, tests)); print(results[-1], flush=True); continue
    planted = src
    for o, n in zip(olds, news):
        planted = planted.replace(o, n)
    f.write_text(planted)
    try:
        r = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker[0] if marker else "not slow",
                            *tests], cwd=ROOT,
                           capture_output=True, text=True, timeout=900)
        last = [l for l in r.stdout.splitlines() if "passed" in l or "failed" in l or "error" in l][-1:]
        results.append((name, "CAUGHT" if r.returncode != 0 else "SURVIVED", tests, last))
    finally:
        f.write_text(src)
    print(results[-1], flush=True)
print(json.dumps(results, indent=1, ensure_ascii=False))
