"""Character / word language model for any cell, with truncated BPTT and the AWD-LSTM toolbox.

embedding (embedding dropout, locked dropout) → per layer ``Recurrent(cell)`` with DropConnect
on its recurrent weights and locked dropout between layers → optional deep output → softmax
(optionally tied to the embedding). Regularisers and NT-ASGD follow Merity, Keskar & Socher
2018 ("Regularizing and Optimizing LSTM Language Models"); MZU's zone disagreement (Meng et al., AAAI 2020,
eq. 18–19) is added to the loss when the cell provides it. Truncated BPTT is done here
(Lightning 2 has none): the DataModule yields consecutive windows of contiguous streams, the
state is carried from step to step (detached) and reset at each epoch start; evaluation runs
over the whole split with carried state and reports the token-weighted mean NLL across ranks.
"""
from __future__ import annotations

import math
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch import Tensor, nn
from torch.nn import functional as F

from ..utils.arguments import apply_deprecated_names, check_positive, group_as_dict, option_group
from ..cells.base import State
from ..data.language_model import check_vocabulary
from ..data.text import Vocabulary, VocabularyMismatchError
from ..nn.dropout import (LockedDropout, WeightDrop, activation_regularization, embedding_dropout,
                          temporal_activation_regularization)
from ..nn.recurrent import map_state
from .base import CellSpec, RecurrentTask, cell_config
from .language_model_options import (OPTIMIZATION_FIELDS, REGULARIZATION_FIELDS, Optimization,
                                     Regularization)

LayerStates = Tuple[State, ...]
LN2 = math.log(2.0)


