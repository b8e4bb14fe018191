"""The other two generation methods of the field, for comparison with DP-KPS at equal ε (docs/DESIGN.md §3, §4):
private prediction (:mod:`.private_prediction`, [PrivPred]: the mechanism and the run; its public parameters,
zCDP calibration, ledger events and prompts in :mod:`.prediction_config`) and AugPE with the private vocabulary
(:mod:`.augpe`), and the comparison that runs and evaluates all three alike (:mod:`.compare`: its public settings in
:mod:`.compare_settings`, one method each in :mod:`.compare_steps`, the result table in :mod:`.compare_result`)."""
