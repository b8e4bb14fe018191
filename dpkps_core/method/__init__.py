"""The DP-KPS method itself ([DP-KPS] §2; docs/DESIGN.md §1–§4): its settings (config), the held-out split, the
public vocabulary and term matching, the ε budget of the steps (budget), the density plan, the sampling of keyphrase
sequences, the streamed corpus passes and the pipeline that chains them. Everything here is pure Python over
``dpkps_core.dp`` (the mechanisms), ``dpkps_core.corpus`` and ``dpkps_core.ledger_store``."""