class LanguageModel(RecurrentTask):
    """Next-token language model over any cell, trained with truncated BPTT.

    Args:
        cell: the recurrent cell (name or factory). vocab_size: linked from the data.
        embedding_size, hidden_size, num_layers: sizes. With ``tie_weights`` (Press & Wolf 2017)
            the last layer's size is ``embedding_size`` (AWD-LSTM) unless a deep output is used.
        deep_output_size: if > 0, a ``tanh`` layer of that size between the RNN and the softmax.
        aux_loss_weight: multiplies the cells' auxiliary loss (MZU's λ lives in the cell).
        regularization: AWD-LSTM's dropouts and activation penalties (:class:`Regularization`).
        optimization: AWD-LSTM's NT-ASGD and learning-rate rescaling (:class:`Optimization`).
        **deprecated: the old flat names of the groups' fields (``dropout_h``, ``nt_asgd``, ...), for one
            release; each prints one line naming its new key (:attr:`DEPRECATED_NAMES`).
    """

    DEPRECATED_NAMES: ClassVar[Dict[str, str]] = {
        **{name: f"regularization.{name}" for name in REGULARIZATION_FIELDS},
        **{name: f"optimization.{name}" for name in OPTIMIZATION_FIELDS}}
    """Old flat name → its key in a group (configs, command lines and checkpoints from before the groups)."""

    def __init__(self, cell: CellSpec = "GRU", vocab_size: int = 50, embedding_size: int = 128,
                 hidden_size: int = 512, num_layers: int = 1, tie_weights: bool = False, deep_output_size: int = 0,
                 aux_loss_weight: float = 1.0, regularization: Regularization = Regularization(),
                 optimization: Optimization = Optimization(),
                 optimizer: OptimizerCallable = torch.optim.Adam,
                 lr_scheduler: Optional[LRSchedulerCallable] = None, scheduler_monitor: str = "val/loss",
                 compile: bool = False, backend: Optional[str] = None, **deprecated: Any) -> None:
        super().__init__(cell, optimizer, lr_scheduler, scheduler_monitor, compile=compile, backend=backend)
        groups = apply_deprecated_names(type(self).__name__, self.DEPRECATED_NAMES, deprecated, {
            "regularization": option_group(Regularization, regularization, "regularization"),
            "optimization": option_group(Optimization, optimization, "optimization")})
        self.regularization: Regularization = groups["regularization"]
        self.optimization: Optimization = groups["optimization"]
        check_positive(vocab_size=vocab_size, embedding_size=embedding_size, hidden_size=hidden_size,
                       num_layers=num_layers)
        for name, value in (("aux_loss_weight", aux_loss_weight), ("deep_output_size", deep_output_size)):
            if value < 0:
                raise ValueError(f"{name} must be 0 or more, got {value}; use 0 to turn it off.")
        # Plain data only, so checkpoints load with torch.load(weights_only=True); the optimiser is rebuilt
        # from the config (or defaults to Adam) and its state comes from the checkpoint. The groups are saved
        # as dicts, under their names only (the old flat names a caller gave are not saved).
        self.save_hyperparameters(ignore=["optimizer", "lr_scheduler", *deprecated], logger=False)  # model/...
        for name in deprecated:
            self.hparams.pop(name, None)
        self.hparams["cell"] = cell_config(cell)
        self.hparams["regularization"] = group_as_dict(self.regularization)
        self.hparams["optimization"] = group_as_dict(self.optimization)
        dropout, weight_drop = self.regularization.dropout, self.regularization.weight_drop
        dropout_h, dropout_i = self.regularization.dropout_h, self.regularization.dropout_i
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        last = embedding_size if tie_weights and deep_output_size == 0 else hidden_size
        sizes = [embedding_size] + [hidden_size] * (num_layers - 1) + [last]
        self.rnns = nn.ModuleList(WeightDrop(self.make_recurrent(sizes[i], sizes[i + 1]), weight_drop)
                                  for i in range(num_layers))
        self.deep_output = nn.Linear(last, deep_output_size) if deep_output_size > 0 else None
        out_size = deep_output_size if deep_output_size > 0 else last
        self.decoder = nn.Linear(out_size, vocab_size)
        if tie_weights:
            if out_size != embedding_size:
                raise ValueError(f"tie_weights needs the output size ({out_size}) to equal embedding_size "
                                 f"({embedding_size}); set deep_output_size to {embedding_size} or 0.")
            self.decoder.weight = self.embedding.weight
        self.drop_in, self.drop_h, self.drop_out = LockedDropout(dropout_i), LockedDropout(dropout_h), \
            LockedDropout(dropout)
        self._eval_sums: Optional[Tensor] = None  # [summed NLL, tokens] of this rank, float64
        self.vocab: Optional[Vocabulary] = None
        self._train_state: Optional[LayerStates] = None
        self._eval_state: Optional[LayerStates] = None
        self._pending: Optional[Dict[str, Any]] = None  # carried state restored from a checkpoint
        self._val_history: List[float] = []
        self._asgd = False
        self._asgd_average: Optional[Dict[str, Tensor]] = None
        self._swapped: Optional[Dict[str, Tensor]] = None

    @property
    def has_aux_loss(self) -> bool:
        return any(r.module.has_aux_loss for r in self.rnns)

    # --- network -------------------------------------------------------------------------
    def forward(self, tokens: Tensor, state: Optional[LayerStates] = None, lengths: Optional[Tensor] = None
                ) -> Tuple[Tensor, LayerStates, Dict[str, Tensor]]:
        """Logits ``(B, T, V)``, the new per-layer states, and ``aux`` / ``output`` / ``dropped``."""
        x = embedding_dropout(self.embedding, tokens, self.regularization.dropout_e, self.training)
        x = self.drop_in(x)
        states, aux = [], x.new_zeros((), dtype=torch.float32)
        raw = x
        for i, rnn in enumerate(self.rnns):
            if self.training:  # the auxiliary loss (MZU's zone cosines) is only needed for training
                raw, st, layer_aux = rnn(x, None if state is None else state[i], lengths, return_aux=True)
                aux = aux + layer_aux.float()
            else:
                raw, st = rnn(x, None if state is None else state[i], lengths)
            states.append(st)
            x = self.drop_h(raw) if i < len(self.rnns) - 1 else self.drop_out(raw)
        dropped = x
        if self.deep_output is not None:
            x = torch.tanh(self.deep_output(x))
        return self.decoder(x), tuple(states), {"aux": aux, "output": raw, "dropped": dropped}

    def initial_state(self, batch_size: int) -> LayerStates:
        return tuple(r.module.initial_state(batch_size, device=self.device) for r in self.rnns)

    # --- training: truncated BPTT ----------------------------------------------------
    def on_train_epoch_start(self) -> None:
        self._train_state = None  # a new epoch starts every stream afresh
        self._restore_pending()

    def _restore_pending(self) -> None:
        """Take the carried state restored from a checkpoint if it belongs to this epoch. Lightning does not
        call ``on_train_epoch_start`` when it resumes mid-epoch, so the first training step also asks."""
        pending, self._pending = self._pending, None
        if pending is not None and pending["epoch"] == self.current_epoch:
            self._train_state = map_state(lambda t: t.to(self.device), pending["state"])

    def training_step(self, batch: Dict[str, Any], batch_idx: int) -> Tensor:
        inputs, targets = batch["inputs"], batch["targets"]
        if self._pending is not None:
            self._restore_pending()
        state = self._train_state
        if state is not None and _batch_size(state) != inputs.shape[0]:
            state = None
        logits, new_state, extra = self(inputs, state)
        self._train_state = map_state(lambda t: t.detach(), new_state)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
        loss = nll + self.hparams.aux_loss_weight * extra["aux"]
        loss = loss + activation_regularization(extra["dropped"], self.regularization.alpha)
        loss = loss + temporal_activation_regularization(extra["output"], self.regularization.beta)
        n = targets.numel()
        self.log("train/loss", nll, batch_size=n, prog_bar=True, on_step=True, on_epoch=True)
        self.log("train/bpc", nll / LN2, batch_size=n, on_step=True, on_epoch=True)
        self.log("train/ppl", torch.exp(nll.detach().clamp(max=50)), batch_size=n, on_step=True, on_epoch=True)
        if self.has_aux_loss:
            self.log_aux_loss("train", extra["aux"], self.rnns[0].module.aux_loss_name, n)
        return loss

    def on_train_batch_start(self, batch: Dict[str, Any], batch_idx: int) -> None:
        if self.optimization.scale_lr_with_seq_len and batch["seq_len"] != batch["bptt"]:
            for opt in self.trainer.optimizers:
                for group in opt.param_groups:
                    group["lr_unscaled"] = group["lr"]
                    group["lr"] = group["lr"] * batch["seq_len"] / batch["bptt"]

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        for opt in self.trainer.optimizers:
            for group in opt.param_groups:
                if "lr_unscaled" in group:
                    group["lr"] = group.pop("lr_unscaled")

    # --- evaluation over the whole split ---------------------------------------------
    def _eval_step(self, batch: Dict[str, Any], stage: str) -> None:
        inputs, targets, lengths = batch["inputs"], batch["targets"], batch["lengths"]
        if batch["window"] == 0:
            self._eval_state = None
        full = bool((lengths == inputs.shape[1]).all())
        logits, state, _ = self(inputs, self._eval_state, None if full else lengths)
        self._eval_state = state
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="none")
        mask = (torch.arange(inputs.shape[1], device=inputs.device) < lengths.unsqueeze(1)).reshape(-1)
        sums = torch.stack([nll[mask].double().sum(), mask.sum().double()])
        self._eval_sums = sums if self._eval_sums is None else self._eval_sums + sums

    def _eval_epoch_end(self, stage: str) -> float:
        sums = self._eval_sums if self._eval_sums is not None else torch.zeros(2, dtype=torch.float64,
                                                                                  device=self.device)
        self._eval_sums = None
        if self.trainer.world_size > 1:  # every rank's NLL and token count, then one token-weighted mean
            sums = self.trainer.strategy.reduce(sums, reduce_op="sum")
        mean = (sums[0] / sums[1].clamp_min(1)).float()
        self.log(f"{stage}/loss", mean, prog_bar=True)
        self.log(f"{stage}/bpc", mean / LN2)
        self.log(f"{stage}/ppl", torch.exp(mean.clamp(max=50)))
        return float(mean)

    def on_validation_epoch_start(self) -> None:
        self._eval_state, self._eval_sums = None, None
        self._swap_in_average()

    def validation_step(self, batch: Dict[str, Any], batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def on_validation_epoch_end(self) -> None:
        loss = self._eval_epoch_end("val")
        self._swap_back()
        if self.optimization.nt_asgd and not self.trainer.sanity_checking:
            self._maybe_switch_to_asgd(loss)

    def on_test_epoch_start(self) -> None:
        self._eval_state, self._eval_sums = None, None
        self._swap_in_average()

    def test_step(self, batch: Dict[str, Any], batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")
        self._swap_back()

    # --- NT-ASGD (AWD-LSTM §3) -----------------------------------------------------------
    def configure_optimizers(self) -> Any:
        if self._asgd:  # resumed after the switch
            return self._make_asgd(self.optimizer_factory(self.parameters()))
        return super().configure_optimizers()

    def _make_asgd(self, old: torch.optim.Optimizer) -> torch.optim.ASGD:
        group = old.param_groups[0]
        return torch.optim.ASGD(self.parameters(), lr=group["lr"], t0=0, lambd=0.0,
                                weight_decay=group.get("weight_decay", 0.0))

    def _maybe_switch_to_asgd(self, loss: float) -> None:
        n = self.optimization.nonmono
        if not self._asgd and len(self._val_history) > n and loss > min(self._val_history[:-n]):
            rank_zero_info(f"NT-ASGD: validation loss {loss:.4f} did not improve for {n} evaluations; "
                           "switching to averaged SGD.")
            self.trainer.strategy.optimizers = [self._make_asgd(self.trainer.optimizers[0])]
            self._asgd = True
        self._val_history.append(loss)

    def _averages(self) -> Optional[Dict[str, Tensor]]:
        if not self._asgd:
            return None
        if self._trainer is not None and self.trainer.optimizers:
            state = self.trainer.optimizers[0].state
            return {n: state[p]["ax"] for n, p in self.named_parameters() if p in state and "ax" in state[p]}
        return self._asgd_average

    def _swap_in_average(self) -> None:
        averages = self._averages()
        if averages:
            params = dict(self.named_parameters())
            self._swapped = {n: params[n].detach().clone() for n in averages}
            with torch.no_grad():
                for n, avg in averages.items():
                    params[n].copy_(avg)

    def _swap_back(self) -> None:
        if self._swapped:
            params = dict(self.named_parameters())
            with torch.no_grad():
                for n, raw in self._swapped.items():
                    params[n].copy_(raw)
        self._swapped = None

    # --- checkpoints: vocabulary, carried state, NT-ASGD ---------------------------------
    def setup(self, stage: str) -> None:
        dm = self._trainer.datamodule if self._trainer is not None else None
        vocab = getattr(dm, "vocab", None)
        if isinstance(vocab, Vocabulary):
            if self.vocab is not None:
                check_vocabulary(self.vocab, vocab)
            if len(vocab) != self.hparams.vocab_size:
                raise ValueError(f"The model has vocab_size={self.hparams.vocab_size} but the data has "
                                 f"{len(vocab)} symbols; let the CLI link data.vocab_size or fix the config.")
            self.vocab = vocab

    def on_save_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        state = self._train_state
        world = self.trainer.world_size if self._trainer is not None else 1
        if state is not None:  # every rank's carried state (this hook runs on every rank)
            state = map_state(lambda t: (self.all_gather(t) if world > 1 else t.unsqueeze(0)).cpu(), state)
        checkpoint["language_model"] = {
            "vocab": None if self.vocab is None else self.vocab.state_dict(),
            # the checkpoint's epoch: a max_steps stop mid-epoch resumes that epoch (reopen_cut_epoch)
            "train_state": state,
            "epoch": checkpoint.get("epoch", self.current_epoch if self._trainer is not None else 0),
            "world_size": world, "val_history": list(self._val_history), "asgd": self._asgd,
            "asgd_average": {k: v.detach().cpu() for k, v in (self._averages() or {}).items()} or None,
        }

    def on_load_checkpoint(self, checkpoint: Dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        saved = checkpoint.get("language_model", {})
        if saved.get("vocab") is not None:
            vocab = Vocabulary.from_state_dict(saved["vocab"])
            dm = self._trainer.datamodule if self._trainer is not None else None
            if isinstance(getattr(dm, "vocab", None), Vocabulary):
                check_vocabulary(vocab, dm.vocab)
            elif len(vocab) != self.hparams.vocab_size:
                raise VocabularyMismatchError(f"The checkpoint's vocabulary has {len(vocab)} symbols but this model "
                                              f"has vocab_size={self.hparams.vocab_size}; use the checkpoint's data.")
            self.vocab = vocab
        self._val_history = list(saved.get("val_history", []))
        self._asgd = bool(saved.get("asgd", False))
        self._asgd_average = saved.get("asgd_average")
        world = self.trainer.world_size if self._trainer is not None else 1
        if saved.get("train_state") is not None and saved.get("world_size") == world:
            rank = self.global_rank if self._trainer is not None else 0
            epoch = min(saved["epoch"], checkpoint.get("epoch", saved["epoch"]))  # older cut-epoch checkpoints
            self._pending = {"epoch": epoch, "state": map_state(lambda t: t[rank], saved["train_state"])}
        elif saved.get("train_state") is not None:
            rank_zero_warn(f"Resuming on {world} devices from a run on {saved.get('world_size')}: "
                           "the streams differ, so the epoch restarts with a fresh state.")

    # --- sampling ----------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompt: str, length: int = 200, temperature: float = 1.0) -> str:
        """Sample ``length`` tokens after ``prompt`` (``temperature`` → 0 is greedy); returns prompt + sample."""
        if self.vocab is None:
            raise RuntimeError("This model has no vocabulary: load it from a checkpoint or fit it with a "
                               "LanguageModelDataModule first.")
        was_training = self.training
        self.eval()
        tokens = self.vocab.tokenize(prompt)
        ids = self.vocab.encode(tokens).tolist()
        if not ids:  # start after a line end
            ids = [self.vocab.stoi.get("\n", self.vocab.stoi.get("<eos>", 0))]
        logits, state, _ = self(torch.tensor([ids], device=self.device))
        out: List[int] = []
        for _ in range(length):
            last = logits[0, -1].float()
            if temperature <= 1e-6:
                nxt = int(last.argmax())
            else:
                nxt = int(torch.multinomial(torch.softmax(last / temperature, -1), 1))
            out.append(nxt)
            logits, state, _ = self(torch.tensor([[nxt]], device=self.device), state)
        self.train(was_training)
        return self.vocab.detokenize(tokens + self.vocab.decode(out))

    def predict_step(self, batch: Dict[str, Any], batch_idx: int) -> List[Dict[str, Any]]:
        """One record per prompt: ``{"index", "text"}``, the prompt and its sample on one line (a sentence end
        the vocabulary renders as a line break is written ``<eos>``)."""
        text = self.generate(batch["prompt"], int(batch["length"]), float(batch["temperature"]))
        one_line = " <eos> ".join(part.strip() for part in text.split("\n")) if "\n" in text else text
        return [{"index": int(batch.get("index", batch_idx)), "text": one_line, "sample": text}]


def _batch_size(state: LayerStates) -> int:
    first = state[0]
    while isinstance(first, tuple):
        first = first[0]
    return first.shape[1]
