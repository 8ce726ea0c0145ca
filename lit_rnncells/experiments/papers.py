"""The papers :mod:`.reproduce` reproduces: each paper's experiments (:class:`Experiment`, comparisons at a CPU
budget with the paper's figure for each cell) in :data:`PAPERS`, and the report's notes on what is not a runner
experiment in :data:`NOTES`. Adding an experiment of a paper is one more :class:`Experiment` here."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Experiment:
    """One comparison of a paper at a CPU budget, and the paper's figure for each cell.

    ``cells`` maps the runner's cell spec to the paper's name for it; ``paper`` maps the paper's names to
    its reported value (``None``: not reported); ``metric`` is the runs.csv column compared, shown times
    ``scale``; ``lower_is_better`` orders the cells."""

    name: str
    title: str
    config: str
    cells: Dict[str, str]
    paper: Dict[str, Optional[float]]
    metric: str
    lower_is_better: bool
    budget: str
    seeds: int = 3
    scale: float = 1.0
    match_params: Optional[str] = None
    hidden_size: Optional[int] = None
    vary: Tuple[str, ...] = ()
    extra: Tuple[str, ...] = ()
    test_every_epoch: bool = False
    paper_setting: str = ""
    our_setting: str = ""
    claimed_best: Optional[str] = None
    """Where the paper gives no numbers: the cell it reports best (the verdict checks ours against it)."""


def with_seeds(experiments: Sequence[Experiment], seeds: Optional[int]) -> List[Experiment]:
    """``experiments`` with seeds 1 to ``seeds`` each (``reproduce --seeds``; ``None`` keeps each one's own). The
    first seeds of a longer run are the shorter run's, so more seeds add runs beside the finished ones."""
    return [exp if seeds is None else replace(exp, seeds=seeds) for exp in experiments]


LM_SMALL = ("--model.init_args.embedding_size", "64", "--model.init_args.regularization.dropout", "0.0",
            "--data.init_args.batch_size", "32", "--data.init_args.bptt", "100",
            "--trainer.val_check_interval", "100", "--trainer.limit_val_batches", "40")
MZU_PTB = "transition_depth=1,share_transition=true,layer_norm=true,candidate_dropout=0.5"
"""The MZU paper's PTB settings beyond the cells' defaults (4 zones, 2 capsules, 3 routing iterations, λ = 1):
one shared t-MZU, layer normalisation, dropout 0.5 on the candidate activation."""
GRU_PTB = "layer_norm=true,candidate_dropout=0.5"
"""The paper's GRU baselines on PTB: "we also apply dropout and layer normalization to GRUs, and build models with
the same settings to our MZUs" (its footnote 3): :class:`~lit_rnncells.cells.GRUDT` (``transition_depth=0``: a GRU)
with layer norm and dropout 0.5 on the candidate, as the MZUs."""
COMPILED = ("--model.init_args.backend", "compiled")
"""The compiled recurrence (``backend: compiled``): the same values as eager, faster for the MZU cells."""
MCRNN_SEQ2SEQ_CELLS = {"LSTM": "Baseline-RNN", "MultiChannel(cell=LSTM,block_size=4)": "MC-RNN-3"}
"""The MC-RNN paper's seq2seq comparisons: its LSTM RNNSearch against MC-RNN-3 around the same LSTM."""
MCRNN_SEQ2SEQ_CPU = ("--model.init_args.embedding_size", "128", "--data.init_args.subwords.subword_vocab_size", "8000",
                     "--trainer.val_check_interval", "0.5", "--trainer.limit_val_batches", "20")
"""Their CPU budget beyond the hidden size: embedding 128, a BPE of 8,000, validation twice an epoch on 20 batches."""


PAPERS: Dict[str, Tuple[str, List[Experiment]]] = {
    "mzu": ("MZU: Multi-Zone Unit "
             "(Meng, Zhang, Liu & Zhou, *Multi-Zone Unit for Recurrent Neural Networks*, AAAI 2020)", [
        Experiment(
            name="ptb_char", title="PTB character LM, test BPC (Table 1)",
            config="configs/lm/ptb_char_gru.yaml",
            cells={f"GRUDT(transition_depth=0,{GRU_PTB})": "GRU",
                   f"GRUDT(transition_depth=1,share_transition=true,{GRU_PTB})": "GRU+DT",
                   f"SatMZU({MZU_PTB})": "satMZU+DT", f"GcnMZU({MZU_PTB})": "gcnMZU+DT",
                   f"CapMZU({MZU_PTB})": "capMZU+DT"},
            paper={"GRU": 1.269, "GRU+DT": 1.208, "satMZU+DT": 1.189, "gcnMZU+DT": 1.183, "capMZU+DT": 1.181},
            metric="test/bpc", lower_is_better=True, budget="epochs=1", match_params="GRU@256",
            extra=LM_SMALL + COMPILED,
            paper_setting="embedding 256, hidden 800, filter 1000, batch 256, BPTT 150, Adam 1e-3, clip 5; MZUs "
                          "with 4 zones, 2 capsules, 3 routing iterations, λ = 1, one t-MZU sharing the "
                          "M-functions, layer normalisation and dropout 0.5 on the candidate activation; GRUs "
                          "also with dropout and layer normalisation (footnote 3; where, not said); epochs not given",
            our_setting="the paper's cell settings (MZUs: 4 zones, 2 capsules, 3 routing iterations, λ = 1, "
                        "`share_transition`, `layer_norm`, `candidate_dropout=0.5`; GRU+DT with one shared "
                        "transition GRU; GRU and GRU+DT, as the paper's footnote 3 says, with layer norm and "
                        "candidate dropout 0.5 too: `GRUDT` (`transition_depth=0` for the GRU) with `layer_norm`, "
                        "`candidate_dropout=0.5`, where the paper does not say where, as in the MZU: on each "
                        "pre-activation, and on the candidate; no other dropout on any cell), Adam 1e-3, clip "
                        "5; at the CPU budget: parameters matched to a GRU of 256 (≈263k), filter size = hidden "
                        "size, embedding 64, batch 32, BPTT 100, one epoch (1,568 steps), validation every 100 "
                        "steps on 40 batches, the best tested; `backend: compiled` (on CPU the MZU cells compile, the "
                        "others keep their eager step: docs/measured.md; values are eager's either way)"),
        Experiment(
            name="absa_restaurants", title="SemEval-2014 Restaurants (DS), test accuracy % (Table 6)",
            config="configs/classification/absa_restaurants_gru_dt.yaml",
            cells={f"GRUDT(transition_depth=1,{GRU_PTB})": "GRU+DT",
                   "CapMZU(transition_depth=1,layer_norm=true,candidate_dropout=0.5)": "capMZU+DT"},
            paper={"GRU+DT": 78.25, "capMZU+DT": 79.40}, metric="test/acc", scale=100.0,
            lower_is_better=False, budget="epochs=60", match_params="GRUDT@64",
            extra=("--model.init_args.embedding_size", "100", "--model.init_args.pretrained_embeddings", "null",
                   "--data.init_args.batch_size", "32"),
            paper_setting="capMZU+DT (4 zones, 2 capsules, 3 routing iterations, λ = 1) against GRU+DT, Bi-RNN, "
                          "mean pooling, aspect embedding concatenated, 5 runs; layer normalisation and candidate "
                          "dropout are stated for the language models only; no ABSA sizes, dropout rates or schedule "
                          "given",
            our_setting="capMZU+DT with the paper's cell settings and, our choice where the paper is silent, "
                        "layer normalisation and candidate dropout 0.5 (the PTB rate), unshared transition (the "
                        "paper shares on PTB only); GRU+DT likewise with layer normalisation and candidate dropout 0.5 (as "
                        "the paper's footnote 3 does for its PTB GRUs); "
                        "dropout 0.5, Adam 1e-3, batch 32, clip 5 from the config; no pretrained vectors (none "
                        "on this machine), embedding 100, parameters matched to a GRU+DT of 64, 60 epochs, best "
                        "validation accuracy tested"),
    ]),
    "mufuru": ("MuFuRU: Multi-Function Recurrent Unit "
             "(Weissenborn & Rocktäschel, *MuFuRU: The Multi-Function Recurrent Unit*, arXiv:1606.03002)", [
        Experiment(
            name="logic_fig1a", title="Propositional logic, test accuracy % on 11-20 gates (Fig. 1a)",
            config="configs/logic/gru.yaml", cells={"GRU": "GRU", "MuFuRU": "MuFuRU"},
            paper={"GRU": None, "MuFuRU": None}, metric="test/acc", scale=100.0, lower_is_better=False,
            budget="epochs=100", vary=("model.init_args.hidden_size=4,8",), claimed_best="MuFuRU",
            paper_setting="1,000 training formulas of 5-10 gates, 1,000 test formulas of 11-20 gates, 100 epochs, "
                          "Adam with β1 = 0, β2 = 0.999 (all its experiments), the 7 operations of its Table 1; "
                          "the figure shows MuFuRU of size 8 near 100% and the GRU lower at small sizes "
                          "(no numbers in the text); no embedding size, batch size or learning rate given",
            our_setting="the paper's data, epochs, operations and Adam (β1 = 0, β2 = 0.999); where it is silent, "
                        "our choice: embedding 32, batch 32, learning rate 1e-3, clip 5, 200 validation formulas; "
                        "hidden 4 and 8; compared at equal hidden size as in the paper's figure, where "
                        "MuFuRU has about twice the GRU's parameters"),
        Experiment(
            name="logic_regime", title="Propositional logic, harder regime: test accuracy % on 21-40 gates",
            config="configs/logic/gru.yaml", cells={"GRU": "GRU", "MuFuRU": "MuFuRU"},
            paper={"GRU": None, "MuFuRU": None}, metric="test/acc", scale=100.0, lower_is_better=False,
            budget="epochs=100", seeds=3,
            vary=("data.init_args.train_size=100,1000", "data.init_args.test_gates=[21,40]",
                  "model.init_args.hidden_size=2,4,8"),
            paper_setting="not in the paper: our search for the regime where the cells differ",
            our_setting="100 or 1,000 training formulas of 5-10 gates, test on 21-40 gates, hidden 2/4/8"),
        Experiment(
            name="ptb_word", title="PTB word LM, test perplexity (§4.2)",
            config="configs/lm/ptb_word_gru.yaml", cells={"GRU": "GRU", "MuFuRU": "MuFuRU"},
            paper={"GRU": 123.0, "MuFuRU": 119.7}, metric="test/ppl", lower_is_better=True,
            budget="epochs=5", seeds=3, hidden_size=200,
            extra=("--trainer.val_check_interval", "332", "--trainer.limit_val_batches", "60"),
            paper_setting="PTB with its 10k vocabulary, single-layer models of 200 hidden units, Adam with β1 = 0, "
                          "β2 = 0.999 (all its experiments); no embedding size, batch, BPTT, dropout, learning rate or "
                          "epochs given",
            our_setting="the paper's size: one layer of 200 hidden units for both cells (equal hidden size as the "
                        "paper compares; MuFuRU's cell has 3 times the GRU's parameters, 722k against 241k), Adam "
                        "with β1 = 0, β2 = 0.999; where it is silent, our choice (configs/lm/ptb_word_{gru,mufuru}"
                        ".yaml): embedding 200, untied, batch 20, BPTT 35, learning rate 1e-3, clip 5, locked dropout "
                        "0.3 on the output; at the CPU budget 5 epochs (6,640 steps) of the config's 40, validation "
                        "4 times an epoch on 60 of the 211 validation batches, the best tested on the whole test "
                        "set"),
    ]),
    "caru": ("CARU: Content-Adaptive Recurrent Unit "
             "(Chan, Ke & Im, *CARU: A Content-Adaptive Recurrent Unit for the Transition of Hidden State in NLP*, ICONIP 2020)", [
        Experiment(
            name="imdb", title="IMDB, test accuracy % (Fig. 2)", config="configs/classification/imdb_gru.yaml",
            cells={"GRU": "GRU", "MGU": "MGU", "CARU": "CARU"}, paper={"GRU": None, "MGU": None, "CARU": None}, claimed_best="CARU",
            metric="test/acc", scale=100.0, lower_is_better=False, budget="epochs=3", seeds=3, hidden_size=128,
            test_every_epoch=True,
            extra=("--model.init_args.embedding_size", "64", "--data.init_args.max_length", "200",
                   "--data.init_args.truncation", "head"),
            paper_setting="embedding 100 (pretrained), hidden 256, batch 100 shuffled, Adam 1e-3, a linear layer and "
                          "softmax on the last hidden state, no other layers, 100 epochs; Fig. 2 shows CARU highest "
                          "(values only in the plot); no review length, vocabulary or dropout given",
            our_setting="the paper's training settings (batch 100 shuffled, Adam 1e-3, the last hidden state read "
                        "out, no dropout or other layers); where it is silent, our choice: every word of the training "
                        "reviews in the vocabulary, no gradient clipping; at the CPU budget embedding 64 (random: no pretrained "
                        "vectors on this machine), hidden 128, reviews cut to their first 200 tokens, 3 epochs, "
                        "all 25,000 test reviews"),
        Experiment(
            name="multi30k_de_en", title="Multi30k De→En, test BLEU (Table 2)",
            config="configs/seq2seq/multi30k_de_en_gru.yaml", cells={"GRU": "GRU", "MGU": "MGU", "CARU": "CARU"},
            paper={"GRU": 29.21, "MGU": 28.49, "CARU": 31.99}, metric="test/sacrebleu", lower_is_better=False,
            budget="epochs=1", seeds=3, hidden_size=256,
            extra=("--trainer.val_check_interval", "0.25"),
            paper_setting="RNN encoder-decoder, one layer a side, 256 input and 2048 hidden for every cell, batch 100, "
                          "Adam 1e-3 halved whenever validation stagnates; BLEU-4 (×100 here), mean of several runs; "
                          "no vocabulary, epochs or dropout given",
            our_setting="the paper's settings (configs/seq2seq/multi30k_de_en_gru.yaml: embedding 256, batch 100, "
                        "Adam 1e-3 halved on a validation plateau, equal hidden size for every cell); where it is "
                        "silent, our choice: RNNSearch with additive attention, a joint byte-level BPE of 8,000 "
                        "symbols fitted on the training split, dropout 0.5, clip 1, the best validation loss tested "
                        "with beam 5, sacreBLEU on detokenised text of test_2016_flickr; at the CPU budget hidden 256, "
                        "1 epoch (290 steps), validation 4 times"),
    ]),
    "mcrnn": ("MC-RNN: multi-channel multi-block RNN "
             "(Xu, Huang, Wang, Wang & Liu, *Modeling Local Dependence in Natural Language with Multi-Channel Recurrent Neural Networks*, AAAI 2019)", [
        Experiment(
            name="ptb_word", title="PTB word LM, test perplexity (Table 4, AWD-LSTM setup)",
            config="configs/lm/ptb_word_awd_lstm.yaml",
            cells={"LSTM": "AWD-LSTM", "MultiChannel(cell=LSTM,block_size=4)": "MC-RNN-3"},
            paper={"AWD-LSTM": 58.8, "MC-RNN-3": 56.9}, metric="test/ppl", lower_is_better=True,
            budget="epochs=6", seeds=3, match_params="LSTM@128",
            extra=("--model.init_args.num_layers", "1", "--model.init_args.tie_weights", "false",
                   "--model.init_args.embedding_size", "128", "--trainer.val_check_interval", "100",
                   "--trainer.limit_val_batches", "40") + COMPILED,
            paper_setting="AWD-LSTM's setup (Merity et al. 2018): 3 layers, 1150 hidden, 400 embedding, tied "
                          "weights, DropConnect 0.5 on the hidden-to-hidden weights, dropout 0.4 / 0.25 / 0.4 / 0.1 "
                          "(output / between layers / input / embedding), AR 2, TAR 1, SGD lr 30 with NT-ASGD, "
                          "weight decay 1.2e-6, clip 0.25, batch 20, variable BPTT around 70, 750+ epochs; MC-RNN-3 "
                          "is block size 4 (3 channels); the paper names no other MC-RNN setting",
            our_setting="AWD-LSTM's regularisers and optimiser as above (configs/lm/ptb_word_awd_lstm.yaml: "
                        "DropConnect 0.5, dropouts 0.4 / 0.4 / 0.1, AR 2, TAR 1, SGD 30, NT-ASGD, weight decay, "
                        "clip 0.25, batch 20, variable BPTT 70); at the CPU budget one layer, untied (tying fixes "
                        "the one layer's size to the embedding's, which parameter matching needs free), "
                        "parameters matched to an LSTM of 128, embedding 128, six epochs (about 4,000 steps), "
                        "validation every 100 steps on 40 batches; the recurrence compiled (MC-RNN; the "
                        "LSTM runs fused)"),
        Experiment(
            name="iwslt14_de_en", title="IWSLT14 De→En, test BLEU (Table 2), on a 9,485-pair sample of the training set",
            config="configs/seq2seq/iwslt14_de_en_lstm.yaml",
            cells=MCRNN_SEQ2SEQ_CELLS,
            paper={"Baseline-RNN": 31.03, "MC-RNN-3": 32.23}, metric="test/tok_bleu", lower_is_better=False,
            budget="epochs=8", seeds=3, hidden_size=128,
            extra=MCRNN_SEQ2SEQ_CPU,
            paper_setting="fairseq's IWSLT14 De-En (about 160k training pairs), a BPE of about 25k subwords; RNNSearch "
                          "with a 2-layer LSTM encoder and decoder (MC-RNN-3 around the same LSTM), embedding and "
                          "hidden 256, beam 5, learning rate halved when the dev score stagnates, BLEU; MC-RNN-3 "
                          "has 29M parameters to the baseline's 25M (equal hidden size, not equal parameters); "
                          "optimiser, dropout, clipping and epochs not given",
            our_setting="the paper's model at equal hidden size (configs/seq2seq/iwslt14_de_en_lstm.yaml: 2 layers "
                        "a side, beam 5, Adam 1e-3 halved on a validation plateau; our choices where it is silent: "
                        "dropout 0.3, clip 1, the best validation loss tested); tokenised BLEU on the lowercased "
                        "Moses-tokenised test set, all 6,750 sentences; at the CPU budget the 9,485-pair training "
                        "sample of this machine, a joint BPE of 8,000 symbols fitted on it (25k merges stop short on "
                        "the sample), embedding and hidden 128, 8 epochs (1,192 steps), validation twice an epoch "
                        "on 20 batches"),
        Experiment(
            name="gigaword", title="Gigaword headlines, test ROUGE-1 F1 (Table 3), on the first 10,000 training pairs",
            config="configs/seq2seq/gigaword_lstm.yaml",
            cells=MCRNN_SEQ2SEQ_CELLS,
            paper={"Baseline-RNN": 34.65, "MC-RNN-3": 36.55}, metric="test/rouge1", lower_is_better=False,
            budget="epochs=6", seeds=3, hidden_size=128,
            extra=MCRNN_SEQ2SEQ_CPU,
            paper_setting="the Gigaword headline corpus of Rush et al. (3.8M training pairs, the 1,951-pair test "
                          "set), a vocabulary of 30k words; RNNSearch with a 4-layer LSTM encoder and decoder "
                          "(MC-RNN-3 around the same LSTM), embedding and hidden 256, batch 64, learning rate halved "
                          "when the dev score stagnates, beam 10, ROUGE-1/2/L F1 (ROUGE-2 and ROUGE-L below the "
                          "table); optimiser, dropout, clipping and epochs not given",
            our_setting="the paper's model at equal hidden size (configs/seq2seq/gigaword_lstm.yaml: 4 layers a "
                        "side, beam 10, Adam 1e-3 halved on a validation plateau; our choices where it is silent: "
                        "dropout 0.3, clip 1, the best validation loss tested); ROUGE F1 with Porter stemming "
                        "(rouge-score) on the corpus's tokenised text, all 1,951 test pairs; at the CPU budget the "
                        "first 10,000 training pairs (0.26 %), a joint BPE of 8,000 symbols fitted on them, "
                        "embedding and hidden 128, 6 epochs (942 steps), validation twice an epoch on 20 batches"),
    ]),
}


NOTES: Dict[str, str] = {
    "mufuru": """## SST sentiment (§4.3, Fig. 1c)

Not run at a CPU budget: `configs/classification/sst2_{gru,mufuru}.yaml` train it; this machine has no SST copy.
The paper's PTB word LM (§4.2) is the experiment above.
""",
}
