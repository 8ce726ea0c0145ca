"""Pretrained word vectors: GloVe and word2vec text files, streamed for one vocabulary."""
from __future__ import annotations

import gzip

import pytest
import torch

from lit_rnncells.data.embeddings import EmbeddingsFileError, load_pretrained_vectors

GLOVE = "the 0.1 0.2 0.3\ncat -1 0.5 2e-1\nNew 9 9 9\nnew 1 2 3\nat&t 4 5 6\n. 0 0 1\n"


def test_glove_rows_follow_the_vocabulary_and_coverage(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text(GLOVE)
    words = ["<pad>", "<unk>", "cat", "the", "dog", "."]
    got = load_pretrained_vectors(path, words, 3)
    assert got.found.tolist() == [False, False, True, True, False, True]
    torch.testing.assert_close(got.vectors[2], torch.tensor([-1.0, 0.5, 0.2]))
    torch.testing.assert_close(got.vectors[3], torch.tensor([0.1, 0.2, 0.3]))
    assert got.vectors[4].abs().sum() == 0
    assert got.num_found == 3 and got.coverage == pytest.approx(0.5)
    assert got.describe() == "glove.txt covers 3 of 6 words (50.0%)"


def test_word2vec_header_is_skipped_and_checked(tmp_path):
    path = tmp_path / "vectors.w2v.txt"
    path.write_text("2 3\nthe 0.1 0.2 0.3 \ncat 1 2 3\n")  # word2vec writes a trailing space
    got = load_pretrained_vectors(path, ["the", "cat", "2"], 3)
    assert got.found.tolist() == [True, True, False]
    torch.testing.assert_close(got.vectors[1], torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(EmbeddingsFileError, match=r"vectors\.w2v\.txt, line 1: .*declares 3-dimensional.*"
                                                   r"embedding_size is 4"):
        load_pretrained_vectors(path, ["the"], 4)


def test_dimension_mismatch_names_file_line_and_both_dimensions(tmp_path):
    path = tmp_path / "glove.6B.50d.txt"
    path.write_text("\n" + GLOVE)  # a blank first line: the first vector is on line 2
    with pytest.raises(EmbeddingsFileError, match=r"glove\.6B\.50d\.txt, line 2: the vectors have 3 values but "
                                                   r"embedding_size is 5; set embedding_size to 3"):
        load_pretrained_vectors(path, ["the"], 5)


def test_short_line_and_non_numbers_fail_with_their_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("the 1 2 3\ncat 1 2\n")
    with pytest.raises(EmbeddingsFileError, match=r"bad\.txt, line 2: expected a word and 3 values, found 2"):
        load_pretrained_vectors(path, ["the"], 3)
    path.write_text("the 1 2 3\ncat 1 x 3\n")
    with pytest.raises(EmbeddingsFileError, match=r"bad\.txt, line 2: the values of 'cat' are not all numbers"):
        load_pretrained_vectors(path, ["cat"], 3)


def test_words_with_spaces_take_the_last_dim_fields(tmp_path):
    path = tmp_path / "glove.840B.txt"
    path.write_text("the 1 2\n. . . 3 4\nat name@domain.com 5 6\n")
    got = load_pretrained_vectors(path, [". . .", "at name@domain.com", "."], 2)
    assert got.found.tolist() == [True, True, False]
    torch.testing.assert_close(got.vectors[0], torch.tensor([3.0, 4.0]))
    torch.testing.assert_close(got.vectors[1], torch.tensor([5.0, 6.0]))


def test_lowercase_fallback_never_overrides_an_exact_match(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text(GLOVE)
    got = load_pretrained_vectors(path, ["New", "Cat", "THE"], 3)
    torch.testing.assert_close(got.vectors[0], torch.tensor([9.0, 9.0, 9.0]))  # exact, though "new" comes later
    torch.testing.assert_close(got.vectors[1], torch.tensor([-1.0, 0.5, 0.2]))
    assert got.found.all()
    assert not load_pretrained_vectors(path, ["Cat"], 3, lowercase_fallback=False).found.any()


def test_gzip_file_read_in_place_and_missing_file(tmp_path):
    path = tmp_path / "glove.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("café 1 2\n")
    got = load_pretrained_vectors(path, ["café"], 2)
    assert got.found.tolist() == [True]
    with pytest.raises(FileNotFoundError, match="does not exist; set pretrained_embeddings"):
        load_pretrained_vectors(tmp_path / "nope.txt", ["a"], 2)
