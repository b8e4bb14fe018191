"""The other two generation methods of the field, for comparison with DP-KPS at equal ε (DESIGN §3, §4):
private prediction (:mod:`.private_prediction`, paper 004) and AugPE with the private vocabulary
(:mod:`.augpe`), and the orchestration that runs and evaluates all three alike (:mod:`.compare`)."""
