"""Mutation-testing kills for dpkps_core.dp.contributions (docs/TESTING.md "Mutation testing").

The bounded per-document contributions of the density mechanisms (docs/DESIGN.md §2.2, §6; module docstring of
dp/contributions.py): a document of an undeclared class contributes nothing, a lone occurrence weighs 1, a
corpus without keyphrases gives the (C, |Ṽ|) zero histogram, and a class without qualifying documents gives an
empty (0, blocks) int64 prefix matrix (the output shapes never depend on the private labels, docs/DESIGN.md §2).
"""

from __future__ import annotations

import numpy as np

from dpkps_core.dp import contributions


def test_undeclared_labels_contribute_nothing_to_the_histograms() -> None:
    kp, labels = [[0, 1], [2, 2, 3], [1]], ["a", "undeclared", "b"]
    got = contributions.class_keyphrase_histograms(kp, labels, ["a", "b"], 4)
    np.testing.assert_allclose(got, [[0.5, 0.5, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    only_declared = contributions.class_keyphrase_histograms([kp[0], kp[2]], ["a", "b"], ["a", "b"], 4)
    np.testing.assert_array_equal(got, only_declared)


def test_undeclared_person_documents_do_not_dilute_the_declared_ones() -> None:
    got = contributions.class_keyphrase_histograms([[0], [1, 1]], ["a", "undeclared"], ["a"], 2, groups=["p", "p"])
    np.testing.assert_allclose(got, [[1.0, 0.0]])


def test_a_single_occurrence_weighs_one() -> None:
    got = contributions.class_keyphrase_histograms([[2], []], ["b", "a"], ["a", "b"], 3)
    np.testing.assert_array_equal(got, [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def test_no_keyphrases_at_all_give_the_zero_histogram_of_the_declared_shape() -> None:
    got = contributions.class_keyphrase_histograms([[], [5, 6]], ["a", "undeclared"], ["a", "b", "c"], 7)
    assert got.shape == (3, 7) and not got.any()


def test_prefix_matrix_of_a_class_without_qualifying_documents_is_empty_int64() -> None:
    for labels in (["b", "b"], ["a", "b"]):  # no document of "a" / one that is too short for 3 blocks
        m = contributions.prefix_matrix([[0, 1], [1, 2, 3]], labels, "a", 3)
        assert m.shape == (0, 3) and m.dtype == np.int64
    full = contributions.prefix_matrix([[0, 1], [1, 2, 3, 4]], ["a", "a"], "a", 3)
    assert full.dtype == np.int64 and full.tolist() == [[1, 2, 3]]
